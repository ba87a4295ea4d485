// The golden scenario of docs/schedules.md for CLI tests: S = 4, forward 4, 4, 2, 2 ms x m, backward 2x
// forward, 4000 MB model state, stored 8000 m MB, peak 16000 m MB, no communication.
#pragma once

#include <nlohmann/json.hpp>

namespace pipeplan::test {

inline nlohmann::json golden_scenario_json() {
    const double m[] = {1, .8, 1.2, .9, 1.1, .7, 1.4, .6};
    const double base[] = {4, 4, 2, 2};
    nlohmann::json j;
    j["stages"] = 4;
    for (double x : m) {
        nlohmann::json mb;
        for (double b : base) {
            mb["forward_ms"].push_back(b * x);
            mb["backward_ms"].push_back(2 * b * x);
            mb["stored_mb"].push_back(8000 * x);
            mb["peak_mb"].push_back(16000 * x);
        }
        j["microbatches"].push_back(mb);
    }
    j["model_state_mb"] = {4000, 4000, 4000, 4000};
    return j;
}

}  // namespace pipeplan::test
