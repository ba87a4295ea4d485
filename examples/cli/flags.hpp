// Checks of command-line flags shared by the `pipeplan` subcommands: every numeric flag is
// range-checked while it is parsed (CLI11 validators, so an error names the flag, the value and
// the valid range, and exits with status 1), and a flag that does not apply to the chosen mode
// is an error rather than silently ignored.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include <CLI/CLI.hpp>

#include "pipeplan/core/error.hpp"

namespace pipeplan::cli {

// Upper limits of the flags (documented in each command's --help): far above any real
// configuration, low enough that the work they ask for stays bounded.
inline constexpr int max_tp = 4096;           ///< tensor-parallel degree
inline constexpr int max_stages = 4096;       ///< pipeline stages
inline constexpr int max_chunks = 64;         ///< virtual chunks (interleaving) per device
inline constexpr int max_dp = 1024;           ///< data-parallel degree
inline constexpr int max_layers = 1 << 16;    ///< layers per stage
inline constexpr int max_mbs = 1 << 20;       ///< micro-batch size (rows)
inline constexpr int max_seqlen_tokens = 1 << 24;  ///< a sequence length of a cost query
inline constexpr double max_memory_mb = 1e9;  ///< a device memory (1 PB)
inline constexpr int max_hidden_size = 1 << 20;       ///< a model's hidden size
inline constexpr double max_bandwidth_gbps = 1e6;     ///< a link (1 Pbit/s)
/// The slowest link accepted (1 Mbit/s): a 100 MB activation already takes 800 s on it, and
/// slower ones only yield message times that no schedule can hide.
inline constexpr double min_bandwidth_gbps = 1e-3;
inline constexpr double max_latency_us = 1e9;         ///< a link's latency per message (1000 s)
inline constexpr double max_time_ms = 1e9;            ///< a time given in ms (11.6 days)
inline constexpr double max_power_w = 1e6;            ///< a device's power
inline constexpr int max_threads = 256;               ///< threads of one command (planners, CPU ranks)

/// An integer flag in [lo, hi]. The value must be a plain decimal integer: no sign wrap-around
/// into unsigned types, no overflow, no fractions.
template <class T>
    requires std::is_integral_v<T>
[[nodiscard]] CLI::Validator integer_in(T lo, T hi) {
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return CLI::Validator(
        [lo, hi, range](std::string& s) -> std::string {
            const std::string_view v = s;
            bool ok = false;
            if (!v.empty() && v.front() == '-') {
                long long x = 0;
                const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
                ok = ec == std::errc{} && p == v.data() + v.size() && std::cmp_greater_equal(x, lo) &&
                     std::cmp_less_equal(x, hi);
            } else {
                unsigned long long x = 0;
                const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
                ok = !v.empty() && ec == std::errc{} && p == v.data() + v.size() && std::cmp_greater_equal(x, lo) &&
                     std::cmp_less_equal(x, hi);
            }
            return ok ? std::string() : "expected an integer in " + range + ", found '" + printable(s) + "'";
        },
        "INT in " + range);
}

/// A finite number in [lo, hi] (or (lo, hi] when `lo_open`).
[[nodiscard]] inline CLI::Validator number_in(double lo, double hi, bool lo_open = false) {
    const auto show = [](double x) {
        std::string t = std::to_string(x);
        while (t.find('.') != std::string::npos && (t.back() == '0' || t.back() == '.')) t.pop_back();
        return t;
    };
    const std::string range = (lo_open ? "(" : "[") + show(lo) + ", " + show(hi) + "]";
    return CLI::Validator(
        [lo, hi, lo_open, range](std::string& s) -> std::string {
            double x = 0;
            const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
            const bool ok = !s.empty() && ec == std::errc{} && p == s.data() + s.size() && std::isfinite(x) &&
                            (lo_open ? x > lo : x >= lo) && x <= hi;
            return ok ? std::string() : "expected a number in " + range + ", found '" + printable(s) + "'";
        },
        "NUMBER in " + range);
}

/// The long names (e.g. "--chunks") of the options given on the command line of `sub`.
[[nodiscard]] inline std::set<std::string> given_flags(const CLI::App& sub) {
    std::set<std::string> out;
    for (const CLI::Option* o : sub.get_options())
        if (o->count() > 0)
            for (const std::string& n : o->get_lnames()) out.insert("--" + n);
    return out;
}

/// Throws invalid_argument "FLAG does not apply REASON" when `flag` was given but `applies` is false.
inline void reject_unless(const std::set<std::string>& given, std::string_view flag, bool applies,
                          const std::string& reason) {
    if (!applies && given.count(std::string(flag)) > 0)
        throw invalid_argument(std::string(flag) + " does not apply " + reason);
}

/// Throws invalid_argument when `--chunks requested` (0: not given) was replaced by the schedule's
/// `applied` chunks: a value is never silently changed.
inline void reject_changed_chunks(std::size_t requested, std::size_t applied, const std::string& schedule) {
    if (requested != 0 && requested != applied)
        throw invalid_argument("--chunks " + std::to_string(requested) + " does not apply to --schedule " + schedule +
                               " on this scenario (it runs " + std::to_string(applied) + " chunk(s) per device)");
}

/// The flag that sets the library option `option` (pipeplan::option_error::option()): "--" and
/// the option's name with '-' for '_', except where the flag is named otherwise.
[[nodiscard]] inline std::string flag_of_option(std::string_view option) {
    if (option == "devices") return "--stages";  // run-cpu's pipeline devices
    std::string flag = "--" + std::string(option);
    for (char& c : flag)
        if (c == '_') c = '-';
    return flag;
}

}  // namespace pipeplan::cli
