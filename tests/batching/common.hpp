// Shared pieces of the batching tests: a pipeline configuration in one call, and the
// properties every split result must have whatever the method.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <optional>
#include <vector>

#include "pipeplan/batching.hpp"

namespace pipeplan::test {

/// A pipeline of `stages` devices with `layers_per_stage` layers each (uniform layout).
inline batching::pipeline_config make_config(int stages, int layers_per_stage, double device_memory_mb, int tp = 1) {
    batching::pipeline_config c;
    c.stages = stages;
    c.layers_per_stage = layers_per_stage;
    c.tp = tp;
    c.device_memory_mb = device_memory_mb;
    return c;
}

/// Checks a split of samples 0..n-1: every sample in exactly one micro-batch, every
/// micro-batch within the memory limits, and the objective (S - 1) * max / v + sum / dp
/// (compared with doctest::Approx, with `epsilon` when given).
inline void check_split_result(const batching::split_result& r, std::size_t n,
                               std::optional<double> epsilon = std::nullopt) {
    std::vector<int> all;
    double sum = 0, mx = 0;
    for (std::size_t k = 0; k < r.microbatches.size(); ++k) {
        all.insert(all.end(), r.microbatches[k].begin(), r.microbatches[k].end());
        const auto& m = r.per_microbatch[k];
        CHECK(m.cost.stored_mb <= r.memory_limit_mb);
        CHECK(m.cost.peak_mb <= r.available_mb);
        sum += m.cost.time_ms;
        mx = std::max(mx, m.cost.time_ms);
    }
    std::sort(all.begin(), all.end());
    std::vector<int> want(n);
    std::iota(want.begin(), want.end(), 0);
    CHECK(all == want);
    auto objective = doctest::Approx((r.stages - 1) * mx / r.virtual_chunks + sum / r.dp);
    if (epsilon) objective.epsilon(*epsilon);
    CHECK(r.objective_ms == objective);
}

}  // namespace pipeplan::test
