// pipeplan/plan/json.hpp — the JSON form of plans (nlohmann-json; see docs/formats.md).
//
// {"format": "pipeplan-plan", "version": 4, "header": {...}, "programs": [{...}]}: every field
// of the tables in fields.hpp under its name; enums by name (core/names.hpp), instruction
// kinds by kind_name(), slots as integers or null (no slot), peer -1 for none, shape as
// [size, seqlen, dec_seqlen, hidden]. Doubles are printed so that they read back bit-for-bit, so the round trip is exact.
// Reading checks every field; every pipeplan::input_error names the file, the line and column
// of the offending value (of the object, for a missing field) and the field path
// (`r.json:40:14: column 'programs[0].instructions[12].kind': ...`); a newer version is refused.
// Versions 1 to 3 read as in serialize.hpp (versions 1 and 2: placement by kind name, its stage
// -> device map, send rule buffered; row_sizes, plan_id, device_memory_mb and model_state_mb
// where present).
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
#include "pipeplan/plan/fields.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/plan/serialize.hpp"

namespace pipeplan::plan {

namespace detail {

/// The JSON value of `v` (a field of type T; see fields.hpp).
template <class T>
nlohmann::json to_json_value(const T& v, field_text text) {
    (void)text;  // slots only
    if constexpr (plan_struct<T>) {
        nlohmann::json j = nlohmann::json::object();
        for_each_field<T>([&](const auto& f) {
            if (f.text == field_text::version) j[std::string(f.name)] = plan_format_version;  // the layout written
            else j[std::string(f.name)] = to_json_value(v.*f.member_of(v), f.text);
        });
        return j;
    } else if constexpr (is_std_vector<T>) {
        nlohmann::json a = nlohmann::json::array();
        for (const auto& e : v) a.push_back(to_json_value(e, text));
        return a;
    } else if constexpr (std::is_same_v<T, std::string> || std::is_floating_point_v<T>) {
        return v;
    } else if constexpr (std::is_same_v<T, tensor_shape>) {
        return nlohmann::json::array({v.microbatch_size, v.seqlen, v.dec_seqlen, v.hidden});
    } else if constexpr (std::is_same_v<T, instr_kind>) {
        return kind_name(v);
    } else if constexpr (named_enum<T>) {
        return std::string(name_of(v));
    } else {
        if constexpr (std::is_same_v<T, std::uint32_t>)
            if (text == field_text::slot && v == no_slot) return nullptr;
        return v;
    }
}

inline std::string plan_json_text(const plan_header& h, const rank_program* const* progs, std::size_t n) {
    nlohmann::json j = {
        {"format", "pipeplan-plan"}, {"version", plan_format_version}, {"header", to_json_value(h, field_text::plain)}};
    nlohmann::json ps = nlohmann::json::array();
    for (std::size_t i = 0; i < n; ++i) ps.push_back(to_json_value(*progs[i], field_text::plain));
    j["programs"] = std::move(ps);
    return j.dump(1) + "\n";
}

/// Strict field access naming the path in errors.
/// Every error names the file, the line and column where the offending value starts (for a
/// missing field: the object that lacks it) and the field path; there is no unlocated error.
struct json_reader {
    const json_document& doc;  ///< the parsed text: errors at a value give its line and column
    std::uint32_t version = plan_format_version;  ///< the file's version (fields.hpp: `since`)
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
    /// The number `v` at `p`; `listed`: an element of a list (the error names the list).
    template <class T>
    T number(const nlohmann::json& v, const std::string& p, bool listed = false) const {
        if constexpr (std::is_floating_point_v<T>) {
            if (!v.is_number()) fail(v, p, listed ? "expected numbers" : "expected a number");
            return v.get<T>();
        } else if constexpr (std::is_signed_v<T>) {
            if (!v.is_number_integer()) fail(v, p, listed ? "expected integers" : "expected an integer");
            const auto x = v.get<std::int64_t>();
            if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) fail(v, p, "out of range");
            return static_cast<T>(x);
        } else {
            const char* want = listed ? "expected integers >= 0" : "expected an integer >= 0";
            if (!v.is_number_unsigned()) fail(v, p, want);
            const auto x = v.get<std::uint64_t>();
            if (x > std::numeric_limits<T>::max()) fail(v, p, listed ? want : "out of range");
            return static_cast<T>(x);
        }
    }
    template <class T>
    T num(const nlohmann::json& j, const char* key, const std::string& path) const {
        return number<T>(at(j, key, path), field(path, key));
    }
    std::string text(const nlohmann::json& v, const std::string& p) const {
        if (!v.is_string()) fail(v, p, "expected a string");
        return v.get<std::string>();
    }
    const nlohmann::json& array(const nlohmann::json& v, const std::string& p) const {
        if (!v.is_array()) fail(v, p, "expected an array");
        return v;
    }

