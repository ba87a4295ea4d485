// pipeplan/plan/fields.hpp — the fields of a plan, listed once.
//
// plan_fields(std::type_identity<S>{}) lists the fields of each plan struct (plan_header,
// microbatch_entry, rank_program, buffer, instruction) as (name, member) pairs in file order.
// The binary format (serialize.hpp), the JSON format (json.hpp) and the printers (describe()
// below, `pipeplan plan-show`) walk these tables, so a new field is one line here: the formats
// write and read it under its name, the printers show it. A field's type says how it is
// written (integers, doubles, strings, enums with a core/names.hpp table, tensor_shape,
// vectors of those, and nested plan structs); `field_text` marks the few that need more:
// buffer slots (no_slot is JSON null), names limited to is_plan_name(), and the instruction
// kind (an open set: a code in binary, its name in JSON), the header's version (written as
// plan_format_version) and its placement name (a schedule::placement_kind code in binary
// versions 1 and 2), and the plan identity (printed as 16 hexadecimal digits). `shown` says when a printer shows the field (nullptr: always). `since` is
// the first format version that holds the field: readers of older files leave it at its
// default (binary) or read it only where present (JSON); plan_id's version is the header's
// (binary version 2 files may carry a version 1 header, as the writers of that format made).
// `held_in` picks, per struct, the member a field is read from and written to: an
// instruction's file field `bytes` holds a message's `bytes` and a set_frequency's `clock_mhz`.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "pipeplan/core/names.hpp"
#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/plan/plan.hpp"

namespace pipeplan::plan {

/// How a field is written where its type alone does not say (see the file comment).
enum class field_text : std::uint8_t { plain, slot, name, kind, version, placement, hex };

/// One field of struct S: its name in files and printers, and its member.
template <class S, class T>
struct field {
    using owner = S;
    using value_type = T;
    std::string_view name;
    T S::*member;
    field_text text = field_text::plain;
    bool (*shown)(const S&) = nullptr;  ///< printers: whether the field says anything here (nullptr: always)
    std::uint32_t since = 1;             ///< the first format version holding the field
    bool since_header = false;           ///< binary: `since` is the header's plan version, not the frame's
    T S::* (*held_by)(const S&) = nullptr;  ///< the member holding the field in a given struct (nullptr: `member`)

    /// The member that holds the field's value in `s` (read after the fields before it).
    [[nodiscard]] constexpr T S::*member_of(const S& s) const noexcept { return held_by ? held_by(s) : member; }
    /// The field, held in the member `pick` chooses for each struct.
    [[nodiscard]] constexpr field held_in(T S::* (*pick)(const S&)) const noexcept {
        field f = *this;
        f.held_by = pick;
        return f;
    }

