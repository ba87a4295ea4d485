// pipeplan/batching/json.hpp — nlohmann-json serialisation of split results (ADL to_json).
//
// Keys (docs/formats.md): microbatches, objective_ms, tmax_ms, sum_ms, recompute,
// memory_limit_mb, per_microbatch [{mbs, seqlen, dec_seqlen, time_ms, stored_mb, peak_mb[, rows]}],
// dp_groups (when balanced), and the context: method, accounting, memory_limit, available_mb,
// model_state_mb, stages, virtual_chunks, dp, dp_group_ms.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/batching/packing.hpp"
#include "pipeplan/batching/result.hpp"
#include "pipeplan/batching/sample.hpp"
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

namespace detail {

/// A JSON array of sample ids at `field` of `source`.
[[nodiscard]] inline std::vector<int> sample_ids_from_json(const nlohmann::json& a, const std::string& source,
                                                           const std::string& field) {
    if (!a.is_array()) throw invalid_argument(source + ": " + field + ": expected an array of sample ids");
    std::vector<int> ids;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto& v = a[i];
        if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > std::numeric_limits<int>::max())
            throw invalid_argument(source + ": " + field + "[" + std::to_string(i) +
                                   "]: expected a sample id (an integer >= 0), found " + v.dump());
        ids.push_back(static_cast<int>(v.get<long long>()));
    }
    return ids;
}

/// Packed rows of per_microbatch[k] (when it has `rows`) into `layout`, with its padded lengths.
inline void rows_from_json(const nlohmann::json& m, std::size_t k, const std::string& source, packed_layout& layout) {
    const std::string field = "per_microbatch[" + std::to_string(k) + "]";
    if (!m.is_object() || !m.contains("rows")) return;
    const auto& rows = m["rows"];
    if (!rows.is_array()) throw invalid_argument(source + ": " + field + ".rows: expected an array of rows");
    layout.rows.resize(k + 1);
    layout.row_tokens.resize(k + 1, 0);
    layout.row_dec_tokens.resize(k + 1, 0);
    for (std::size_t r = 0; r < rows.size(); ++r)
        layout.rows[k].push_back(sample_ids_from_json(rows[r], source, field + ".rows[" + std::to_string(r) + "]"));
    for (const auto& [key, out] : {std::pair{"seqlen", &layout.row_tokens[k]}, std::pair{"dec_seqlen", &layout.row_dec_tokens[k]}}) {
        if (!m.contains(key)) continue;
        const auto& v = m[key];
        if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > max_supported_tokens)
            throw invalid_argument(source + ": " + field + "." + key + ": expected a length in tokens, found " + v.dump());
        *out = static_cast<int>(v.get<long long>());
    }
}

}  // namespace detail

/// A split read back from JSON: the micro-batches and, for packed ones, their rows.
struct given_split {
    std::vector<std::vector<int>> microbatches;
    packed_layout layout;  ///< rows and row lengths from per_microbatch[k].rows / seqlen / dec_seqlen
};

/// The `microbatches` field (lists of sample ids) of a split JSON text — pipeplan's `split --json`
/// or the DynaPipe harness's output — and the packed rows of `per_microbatch` where present
/// (each packed micro-batch keeps its rows and row length); other fields are ignored. Throws
/// invalid_argument naming `source` and the field (e.g. "microbatches[3][1]") or the byte where
/// the JSON is malformed.
[[nodiscard]] inline given_split split_from_json(std::string_view text, const std::string& source) {
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
    given_split out;
    out.microbatches.reserve(m.size());
    for (std::size_t k = 0; k < m.size(); ++k)
        out.microbatches.push_back(detail::sample_ids_from_json(m[k], source, "microbatches[" + std::to_string(k) + "]"));
    if (j.contains("per_microbatch") && j["per_microbatch"].is_array())
        for (std::size_t k = 0; k < j["per_microbatch"].size() && k < m.size(); ++k)
            detail::rows_from_json(j["per_microbatch"][k], k, source, out.layout);
    return out;
}

/// The micro-batches alone (split_from_json without the rows).
[[nodiscard]] inline std::vector<std::vector<int>> microbatches_from_json(std::string_view text, const std::string& source) {
    return split_from_json(text, source).microbatches;
}

}  // namespace pipeplan::batching
