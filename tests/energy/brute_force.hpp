// Exact time–energy frontier of a tiny energy problem by enumerating every plan.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "pipeplan/energy/problem.hpp"

namespace pipeplan::test {

/// Every plan's (time, energy), replayed through the simulator; throws above `limit` plans.
inline std::vector<energy::plan_cost> all_plans(const energy::energy_problem& p, std::size_t limit = 20000) {
    std::size_t count = 1;
    for (const auto& o : p.options) {
        count *= o.size();
        if (count > limit) throw std::runtime_error("brute force: too many plans");
    }
    std::vector<energy::plan_cost> out;
    out.reserve(count);
    energy::frequency_choice c(p.size(), 0);
    schedule::simulator sim;
    for (std::size_t n = 0; n < count; ++n) {
        out.push_back(energy::replay(p, c, sim));
        for (std::size_t i = 0; i < c.size(); ++i) {  // next plan, like an odometer
            if (++c[i] < p.options[i].size()) break;
            c[i] = 0;
        }
    }
    return out;
}

/// The least energy of a plan no slower than `time_ms`.
inline double best_energy_within(const std::vector<energy::plan_cost>& plans, double time_ms) {
    double best = 1e300;
    for (const auto& x : plans)
        if (x.time_ms <= time_ms * (1 + 1e-12) + 1e-12) best = std::min(best, x.energy_j);
    return best;
}

}  // namespace pipeplan::test
