// pipeplan/plan/json.hpp — the JSON form of plans (nlohmann-json; see docs/formats.md).
//
// {"format": "pipeplan-plan", "version": 1, "header": {...}, "programs": [{...}]}: every field
// of plan.hpp under its own name; instructions as objects with the kind's name, dtype name,
// slots as integers or null (no slot), peer -1 for none, shape as [size, seqlen, dec_seqlen,
// hidden]. Doubles are printed so that they read back bit-for-bit, so the round trip is exact.
// Reading checks every field; every pipeplan::input_error names the file, the line and column
// of the offending value (of the object, for a missing field) and the field path
// (`r.json:40:14: column 'programs[0].instructions[12].kind': ...`); a newer version is refused.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/json_document.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/plan/serialize.hpp"

namespace pipeplan::plan {

namespace detail {

inline nlohmann::json slot_json(std::uint32_t s) { return s == no_slot ? nlohmann::json(nullptr) : nlohmann::json(s); }
inline nlohmann::json shape_json(const tensor_shape& s) {
    return nlohmann::json::array({s.microbatch_size, s.seqlen, s.dec_seqlen, s.hidden});
}

inline nlohmann::json header_json(const plan_header& h) {
    nlohmann::json mbs = nlohmann::json::array();
    for (const auto& m : h.microbatches) {
        mbs.push_back({{"replica", m.replica}, {"sample_ids", m.sample_ids}, {"shape", shape_json(m.shape)}});
        if (!m.row_sizes.empty()) mbs.back()["row_sizes"] = m.row_sizes;  // packed rows
    }
    return {{"version", h.version},
            {"iteration", h.iteration},
            {"devices", h.devices},
            {"dp", h.dp},
            {"chunks", h.chunks},
            {"placement", std::string(schedule::to_string(h.placement))},
            {"schedule", h.schedule},
            {"dtype", std::string(to_string(h.type))},
            {"zero_stage", h.zero_stage},
            {"predicted_makespan_ms", h.predicted_makespan_ms},
            {"predicted_peak_memory_mb", h.predicted_peak_memory_mb},
            {"microbatches", std::move(mbs)},
            {"plan_id", h.plan_id}};
}

inline nlohmann::json program_json(const rank_program& p) {
    nlohmann::json bufs = nlohmann::json::array(), ins = nlohmann::json::array();
    for (const auto& b : p.buffers)
        bufs.push_back({{"offset_bytes", b.offset_bytes}, {"size_bytes", b.size_bytes},
                        {"role", std::string(to_string(b.role))}, {"mb", b.mb}, {"stage", b.stage}});
    for (const auto& x : p.instructions)
        ins.push_back({{"kind", kind_name(x.kind)}, {"mode", x.mode}, {"dtype", std::string(to_string(x.type))},
                       {"reserved", x.reserved}, {"mb", x.mb}, {"stage", x.stage}, {"peer", x.peer},
                       {"in", slot_json(x.in)}, {"out", slot_json(x.out)}, {"stash", slot_json(x.stash)},
                       {"work", slot_json(x.work)}, {"shape", shape_json(x.shape)}, {"bytes", x.bytes}});
    return {{"rank", p.rank}, {"arena_bytes", p.arena_bytes}, {"live_peak_bytes", p.live_peak_bytes},
            {"buffers", std::move(bufs)}, {"instructions", std::move(ins)}};
}

inline std::string plan_json_text(const plan_header& h, const rank_program* const* progs, std::size_t n) {
    nlohmann::json j = {{"format", "pipeplan-plan"}, {"version", plan_format_version}, {"header", header_json(h)}};
    nlohmann::json ps = nlohmann::json::array();
    for (std::size_t i = 0; i < n; ++i) ps.push_back(program_json(*progs[i]));
    j["programs"] = std::move(ps);
    return j.dump(1) + "\n";
}

/// Strict field access naming the path in errors.
/// Every error names the file, the line and column where the offending value starts (for a
/// missing field: the object that lacks it) and the field path; there is no unlocated error.
struct json_reader {
    const json_document& doc;  ///< the parsed text: errors at a value give its line and column
    [[noreturn]] void fail(const nlohmann::json& at, const std::string& path, const std::string& why) const {
        doc.fail(at, path, why);
    }
    /// "path.key", or "key" at the top level.
    static std::string field(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
    const nlohmann::json& at(const nlohmann::json& j, const char* key, const std::string& path) const {
        if (!j.is_object()) fail(j, path, "expected an object");
        auto it = j.find(key);
        if (it == j.end()) fail(j, field(path, key), "missing");
        return *it;
    }
    template <class T>
    T num(const nlohmann::json& j, const char* key, const std::string& path) const {
        const auto& v = at(j, key, path);
        const std::string p = field(path, key);
        if constexpr (std::is_floating_point_v<T>) {
            if (!v.is_number()) fail(v, p, "expected a number");
            return v.get<T>();
        } else if constexpr (std::is_signed_v<T>) {
            if (!v.is_number_integer()) fail(v, p, "expected an integer");
            const auto x = v.get<std::int64_t>();
            if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) fail(v, p, "out of range");
            return static_cast<T>(x);
        } else {
            if (!v.is_number_unsigned()) fail(v, p, "expected an integer >= 0");
            const auto x = v.get<std::uint64_t>();
            if (x > std::numeric_limits<T>::max()) fail(v, p, "out of range");
            return static_cast<T>(x);
        }
    }
    std::string text(const nlohmann::json& j, const char* key, const std::string& path) const {
        const auto& v = at(j, key, path);
        if (!v.is_string()) fail(v, field(path, key), "expected a string");
        return v.get<std::string>();
    }
    const nlohmann::json& array(const nlohmann::json& j, const char* key, const std::string& path) const {
        const auto& v = at(j, key, path);
        if (!v.is_array()) fail(v, field(path, key), "expected an array");
        return v;
    }
    std::uint32_t slot(const nlohmann::json& j, const char* key, const std::string& path) const {
        if (at(j, key, path).is_null()) return no_slot;
        return num<std::uint32_t>(j, key, path);
    }
    tensor_shape shape(const nlohmann::json& j, const std::string& path) const {
        const auto& a = array(j, "shape", path);
        if (a.size() != 4) fail(a, path + ".shape", "expected [size, seqlen, dec_seqlen, hidden]");
        tensor_shape s;
        std::uint32_t* f[] = {&s.microbatch_size, &s.seqlen, &s.dec_seqlen, &s.hidden};
        for (std::size_t i = 0; i < 4; ++i) {
            if (!a[i].is_number_unsigned() || a[i].get<std::uint64_t>() > UINT32_MAX) fail(a[i], path + ".shape", "expected integers >= 0");
            *f[i] = a[i].get<std::uint32_t>();
        }
        return s;
    }
};

inline plan_header header_from_json(const json_reader& r, const nlohmann::json& j) {
    const std::string p = "header";
    plan_header h;
    h.version = r.num<std::uint32_t>(j, "version", p);
    h.iteration = r.num<std::uint64_t>(j, "iteration", p);
    h.devices = r.num<std::uint32_t>(j, "devices", p);
    h.dp = r.num<std::uint32_t>(j, "dp", p);
    h.chunks = r.num<std::uint32_t>(j, "chunks", p);
    const std::pair<const char*, std::uint32_t> counts[] = {{"devices", h.devices}, {"dp", h.dp}, {"chunks", h.chunks}};
    for (const auto& [key, n] : counts)
        if (n == 0) r.fail(r.at(j, key, p), json_reader::field(p, key), "must be >= 1");
    const std::string pl = r.text(j, "placement", p);
    const auto placement = find_name<schedule::placement_kind>(pl);
    if (!placement)
        r.fail(r.at(j, "placement", p), p + ".placement",
               "unknown placement '" + printable(pl) + "' (" + name_list<schedule::placement_kind>("|") + ")");
    h.placement = *placement;
    h.schedule = r.text(j, "schedule", p);
    if (!is_plan_schedule_name(h.schedule))
        r.fail(r.at(j, "schedule", p), p + ".schedule",
               "expected at most 64 characters of [A-Za-z0-9_.+-], found '" + printable(h.schedule) + "'");
    const std::string type = r.text(j, "dtype", p);
    const auto t = parse_dtype(type);
    if (!t) r.fail(r.at(j, "dtype", p), p + ".dtype", "unknown dtype '" + printable(type) + "' (" + dtype_choices() + ")");
    h.type = *t;
    h.zero_stage = r.num<std::uint8_t>(j, "zero_stage", p);
    h.predicted_makespan_ms = r.num<double>(j, "predicted_makespan_ms", p);
    const auto& peaks = r.array(j, "predicted_peak_memory_mb", p);
    for (const auto& x : peaks) {
        if (!x.is_number()) r.fail(x, p + ".predicted_peak_memory_mb", "expected numbers");
        h.predicted_peak_memory_mb.push_back(x.get<double>());
    }
    const auto& mbs = r.array(j, "microbatches", p);
    for (std::size_t k = 0; k < mbs.size(); ++k) {
        const std::string q = p + ".microbatches[" + std::to_string(k) + "]";
        microbatch_entry m;
        m.replica = r.num<std::uint32_t>(mbs[k], "replica", q);
        for (const auto& id : r.array(mbs[k], "sample_ids", q)) {
            if (!id.is_number_unsigned() || id.get<std::uint64_t>() > UINT32_MAX)
                r.fail(id, q + ".sample_ids", "expected integers >= 0");
            m.sample_ids.push_back(id.get<std::uint32_t>());
        }
        m.shape = r.shape(mbs[k], q);
        if (mbs[k].contains("row_sizes"))
            for (const auto& n : r.array(mbs[k], "row_sizes", q)) {
                if (!n.is_number_unsigned() || n.get<std::uint64_t>() < 1 || n.get<std::uint64_t>() > UINT32_MAX)
                    r.fail(n, q + ".row_sizes", "expected integers >= 1");
                m.row_sizes.push_back(n.get<std::uint32_t>());
            }
        if (!m.rows_consistent())
            r.fail(mbs[k], q + ".row_sizes", "the rows must number shape[0] and hold exactly the sample ids");
        h.microbatches.push_back(std::move(m));
    }
    if (h.version >= 2) h.plan_id = r.num<std::uint64_t>(j, "plan_id", p);
    return h;
}

inline instruction instruction_from_json(const json_reader& r, const nlohmann::json& j, const std::string& q) {
    instruction x;
    const std::string kind = r.text(j, "kind", q);
    const auto k = parse_kind(kind);
    if (!k)
        r.fail(r.at(j, "kind", q), q + ".kind",
               "unknown instruction kind '" + printable(kind) + "' (a built-in kind name or user<N>, N in " +
                   std::to_string(first_user_kind) + "..255)");
    x.kind = *k;
    x.mode = r.num<std::uint8_t>(j, "mode", q);
    const std::string type = r.text(j, "dtype", q);
    const auto t = parse_dtype(type);
    if (!t) r.fail(r.at(j, "dtype", q), q + ".dtype", "unknown dtype '" + printable(type) + "' (" + dtype_choices() + ")");
    x.type = *t;
    x.reserved = r.num<std::uint8_t>(j, "reserved", q);
    x.mb = r.num<std::uint32_t>(j, "mb", q);
    x.stage = r.num<std::uint32_t>(j, "stage", q);
    x.peer = r.num<std::int32_t>(j, "peer", q);
    x.in = r.slot(j, "in", q);
    x.out = r.slot(j, "out", q);
    x.stash = r.slot(j, "stash", q);
    x.work = r.slot(j, "work", q);
    x.shape = r.shape(j, q);
    x.bytes = r.num<std::uint64_t>(j, "bytes", q);
    return x;
}

inline rank_program program_from_json(const json_reader& r, const nlohmann::json& j, const std::string& p) {
    rank_program prog;
    prog.rank = r.num<std::uint32_t>(j, "rank", p);
    prog.arena_bytes = r.num<std::uint64_t>(j, "arena_bytes", p);
    prog.live_peak_bytes = r.num<std::uint64_t>(j, "live_peak_bytes", p);
    const auto& bufs = r.array(j, "buffers", p);
    for (std::size_t s = 0; s < bufs.size(); ++s) {
        const std::string q = p + ".buffers[" + std::to_string(s) + "]";
        buffer b;
        b.offset_bytes = r.num<std::uint64_t>(bufs[s], "offset_bytes", q);
        b.size_bytes = r.num<std::uint64_t>(bufs[s], "size_bytes", q);
        const std::string role = r.text(bufs[s], "role", q);
        bool found = false;
        for (std::size_t k = 0; k < buffer_role_count; ++k)
            if (to_string(static_cast<buffer_role>(k)) == role) b.role = static_cast<buffer_role>(k), found = true;
        if (!found) r.fail(r.at(bufs[s], "role", q), q + ".role", "unknown buffer role '" + printable(role) + "'");
        b.mb = r.num<std::uint32_t>(bufs[s], "mb", q);
        b.stage = r.num<std::uint32_t>(bufs[s], "stage", q);
        prog.buffers.push_back(b);
    }
    const auto& ins = r.array(j, "instructions", p);
    prog.instructions.reserve(ins.size());
    for (std::size_t i = 0; i < ins.size(); ++i)
        prog.instructions.push_back(instruction_from_json(r, ins[i], p + ".instructions[" + std::to_string(i) + "]"));
    return prog;
}

/// Reads a whole JSON plan; `one_program`: a rank file, which must hold exactly one program.
inline std::pair<plan_header, std::vector<rank_program>> parse_plan_json(std::string_view text, const std::string& file,
                                                                         bool one_program) {
    const json_document doc(text, file);  // invalid JSON, too deep nesting: located errors
    const json_reader r{doc};
    const nlohmann::json& j = doc.root();
    if (!j.is_object()) r.fail(j, "format", "not a pipeplan plan (expected an object)");
    const auto format = j.find("format");
    if (format == j.end() || !format->is_string() || format->get_ref<const std::string&>() != "pipeplan-plan")
        r.fail(format == j.end() ? j : *format, "format", "not a pipeplan plan (format != \"pipeplan-plan\")");
    const auto version = r.num<std::uint32_t>(j, "version", "");
    if (version > plan_format_version)
        r.fail(r.at(j, "version", ""), "version",
               "plan version " + std::to_string(version) + " is newer than this reader's (" + std::to_string(plan_format_version) + ")");
    std::pair<plan_header, std::vector<rank_program>> out;
    out.first = header_from_json(r, r.at(j, "header", ""));
    const auto& ps = r.array(j, "programs", "");
    if (one_program && ps.size() != 1)
        r.fail(ps, "programs", "a rank file holds one program, this one " + std::to_string(ps.size()));
    for (std::size_t k = 0; k < ps.size(); ++k) out.second.push_back(program_from_json(r, ps[k], "programs[" + std::to_string(k) + "]"));
    return out;
}

}  // namespace detail

/// JSON text of one rank's share / of a whole plan.
[[nodiscard]] inline std::string to_json_text(const rank_plan& rp) {
    const rank_program* p = &rp.program;
    return detail::plan_json_text(rp.header, &p, 1);
}
[[nodiscard]] inline std::string to_json_text(const execution_plan& plan) {
    std::vector<const rank_program*> ps;
    for (const auto& p : plan.programs) ps.push_back(&p);
    return detail::plan_json_text(plan.header, ps.data(), ps.size());
}

/// Reads a JSON plan with any number of programs.
[[nodiscard]] inline execution_plan execution_plan_from_json(std::string_view text, const std::string& file = "<memory>") {
    auto [h, ps] = detail::parse_plan_json(text, file, false);
    return execution_plan{std::move(h), std::move(ps)};
}
/// Reads a JSON rank file (exactly one program).
[[nodiscard]] inline rank_plan rank_plan_from_json(std::string_view text, const std::string& file = "<memory>") {
    auto [h, ps] = detail::parse_plan_json(text, file, true);
    return rank_plan{std::move(h), std::move(ps.front())};
}


}  // namespace pipeplan::plan