    /// Reads `v` (a field of type T) from the JSON value `j` at path `p`; `listed`: an element of a list.
    template <class T>
    void get(T& v, const nlohmann::json& j, const std::string& p, field_text how, bool listed = false) const {
        (void)how, (void)listed;  // used by some types only
        if constexpr (plan_struct<T>) {
            for_each_field<T>([&](const auto& f) {
                // an older file: what later versions added is read where present (version 2
                // files list row_sizes of packed micro-batches only)
                if (version < plan_format_version && f.since > 1 && j.is_object() && !j.contains(f.name.data())) return;
                get(v.*f.member_of(v), at(j, f.name.data(), p), field(p, f.name.data()), f.text);
            });
        } else if constexpr (is_std_vector<T>) {
            using E = typename T::value_type;
            const auto& a = array(j, p);
            v.resize(a.size());
            for (std::size_t i = 0; i < a.size(); ++i) {
                if constexpr (plan_struct<E>) get(v[i], a[i], p + "[" + std::to_string(i) + "]", how);
                else get(v[i], a[i], p, how, true);
            }
        } else if constexpr (std::is_same_v<T, std::string>) {
            v = text(j, p);
            if ((how == field_text::name || how == field_text::placement) && !is_plan_name(v))
                fail(j, p, "expected at most 64 characters of [A-Za-z0-9_.+-], found '" + printable(v) + "'");
        } else if constexpr (std::is_same_v<T, tensor_shape>) {
            if (!j.is_array() || j.size() != 4) fail(j, p, "expected [size, seqlen, dec_seqlen, hidden]");
            std::uint32_t* f[] = {&v.microbatch_size, &v.seqlen, &v.dec_seqlen, &v.hidden};
            for (std::size_t i = 0; i < 4; ++i) *f[i] = number<std::uint32_t>(j[i], p, true);
        } else if constexpr (std::is_same_v<T, instr_kind>) {
            const std::string name = text(j, p);
            const auto k = parse_kind(name);
            if (!k)
                fail(j, p, "unknown instruction kind '" + printable(name) + "' (a built-in kind name or user<N>, N in " +
                               std::to_string(first_user_kind) + "..255)");
            v = *k;
        } else if constexpr (named_enum<T>) {
            const std::string name = text(j, p);
            const auto e = find_name<T>(name);
            if (!e)
                fail(j, p, "unknown " + std::string(enum_names(T{}).what) + " '" + printable(name) + "' (" + name_list<T>("|") + ")");
            v = *e;
        } else {
            if constexpr (std::is_same_v<T, std::uint32_t>)
                if (how == field_text::slot && j.is_null()) return void(v = no_slot);
            v = number<T>(j, p, listed);
        }
    }
};

/// The header, then the checks no single field can make alone.
inline plan_header header_from_json(const json_reader& r, const nlohmann::json& j) {
    const std::string p = "header";
    plan_header h;
    r.get(h, j, p, field_text::plain);
    if (h.version == 0 || h.version > r.version || (r.version == plan_format_version && h.version != r.version))
        r.fail(r.at(j, "version", p), p + ".version", version_problem(h.version));
    for (const auto& [key, n] : {std::pair{"devices", h.devices}, std::pair{"dp", h.dp}, std::pair{"chunks", h.chunks}})
        if (n == 0) r.fail(r.at(j, key, p), json_reader::field(p, key), "must be >= 1");
    if (r.version < 3) {
        if (const std::string why = upgrade_placement(h); !why.empty()) r.fail(r.at(j, "placement", p), p + ".placement", why);
    } else if (const std::string why = placement_problem(h); !why.empty()) {
        r.fail(r.at(j, "stage_devices", p), p + ".stage_devices", why);
    }
    const auto& mbs = r.at(j, "microbatches", p);
    for (std::size_t k = 0; k < h.microbatches.size(); ++k)
        if (!h.microbatches[k].rows_consistent())
            r.fail(mbs[k], p + ".microbatches[" + std::to_string(k) + "].row_sizes",
                   "the rows must number shape[0] and hold exactly the sample ids");
    return h;
}

/// Reads a whole JSON plan; `one_program`: a rank file, which must hold exactly one program.
inline std::pair<plan_header, std::vector<rank_program>> parse_plan_json(std::string_view text, const std::string& file,
                                                                         bool one_program) {
    const json_document doc(text, file);  // invalid JSON, too deep nesting: located errors
    json_reader r{doc};
    const nlohmann::json& j = doc.root();
    if (!j.is_object()) r.fail(j, "format", "not a pipeplan plan (expected an object)");
    const auto format = j.find("format");
    if (format == j.end() || !format->is_string() || format->get_ref<const std::string&>() != "pipeplan-plan")
        r.fail(format == j.end() ? j : *format, "format", "not a pipeplan plan (format != \"pipeplan-plan\")");
    const auto version = r.num<std::uint32_t>(j, "version", "");
    if (version == 0 || version > plan_format_version) r.fail(r.at(j, "version", ""), "version", version_problem(version));
    r.version = version;
    std::pair<plan_header, std::vector<rank_program>> out;
    out.first = header_from_json(r, r.at(j, "header", ""));
    const auto& ps = r.array(r.at(j, "programs", ""), "programs");
    if (one_program && ps.size() != 1)
        r.fail(ps, "programs", "a rank file holds one program, this one " + std::to_string(ps.size()));
    out.second.resize(ps.size());
    for (std::size_t k = 0; k < ps.size(); ++k) r.get(out.second[k], ps[k], "programs[" + std::to_string(k) + "]", field_text::plain);
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
