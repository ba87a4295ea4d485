// pipeplan/core/names.hpp — the one mapping between enum values and their names.
//
// Every enum with names (CLI spellings, file fields) declares one table next to it, as a
// function found by argument-dependent lookup:
//
//   [[nodiscard]] constexpr auto enum_names(component) noexcept {
//       return name_table<component, 4>{"component", {{{component::encoder, "encoder"}, ...}}};
//   }
//
// The first entry of a value is its name; further entries of the same value are accepted
// aliases. name_of(), find_name(), parse_name() and name_list() work for any such enum, so a
// user's enum gets the same behaviour by declaring its own table (no central list to edit).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "pipeplan/core/error.hpp"

namespace pipeplan {

/// Whether `name` may name what users add to an open set (a schedule, a placement): 1 to 64
/// characters of [A-Za-z0-9_.+-], which every plan format and command line carries as written.
[[nodiscard]] constexpr bool is_portable_name(std::string_view name) noexcept {
    if (name.empty() || name.size() > 64) return false;
    for (const char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '+' || c == '-'))
            return false;
    return true;
}

/// The names of an enum: what it is called in messages, and (value, name) entries.
template <class E, std::size_t N>
struct name_table {
    std::string_view what;
    std::array<std::pair<E, std::string_view>, N> entries;
};

/// An enum with a table: `enum_names(E{})` finds it by argument-dependent lookup.
template <class E>
concept named_enum = std::is_enum_v<E> && requires(E e) {
    enum_names(e).what;
    enum_names(e).entries;
};

/// The name of `e` (its first entry), or "?" when the table lacks it.
template <named_enum E>
[[nodiscard]] constexpr std::string_view name_of(E e) noexcept {
    for (const auto& [v, n] : enum_names(E{}).entries)
        if (v == e) return n;
    return "?";
}

/// The value named `s` (names and aliases), or nullopt.
template <named_enum E>
[[nodiscard]] constexpr std::optional<E> find_name(std::string_view s) noexcept {
    for (const auto& [v, n] : enum_names(E{}).entries)
        if (n == s) return v;
    return std::nullopt;
}

/// The names (no aliases) joined by `sep`, in table order.
template <named_enum E>
[[nodiscard]] std::string name_list(std::string_view sep = ", ") {
    const auto t = enum_names(E{});
    std::string out;
    for (std::size_t i = 0; i < t.entries.size(); ++i) {
        if (name_of(t.entries[i].first) != t.entries[i].second) continue;  // an alias
        if (!out.empty()) out += sep;
        out += t.entries[i].second;
    }
    return out;
}

/// The value named `s`; throws pipeplan::invalid_argument "unknown <what> 's' (valid: a, b)".
template <named_enum E>
[[nodiscard]] E parse_name(std::string_view s) {
    if (const auto v = find_name<E>(s)) return *v;
    throw invalid_argument("unknown " + std::string(enum_names(E{}).what) + " '" + std::string(s) +
                           "' (valid: " + name_list<E>() + ")");
}

}  // namespace pipeplan
