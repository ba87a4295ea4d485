// plan/result_json.hpp: the planner result's JSON summary and the plan facts.
#include <doctest/doctest.h>

#include <cstddef>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/result_json.hpp"
#include "pipeplan/plan/serialize.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

TEST_CASE("plan_result_json: the summary's keys and the chosen candidate's figures") {
    planner_options o;
    o.config.stages = 2;
    o.config.layers_per_stage = 4;
    o.config.device_memory_mb = 40000;
    o.hidden_size = 1024;
    o.order_search_evaluations = 4;
    std::vector<batching::sample> batch;
    for (int i = 0; i < 24; ++i) batch.push_back({64 + 37 * (i % 7), 8 + i % 5});
    const plan_result r = plan_iteration(make_analytic_model("gpt-6.7b"), batch, o);
    const nlohmann::json j = plan_result_json(r);
    for (const char* k : {"schedule", "microbatches", "makespan_ms", "lower_bound_ms", "peak_memory_mb", "arena_mb",
                          "live_peak_mb", "plan_bytes", "planning_ms", "candidates"})
        CHECK(j.contains(k));
    CHECK(j["schedule"] == r.plan.header.schedule);
    CHECK(j["candidates"].size() == r.candidates.size());
    CHECK(j["candidates"][r.chosen]["makespan_ms"].get<double>() == r.makespan_ms);
    CHECK(j["plan_bytes"][0].get<std::size_t>() == to_binary(share_of(r.plan, 0)).size());
}
