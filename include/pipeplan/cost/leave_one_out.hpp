// pipeplan/cost/leave_one_out.hpp — how well a profile's interpolation predicts what it measured.
//
// Every interior profiled point (each dependent axis with >= 3 values has the point strictly
// inside) is predicted from its neighbours on both sides of every such axis
// (profile_grid::predict_left_out), once per interpolation scheme; the relative error
// |predicted − measured| / measured is kept for the points every scheme can predict, so the
// schemes are compared on the same points. `pipeplan profile-error` prints the summary and
// `pipeplan compare --html` draws the distribution (docs/cost-models.md gives the figures).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "pipeplan/cost/profile.hpp"
#include "pipeplan/cost/profile_grid.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan {

/// Relative errors by quantity (time: forward and backward ms; memory: stored and peak MB)
/// and scheme: `time[s]` / `memory[s]` are scheme `schemes[s]`'s errors, point for point.
struct leave_one_out_errors {
    std::vector<std::vector<double>> time, memory;
};

/// The leave-one-out study of `model` (see the file comment).
[[nodiscard]] inline leave_one_out_errors leave_one_out(const profile_cost_model& model,
                                                        std::span<const interpolation_scheme> schemes) {
    leave_one_out_errors out;
    out.time.resize(schemes.size());
    out.memory.resize(schemes.size());
    std::vector<double> predicted(schemes.size());
    for (int tp : model.tp_degrees())
        for (recompute_mode r : all_recompute_modes)
            for (component c : all_components)
                for (cost_metric metric : all_cost_metrics) {
                    const profile_grid* g = model.grid(tp, r, c, metric);
                    if (!g) continue;
                    auto& errors = metric <= cost_metric::backward_ms ? out.time : out.memory;
                    for (std::size_t i = 0; i < g->size(0); ++i)
                        for (std::size_t j = 0; j < g->size(1); ++j)
                            for (std::size_t l = 0; l < g->size(2); ++l) {
                                const auto measured = g->at_index(i, j, l);
                                if (!measured || *measured <= 0) continue;
                                bool all = true;
                                for (std::size_t s = 0; s < schemes.size() && all; ++s) {
                                    const auto p = g->predict_left_out({i, j, l}, schemes[s]);
                                    if (!p) all = false;
                                    else predicted[s] = *p;
                                }
                                if (!all) continue;
                                for (std::size_t s = 0; s < schemes.size(); ++s)
                                    errors[s].push_back(std::abs(predicted[s] - *measured) / *measured);
                            }
                }
    return out;
}

}  // namespace pipeplan
