// pipeplan/plan/result_json.hpp — the JSON summary of a planner's result (`pipeplan plan --json`).
//
//   {"schedule", "microbatches", "makespan_ms", "lower_bound_ms", "peak_memory_mb" [per rank],
//    "arena_mb" [per rank], "live_peak_mb" [per rank], "budget_mb", "memory_attempts", "plan_bytes" [per rank: its binary rank
//    plan], "planning_ms" {"split", "schedule", "lower", "validate", "total"},
//    "candidates" [{"schedule", "split", "feasible", "makespan_ms" (null when infeasible),
//                   "peak_memory_mb", "polished"}]}
// planning_ms differs run to run; everything else is a function of the planner's inputs.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/serialize.hpp"

namespace pipeplan::plan {

/// The summary of `r` (see the file comment).
[[nodiscard]] inline nlohmann::json plan_result_json(const plan_result& r) {
    nlohmann::json j;
    j["schedule"] = r.plan.header.schedule;
    j["microbatches"] = r.plan.header.microbatches.size();
    j["makespan_ms"] = r.makespan_ms;
    j["lower_bound_ms"] = r.lower_bound_ms;
    j["peak_memory_mb"] = r.peak_memory_mb;
    j["arena_mb"] = r.arena_mb;
    j["live_peak_mb"] = r.live_peak_mb;
    j["budget_mb"] = r.budget_mb;
    j["memory_attempts"] = r.memory_attempts;
    std::vector<std::size_t> bytes;
    for (std::size_t k = 0; k < r.plan.programs.size(); ++k) bytes.push_back(to_binary(share_of(r.plan, k)).size());
    j["plan_bytes"] = bytes;
    j["planning_ms"] = {{"split", r.times.split_ms}, {"schedule", r.times.schedule_ms}, {"lower", r.times.lower_ms},
                        {"validate", r.times.validate_ms}, {"total", r.times.total_ms}};
    nlohmann::json cs = nlohmann::json::array();
    for (const auto& c : r.candidates)
        cs.push_back({{"schedule", c.name}, {"split", c.split}, {"feasible", c.feasible},
                      {"makespan_ms", c.feasible ? nlohmann::json(c.makespan_ms) : nlohmann::json(nullptr)},
                      {"peak_memory_mb", c.peak_memory_mb}, {"polished", c.polished}});
    j["candidates"] = cs;
    return j;
}

}  // namespace pipeplan::plan
