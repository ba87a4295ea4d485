// pipeplan/batching/json.hpp — nlohmann-json serialisation of split results (ADL to_json).
//
// Keys (docs/formats.md): microbatches, objective_ms, tmax_ms, sum_ms, recompute,
// memory_limit_mb, per_microbatch [{mbs, seqlen, dec_seqlen, time_ms, stored_mb, peak_mb[, rows]}],
// dp_groups (when balanced), and the context: method, accounting, memory_limit, available_mb,
// model_state_mb, stages, virtual_chunks, dp, dp_group_ms.
#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/batching/result.hpp"
#include "pipeplan/core/error.hpp"

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

/// The `microbatches` field (lists of sample ids) of a split JSON text — pipeplan's `split --json`
/// or the DynaPipe harness's output; other fields are ignored. Throws invalid_argument naming
/// `source` and the field (e.g. "microbatches[3][1]") or the byte where the JSON is malformed.
[[nodiscard]] inline std::vector<std::vector<int>> microbatches_from_json(std::string_view text, const std::string& source) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw invalid_argument(source + ": not valid JSON at byte " + std::to_string(e.byte));
    }
    if (!j.is_object() || !j.contains("microbatches"))
        throw invalid_argument(source + ": expected an object with a 'microbatches' field");
    const auto& m = j["microbatches"];
    if (!m.is_array()) throw invalid_argument(source + ": microbatches: expected an array of sample-id arrays");
    std::vector<std::vector<int>> out;
    out.reserve(m.size());
    for (std::size_t k = 0; k < m.size(); ++k) {
        const std::string field = "microbatches[" + std::to_string(k) + "]";
        if (!m[k].is_array()) throw invalid_argument(source + ": " + field + ": expected an array of sample ids");
        std::vector<int> ids;
        for (std::size_t i = 0; i < m[k].size(); ++i) {
            const auto& v = m[k][i];
            if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > std::numeric_limits<int>::max())
                throw invalid_argument(source + ": " + field + "[" + std::to_string(i) +
                                       "]: expected a sample id (an integer >= 0), found " + v.dump());
            ids.push_back(static_cast<int>(v.get<long long>()));
        }
        out.push_back(std::move(ids));
    }
    return out;
}

}  // namespace pipeplan::batching
