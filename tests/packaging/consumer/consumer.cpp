// A program that uses an installed pipeplan the way a consumer would: the core headers (a 1F1B
// schedule simulated on a 4-stage pipeline) and, with PIPEPLAN_CONSUMER_JSON, the JSON component.
#include <cstdio>
#include <vector>

#include "pipeplan/schedule.hpp"
#ifdef PIPEPLAN_CONSUMER_JSON
#include <nlohmann/json.hpp>
#include "pipeplan/schedule/scenario_json.hpp"
#endif

int main() {
    namespace s = pipeplan::schedule;
    // 4 stages x 8 micro-batches of 1 ms forward, 2 ms backward: 1F1B takes (8 + 3) x 3 ms.
    const s::scenario sc = s::scaled_scenario({1.0, 1.0, 1.0, 1.0}, std::vector<double>(8, 1.0), 2.0, 100.0, 10.0, 20.0);
    const s::simulation_result r = s::simulate(sc, s::one_f_one_b{});
    std::printf("1f1b makespan %.1f ms\n", r.makespan_ms);
#ifdef PIPEPLAN_CONSUMER_JSON
    const nlohmann::json j = sc;
    std::printf("scenario json: %zu keys\n", j.size());
#endif
    return r.makespan_ms == 33.0 ? 0 : 1;
}
