// Shared fixtures of the plan tier's tests: small scenarios and every built-in schedule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/schedule/registry.hpp"
#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::test {

/// A seeded scenario with `stages` stages and `mbs` micro-batches of random sizes (costs
/// proportional to a size in [1, 4]), activation messages and transient memory.
inline schedule::scenario random_scenario(std::size_t stages, std::size_t mbs, std::uint64_t seed) {
    splitmix64 rng(seed);
    std::vector<double> mult;
    for (std::size_t j = 0; j < mbs; ++j) mult.push_back(1.0 + static_cast<double>(rng.below(300)) / 100.0);
    std::vector<double> base;
    for (std::size_t s = 0; s < stages; ++s) base.push_back(1.0 + static_cast<double>(rng.below(50)) / 100.0);
    schedule::scenario sc = schedule::scaled_scenario(base, mult, 2.0, 100.0, 10.0, 12.0);
    sc.activation_mb.clear();
    for (double m : mult) sc.activation_mb.push_back(0.5 * m);
    return sc;
}

struct named_case {
    std::string name;
    schedule::pipeline_schedule sched;
    schedule::scenario sc;  // the scenario the schedule runs on (chunked for interleaved)
};

/// Every built-in schedule on `sc` (interleaved with 2 chunks) whose preconditions it meets.
inline std::vector<named_case> all_schedules(const schedule::scenario& sc) {
    std::vector<named_case> out;
    schedule::named_schedule_options o;
    o.chunks = 2;
    o.quick = true;
    for (auto n : {schedule::schedule_name::gpipe, schedule::schedule_name::one_f_one_b,
                   schedule::schedule_name::interleaved, schedule::schedule_name::adaptive,
                   schedule::schedule_name::zb_h1, schedule::schedule_name::merak_early,
                   schedule::schedule_name::merak_last, schedule::schedule_name::merak_critical}) {
        schedule::scenario s = schedule::prepare_scenario(n, sc, o);
        auto g = schedule::make_generator(n, o);
        try {
            out.push_back({std::string(schedule::to_string(n)), g(s), s});
        } catch (const invalid_argument&) {
            // a schedule with a precondition the scenario misses (e.g. Merak's M >= 4)
        }
    }
    return out;
}

}  // namespace pipeplan::test
