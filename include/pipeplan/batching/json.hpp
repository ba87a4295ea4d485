// pipeplan/batching/json.hpp — nlohmann-json serialisation of split results (ADL to_json).
//
// Keys (docs/formats.md): microbatches, objective_ms, tmax_ms, sum_ms, recompute,
// memory_limit_mb, per_microbatch [{mbs, seqlen, dec_seqlen, time_ms, stored_mb, peak_mb[, rows]}],
// dp_groups (when balanced), and the context: method, accounting, memory_limit, available_mb,
// model_state_mb, stages, virtual_chunks, dp, dp_group_ms.
#pragma once

#include <nlohmann/json.hpp>

#include "pipeplan/batching/result.hpp"

namespace pipeplan::batching {

inline void to_json(nlohmann::json& j, const microbatch_record& m) {
    j = nlohmann::json{{"mbs", m.shape.mbs},
                       {"seqlen", m.shape.seqlen_tokens},
                       {"dec_seqlen", m.shape.dec_seqlen_tokens},
                       {"time_ms", m.cost.time_ms},
                       {"stored_mb", m.cost.stored_mb},
                       {"peak_mb", m.cost.peak_mb}};
    if (!m.rows.empty()) j["rows"] = m.rows;
}

inline void to_json(nlohmann::json& j, const split_result& r) {
    j = nlohmann::json::object();
    j["method"] = r.method;
    j["accounting"] = std::string(to_string(r.accounting));
    j["microbatches"] = r.microbatches;
    j["objective_ms"] = r.objective_ms;
    j["tmax_ms"] = r.tmax_ms;
    j["sum_ms"] = r.sum_ms;
    j["recompute"] = std::string(to_string(r.recompute));
    j["memory_limit"] = std::string(to_string(r.limit));
    j["memory_limit_mb"] = r.memory_limit_mb;
    j["available_mb"] = r.available_mb;
    j["model_state_mb"] = r.model_state_mb;
    j["stages"] = r.stages;
    j["virtual_chunks"] = r.virtual_chunks;
    j["dp"] = r.dp;
    j["per_microbatch"] = r.per_microbatch;
    if (!r.dp_groups.empty()) {
        j["dp_groups"] = r.dp_groups;
        j["dp_group_ms"] = r.dp_group_ms;
    }
}

}  // namespace pipeplan::batching