    /// The field, first held by format version v (by the header's version: `header` true).
    [[nodiscard]] constexpr field from(std::uint32_t v, bool header = false) const noexcept {
        field f = *this;
        f.since = v;
        f.since_header = header;
        return f;
    }
};

template <class S, class T>
[[nodiscard]] constexpr field<S, T> make_field(std::string_view name, T S::*member, field_text text = field_text::plain,
                                               bool (*shown)(const S&) = nullptr) noexcept {
    return {name, member, text, shown, 1, false, nullptr};
}

namespace detail {
[[nodiscard]] constexpr bool never_shown(const instruction&) noexcept { return false; }
[[nodiscard]] constexpr bool has_unit(const instruction& x) noexcept {  // a micro-batch and stage of its own
    return is_compute(x.kind) || is_message(x.kind) || x.kind == instr_kind::load_microbatch ||
           x.kind == instr_kind::set_frequency || x.kind == instr_kind::overlap_f_b;
}
[[nodiscard]] constexpr bool has_peer(const instruction& x) noexcept { return x.peer != no_peer; }
[[nodiscard]] constexpr bool has_mode(const instruction& x) noexcept { return x.mode != 0; }
[[nodiscard]] constexpr bool has_reserved(const instruction& x) noexcept { return x.reserved != 0; }
[[nodiscard]] constexpr bool has_bytes(const instruction& x) noexcept {  // set_frequency's clock: describe() says "MHz"
    return x.bytes != 0 && x.kind != instr_kind::set_frequency;
}
/// The files' `bytes` field: a message's size, a set_frequency's clock (MHz).
[[nodiscard]] constexpr auto bytes_or_clock(const instruction& x) noexcept {
    return x.kind == instr_kind::set_frequency ? &instruction::clock_mhz : &instruction::bytes;
}
template <std::uint32_t instruction::*Slot>
[[nodiscard]] constexpr bool has_slot(const instruction& x) noexcept { return x.*Slot != no_slot; }
}  // namespace detail

[[nodiscard]] constexpr auto plan_fields(std::type_identity<microbatch_entry>) noexcept {
    using M = microbatch_entry;
    return std::tuple{make_field("replica", &M::replica), make_field("sample_ids", &M::sample_ids),
                      make_field("shape", &M::shape), make_field("row_sizes", &M::row_sizes).from(2)};
}

[[nodiscard]] constexpr auto plan_fields(std::type_identity<plan_header>) noexcept {
    using H = plan_header;
    return std::tuple{make_field("version", &H::version, field_text::version),
                      make_field("iteration", &H::iteration),
                      make_field("devices", &H::devices),
                      make_field("dp", &H::dp),
                      make_field("chunks", &H::chunks),
                      make_field("placement", &H::placement, field_text::placement),
                      make_field("stage_devices", &H::stage_devices).from(3),
                      make_field("send_rule", &H::sends).from(3),
                      make_field("schedule", &H::schedule, field_text::name),
                      make_field("dtype", &H::type),
                      make_field("zero_stage", &H::zero_stage),
                      make_field("predicted_makespan_ms", &H::predicted_makespan_ms),
                      make_field("predicted_peak_memory_mb", &H::predicted_peak_memory_mb),
                      make_field("device_memory_mb", &H::device_memory_mb).from(4),
                      make_field("model_state_mb", &H::model_state_mb).from(4),
                      make_field("microbatches", &H::microbatches),
                      make_field("plan_id", &H::plan_id, field_text::hex).from(2, true)};
}

[[nodiscard]] constexpr auto plan_fields(std::type_identity<buffer>) noexcept {
    using B = buffer;
    return std::tuple{make_field("offset_bytes", &B::offset_bytes), make_field("size_bytes", &B::size_bytes),
                      make_field("role", &B::role), make_field("mb", &B::microbatch), make_field("stage", &B::stage)};
}

[[nodiscard]] constexpr auto plan_fields(std::type_identity<instruction>) noexcept {
    using I = instruction;
    using namespace detail;
    return std::tuple{make_field("kind", &I::kind, field_text::kind, never_shown),
                      make_field("mode", &I::mode, field_text::plain, has_mode),
                      make_field("dtype", &I::type, field_text::plain, never_shown),
                      make_field("reserved", &I::reserved, field_text::plain, has_reserved),
                      make_field("mb", &I::microbatch, field_text::plain, has_unit),
                      make_field("stage", &I::stage, field_text::plain, has_unit),
                      make_field("peer", &I::peer, field_text::plain, has_peer),
                      make_field("in", &I::in, field_text::slot, has_slot<&I::in>),
                      make_field("out", &I::out, field_text::slot, has_slot<&I::out>),
                      make_field("stash", &I::stash, field_text::slot, has_slot<&I::stash>),
                      make_field("work", &I::work, field_text::slot, has_slot<&I::work>),
                      make_field("shape", &I::shape, field_text::plain, never_shown),
                      make_field("bytes", &I::bytes, field_text::plain, has_bytes).held_in(bytes_or_clock)};
}

[[nodiscard]] constexpr auto plan_fields(std::type_identity<rank_program>) noexcept {
    using P = rank_program;
    return std::tuple{make_field("rank", &P::rank), make_field("arena_bytes", &P::arena_bytes),
                      make_field("live_peak_bytes", &P::live_peak_bytes), make_field("buffers", &P::buffers),
                      make_field("instructions", &P::instructions)};
}

/// A struct with a field table.
template <class S>
concept plan_struct = requires { plan_fields(std::type_identity<S>{}); };

template <class T>
inline constexpr bool is_std_vector = false;
template <class T>
inline constexpr bool is_std_vector<std::vector<T>> = true;
/// A table of nested structs (micro-batches, buffers, instructions): printers leave it out.
template <class T>
inline constexpr bool is_struct_list = false;
template <class T>
inline constexpr bool is_struct_list<std::vector<T>> = plan_struct<T>;

/// Calls f(field) for every field of S, in table order.
template <plan_struct S, class F>
constexpr void for_each_field(F&& f) {
    constexpr auto fields = plan_fields(std::type_identity<S>{});  // a constant: not rebuilt per call
    std::apply([&](const auto&... fs) { (f(fs), ...); }, fields);
}

/// The fewest bytes a value of T takes in the binary format (bounds the counts a reader accepts).
template <class T>
[[nodiscard]] constexpr std::size_t min_binary_bytes() noexcept {
    if constexpr (plan_struct<T>) {
        std::size_t n = 0;
        for_each_field<T>([&](const auto& f) {  // fields every version holds
            if (f.since == 1) n += min_binary_bytes<typename std::decay_t<decltype(f)>::value_type>();
        });
        return n;
    } else if constexpr (is_std_vector<T> || std::is_same_v<T, std::string>) {
        return 4;
    } else if constexpr (std::is_same_v<T, tensor_shape>) {
        return 16;
    } else {
        return sizeof(T);
    }
}

/// `v` as 16 hexadecimal digits (how plan identities are printed).
[[nodiscard]] inline std::string hex16(std::uint64_t v) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
    return s;
}

