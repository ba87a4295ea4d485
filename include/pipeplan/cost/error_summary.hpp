// pipeplan/cost/error_summary.hpp — median / p90 / max of relative errors, the summary every
// model-accuracy report uses (calibration, the profile leave-one-out study).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace pipeplan {

/// Summary of relative errors |model - reference| / reference.
struct error_summary {
    std::size_t points = 0;
    double median = 0;  ///< median relative error (0.05 = 5%)
    double p90 = 0;     ///< 90th percentile (nearest rank)
    double max = 0;
};

/// Median, p90 (nearest rank) and max of relative errors; all zero for an empty input.
[[nodiscard]] inline error_summary summarize_relative_errors(std::vector<double> errors) {
    error_summary s;
    s.points = errors.size();
    if (errors.empty()) return s;
    std::sort(errors.begin(), errors.end());
    const std::size_t n = errors.size();
    s.median = n % 2 == 1 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
    const auto rank = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(n)));
    s.p90 = errors[std::min(n, std::max<std::size_t>(rank, 1)) - 1];
    s.max = errors.back();
    return s;
}

}  // namespace pipeplan
