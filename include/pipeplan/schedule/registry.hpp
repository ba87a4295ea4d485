// pipeplan/schedule/registry.hpp — the built-in schedules by name (as the CLI spells them).
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/schedule/adaptive.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/gpipe.hpp"
#include "pipeplan/schedule/interleaved.hpp"
#include "pipeplan/schedule/merak.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"
#include "pipeplan/schedule/zero_bubble.hpp"

namespace pipeplan::schedule {

enum class schedule_name : std::uint8_t {
    gpipe, one_f_one_b, interleaved, adaptive, zb_h1, merak_early, merak_last, merak_critical
};

/// "gpipe|1f1b|interleaved|adaptive|zb-h1|merak-early|merak-last|merak-critical"
inline constexpr std::string_view schedule_names = "gpipe|1f1b|interleaved|adaptive|zb-h1|merak-early|merak-last|merak-critical";

[[nodiscard]] constexpr std::string_view to_string(schedule_name n) noexcept {
    switch (n) {
        case schedule_name::gpipe: return "gpipe";
        case schedule_name::one_f_one_b: return "1f1b";
        case schedule_name::interleaved: return "interleaved";
        case schedule_name::adaptive: return "adaptive";
        case schedule_name::zb_h1: return "zb-h1";
        case schedule_name::merak_early: return "merak-early";
        case schedule_name::merak_last: return "merak-last";
        case schedule_name::merak_critical: return "merak-critical";
    }
    return "?";
}

/// Parses a CLI schedule name; throws pipeplan::invalid_argument listing the choices.
[[nodiscard]] inline schedule_name parse_schedule_name(std::string_view s) {
    for (auto n : {schedule_name::gpipe, schedule_name::one_f_one_b, schedule_name::interleaved,
                   schedule_name::adaptive, schedule_name::zb_h1, schedule_name::merak_early,
                   schedule_name::merak_last, schedule_name::merak_critical})
        if (to_string(n) == s) return n;
    throw invalid_argument("unknown schedule '" + std::string(s) + "' (choose one of " + std::string(schedule_names) + ")");
}

/// Options of the named schedules (each uses the ones that concern it).
struct named_schedule_options {
    std::size_t chunks = 2;   ///< interleaved: model chunks per device
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< adaptive, zb-h1
    std::size_t inflight_limit = 0;  ///< adaptive (0 = none)
    double w_share = 0.5;     ///< zb-h1
    bool quick = false;       ///< adaptive: uniform preferences only (for inner loops of searches)
};

/// A type-erased generator (models schedule_generator).
using any_generator = std::function<pipeline_schedule(const scenario&)>;

/// The generator of a named schedule. The scenario it expects is prepare_scenario()'s result.
[[nodiscard]] inline any_generator make_generator(schedule_name n, const named_schedule_options& o) {
    switch (n) {
        case schedule_name::gpipe: return gpipe{};
        case schedule_name::one_f_one_b: return one_f_one_b{};
        case schedule_name::interleaved: return interleaved_1f1b{o.chunks};
        case schedule_name::adaptive: {
            adaptive a;
            a.memory_limit_mb = o.memory_limit_mb;
            a.inflight_limit = o.inflight_limit;
            a.search_preferences = !o.quick;
            return a;
        }
        case schedule_name::zb_h1: {
            zb_h1 z;
            z.w_share = o.w_share;
            z.memory_limit_mb = o.memory_limit_mb;
            return z;
        }
        case schedule_name::merak_early: return merak{merak_variant::early_recompute};
        case schedule_name::merak_last: return merak{merak_variant::last_stage_no_recompute};
        case schedule_name::merak_critical: return merak{merak_variant::shifted_critical_path};
    }
    throw invalid_argument("unknown schedule");
}

/// The scenario a named schedule runs on: for interleaved, every stage split into o.chunks
/// equal chunks (split_into_chunks); the scenario itself otherwise.
[[nodiscard]] inline scenario prepare_scenario(schedule_name n, const scenario& sc, const named_schedule_options& o) {
    return n == schedule_name::interleaved ? split_into_chunks(sc, o.chunks) : sc;
}

}  // namespace pipeplan::schedule