/// A value as printers show it: numbers, names, "[a, b]" lists (long ones cut, with their length).
template <class T>
[[nodiscard]] std::string field_value_text(const T& v, field_text text = field_text::plain) {
    (void)text;  // slots only
    if constexpr (std::is_same_v<T, std::string>) {
        return v;
    } else if constexpr (std::is_same_v<T, instr_kind>) {
        return kind_name(v);
    } else if constexpr (named_enum<T>) {
        return std::string(name_of(v));
    } else if constexpr (std::is_same_v<T, tensor_shape>) {
        return "[" + std::to_string(v.microbatch_size) + ", " + std::to_string(v.seqlen) + ", " + std::to_string(v.dec_seqlen) +
               ", " + std::to_string(v.hidden) + "]";
    } else if constexpr (is_std_vector<T>) {
        constexpr std::size_t shown = 8;
        std::string s = "[";
        for (std::size_t i = 0; i < v.size() && i < shown; ++i) s += (i ? ", " : "") + field_value_text(v[i], text);
        if (v.size() > shown) s += ", ... (" + std::to_string(v.size()) + " values)";
        return s + "]";
    } else if constexpr (std::is_floating_point_v<T>) {
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back as v
        return std::string(buf, r.ptr);
    } else {
        if constexpr (std::is_same_v<T, std::uint32_t>)
            if (text == field_text::slot && v == no_slot) return "-";
        if constexpr (std::is_same_v<T, std::uint64_t>)
            if (text == field_text::hex) return hex16(v);
        return std::to_string(+v);
    }
}

/// "name value" for every field of `s` that its table shows (nested structs left out), joined
/// by `sep`: the one printer of plan structs.
template <plan_struct S>
[[nodiscard]] std::string describe_fields(const S& s, std::string_view sep = " ") {
    std::string out;
    for_each_field<S>([&](const auto& f) {
        using T = typename std::decay_t<decltype(f)>::value_type;
        if constexpr (plan_struct<T> || is_struct_list<T>) {
            return;
        } else {
            if (f.shown != nullptr && !f.shown(s)) return;
            if (!out.empty()) out += sep;
            out.append(f.name).append(" ").append(field_value_text(s.*f.member_of(s), f.text));
        }
    });
    return out;
}

/// "forward mb 3 stage 1 in 4 out 5": an instruction's kind and the fields it uses (a
/// set_frequency's clock as "1410 MHz").
[[nodiscard]] inline std::string describe(const instruction& x) {
    std::string s = kind_name(x.kind);
    if (const std::string rest = describe_fields(x); !rest.empty()) s += " " + rest;
    if (x.kind == instr_kind::set_frequency) s += " " + std::to_string(frequency_mhz(x)) + " MHz";
    return s;
}

}  // namespace pipeplan::plan
