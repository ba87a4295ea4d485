// pipeplan/schedule/registry.hpp — the built-in schedules by name (as the CLI spells them).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/core/names.hpp"
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

[[nodiscard]] constexpr auto enum_names(schedule_name) noexcept {
    return name_table<schedule_name, 8>{"schedule",
                                        {{{schedule_name::gpipe, "gpipe"},
                                          {schedule_name::one_f_one_b, "1f1b"},
                                          {schedule_name::interleaved, "interleaved"},
                                          {schedule_name::adaptive, "adaptive"},
                                          {schedule_name::zb_h1, "zb-h1"},
                                          {schedule_name::merak_early, "merak-early"},
                                          {schedule_name::merak_last, "merak-last"},
                                          {schedule_name::merak_critical, "merak-critical"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(schedule_name n) noexcept { return name_of(n); }

/// Parses a CLI schedule name; throws pipeplan::invalid_argument listing the choices.
[[nodiscard]] inline schedule_name parse_schedule_name(std::string_view s) { return parse_name<schedule_name>(s); }

/// Options of the named schedules (each uses the ones that concern it).
struct named_schedule_options {
    /// Model chunks per device (interleaved; adaptive on a placed scenario). 0 = the scenario's
    /// placement, or 2 for interleaved on a scenario without one. prepare_scenario() sets it.
    std::size_t chunks = 0;
    placement_kind placement = placement_kind::linear;  ///< set by prepare_scenario() (adaptive)
    /// Merak's activation_checkpoint_ratio r (merak-* only; NaN = none: the scenario's ratios).
    double checkpoint_ratio = std::numeric_limits<double>::quiet_NaN();
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
        case schedule_name::interleaved: return interleaved_1f1b{o.chunks == 0 ? 2 : o.chunks};
        case schedule_name::adaptive: {
            adaptive a;
            a.memory_limit_mb = o.memory_limit_mb;
            a.inflight_limit = o.inflight_limit;
            a.search_preferences = !o.quick;
            a.placement = o.placement;
            a.chunks = std::max<std::size_t>(1, o.chunks);
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

/// The Merak variant of a merak-* name (false for the others).
[[nodiscard]] constexpr bool is_merak(schedule_name n) noexcept {
    return n == schedule_name::merak_early || n == schedule_name::merak_last || n == schedule_name::merak_critical;
}

/// The scenario a named schedule runs on, and `o` completed for make_generator():
/// - a scenario whose placement (`devices`, `placement`) has C > 1 chunks per device is run as
///   placed (interleaved, or adaptive on that placement); `o.chunks` must be 0 or C, and the
///   other schedules, which run one stage per device, are an error;
/// - otherwise interleaved splits every stage into o.chunks (default 2) equal chunks
///   (split_into_chunks); the scenario is used as it is for the others;
/// - `o.checkpoint_ratio` (merak-* only; an error for the others) sets the scenario's per-stage
///   ratios to merak_checkpoint_ratios().
/// Throws pipeplan::invalid_argument naming the contradiction.
[[nodiscard]] inline scenario prepare_scenario(schedule_name n, const scenario& sc, named_schedule_options& o) {
    const std::string name(to_string(n));
    const bool ratio = !std::isnan(o.checkpoint_ratio);
    if (ratio && !is_merak(n))
        throw invalid_argument("a checkpoint ratio applies to the merak-* schedules only, not to '" + name + "'");
    const stage_placement placed = placement_of(sc);
    scenario out;
    if (placed.chunks() > 1) {
        const std::string where = "the scenario places its " + std::to_string(sc.stages) + " stages on " +
                                  std::to_string(placed.devices()) + " devices (" + std::to_string(placed.chunks()) +
                                  " chunks per device, " + std::string(to_string(placed.kind())) + ")";
        if (o.chunks != 0 && o.chunks != placed.chunks())
            throw invalid_argument("--chunks " + std::to_string(o.chunks) + " contradicts the scenario: " + where);
        if (n == schedule_name::interleaved && placed.kind() != placement_kind::interleaved)
            throw invalid_argument("schedule 'interleaved' needs an interleaved placement; " + where);
        if (n != schedule_name::interleaved && n != schedule_name::adaptive)
            throw invalid_argument("schedule '" + name + "' runs one stage per device; " + where +
                                   " (use interleaved or adaptive)");
        o.chunks = placed.chunks();
        o.placement = placed.kind();
        out = sc;
    } else if (n == schedule_name::interleaved) {
        if (o.chunks == 0) o.chunks = 2;
        out = split_into_chunks(sc, o.chunks);
        o.placement = o.chunks > 1 ? placement_kind::interleaved : placement_kind::linear;
    } else {
        o.chunks = 1;
        o.placement = placement_kind::linear;
        out = sc;
    }
    if (ratio) {
        const merak_variant v = n == schedule_name::merak_early  ? merak_variant::early_recompute
                                : n == schedule_name::merak_last ? merak_variant::last_stage_no_recompute
                                                                 : merak_variant::shifted_critical_path;
        out.checkpoint_ratio = merak_checkpoint_ratios(out.stages, o.checkpoint_ratio, v);
    }
    return out;
}

}  // namespace pipeplan::schedule
