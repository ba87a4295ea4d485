// pipeplan/plan/result_json.hpp — the JSON summary of a planner's result (`pipeplan plan --json`).
//
//   {"schedule", "microbatches", "makespan_ms", "lower_bound_ms", "peak_memory_mb" [per rank],
//    "arena_mb" [per rank], "live_peak_mb" [per rank], "budget_mb", "memory_attempts", "memory_probes", "plan_bytes" [per rank: its binary rank
//    plan], "planning_ms" {"split", "schedule", "lower", "validate", "total"},
//    "candidates" [{"schedule", "split", "feasible", "makespan_ms" (null when infeasible),
//                   "peak_memory_mb", "polished"}]}
// planning_ms differs run to run; everything else is a function of the planner's inputs.
// facts_json(facts_of(r)) adds what a user asks of a plan after its makespan (the CLI's
// summary and plan manifests carry both):
//   {"recompute", "checkpointed_forwards", "model_state_mb" [per rank],
//    "microbatch_shapes" [{"samples", "seqlen_tokens", "dec_seqlen_tokens" (encoder-decoder),
//                          "rows" (packed)}],
//    "links" {"intra_node", "inter_node": {"pairs", "bandwidth_gbps", "latency_us"}}}
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
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
    j["memory_probes"] = r.memory_probes;
    std::vector<std::size_t> bytes;
    for (std::size_t k = 0; k < r.plan.programs.size(); ++k) bytes.push_back(rank_binary_bytes(r.plan, k));
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


/// What a user asks of a plan after its makespan: the recomputation, each rank's model states,
/// the micro-batch shapes and the links the pipeline's messages take. MB = 10^6 bytes.
struct plan_facts {
    struct shape {
        std::size_t samples = 0;
        std::uint32_t rows = 0, seqlen_tokens = 0, dec_seqlen_tokens = 0;  ///< rows = samples unless packed
        friend auto operator<=>(const shape&, const shape&) = default;
    };
    struct link_class {
        std::size_t pairs = 0;  ///< device pairs that exchange pipeline messages over this kind of link
        double bandwidth_gbps = 0.0, latency_us = 0.0;  ///< bandwidth 0 = free (infinitely fast)
    };
    std::string recompute;
    std::size_t checkpointed_forwards = 0;
    std::vector<double> model_state_mb;  ///< per rank
    std::vector<shape> shapes;           ///< per micro-batch, in the plan's order
    link_class intra_node, inter_node;
};

/// The facts of `r`'s chosen plan.
[[nodiscard]] inline plan_facts facts_of(const plan_result& r) {
    plan_facts f;
    f.recompute = std::string(to_string(r.split.recompute));
    for (const auto& prog : r.plan.programs)
        for (const auto& x : prog.instructions) f.checkpointed_forwards += x.kind == instr_kind::forward && x.mode;
    const schedule::scenario& sc = r.scenario;
    auto device_of = [&](std::size_t s) { return sc.placement.empty() ? s : static_cast<std::size_t>(sc.placement[s]); };
    f.model_state_mb = r.model_state_mb;
    for (const auto& m : r.plan.header.microbatches)
        f.shapes.push_back({m.sample_ids.size(), m.shape.microbatch_size, m.shape.seqlen, m.shape.dec_seqlen});
    std::set<std::pair<std::size_t, std::size_t>> pairs;  // neighbouring stages on different devices
    for (std::size_t s = 0; s + 1 < sc.stages; ++s)
        if (device_of(s) != device_of(s + 1)) pairs.insert(std::minmax(device_of(s), device_of(s + 1)));
    const schedule::network_model& n = sc.network;
    f.intra_node = {0, n.intra_node_bandwidth_gbps, n.intra_node_latency_ms * 1000.0};
    f.inter_node = {0, n.bandwidth_gbps, n.latency_ms * 1000.0};
    for (const auto& [a, b] : pairs) ++(n.same_node(a, b) ? f.intra_node : f.inter_node).pairs;
    return f;
}

/// The facts as JSON (see the file comment).
[[nodiscard]] inline nlohmann::json facts_json(const plan_facts& f) {
    nlohmann::json shapes = nlohmann::json::array();
    for (const auto& s : f.shapes) {
        nlohmann::json j{{"samples", s.samples}, {"seqlen_tokens", s.seqlen_tokens}};
        if (s.dec_seqlen_tokens > 0) j["dec_seqlen_tokens"] = s.dec_seqlen_tokens;
        if (s.rows != s.samples) j["rows"] = s.rows;
        shapes.push_back(std::move(j));
    }
    auto link = [](const plan_facts::link_class& l) {
        return nlohmann::json{{"pairs", l.pairs}, {"bandwidth_gbps", l.bandwidth_gbps}, {"latency_us", l.latency_us}};
    };
    return {{"recompute", f.recompute},
            {"checkpointed_forwards", f.checkpointed_forwards},
            {"model_state_mb", f.model_state_mb},
            {"microbatch_shapes", shapes},
            {"links", {{"intra_node", link(f.intra_node)}, {"inter_node", link(f.inter_node)}}}};
}

}  // namespace pipeplan::plan
