// pipeplan/schedule/generator.hpp — a schedule, and the concept a schedule generator models.
//
// A schedule generator is any callable object `g(scenario) -> pipeline_schedule`: it reads the
// per-(micro-batch, stage) costs and returns the per-device op lists plus the placement of
// virtual stages. The built-in ones (gpipe, one_f_one_b, interleaved_1f1b, adaptive, zb_h1,
// merak) are plain structs with options as members; researchers plug in their own by writing
// another such struct; simulate() and search_order() take any of them.
#pragma once

#include <concepts>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule/op.hpp"
#include "pipeplan/schedule/placement.hpp"
#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::schedule {

/// What a generator that simulated its own orders (the discovery-based adaptive and zb-h1:
/// order_discovery.hpp) already knows of their wait-free replay on the scenario it was given,
/// with the scenario's own durations: simulate() returns exactly `makespan_ms` (bit for bit),
/// and no device's peak exceeds `memory_limit_mb` (+ 1e-6 for rounding).
struct replay_facts {
    double makespan_ms = 0.0;
    double memory_limit_mb = std::numeric_limits<double>::infinity();
};

/// The result of a generator: what each device runs, in order.
struct pipeline_schedule {
    std::string name;              ///< e.g. "1f1b"
    stage_placement placement;     ///< virtual stage -> device
    device_orders orders;          ///< orders[d] = op list of device d
    double w_share = 0.0;          ///< share of the backward that W ops take (0: no split)
    /// Prices overlapped forward/backward pairs (op::overlaps_next): overlapped_ms() of
    /// timing.hpp; in [0, 1], 1 = no overlap benefit. Unused by schedules without pairs.
    double overlap_factor = 1.0;
    /// Set by generators that know them (replay_facts); describes `orders` as generated, so
    /// code that edits the orders must reset it. The order search uses it to skip simulations.
    std::optional<replay_facts> replay = std::nullopt;
};

/// A schedule generator: scenario -> per-device op lists.
template <class G>
concept schedule_generator = requires(const G& g, const scenario& sc) {
    { g(sc) } -> std::convertible_to<pipeline_schedule>;
};

/// The placement a scenario records (`devices`, `placement`): linear when it has none, else
/// the interleaved or V-shaped placement its map equals. Throws pipeplan::invalid_argument for
/// any other map (the built-in schedules run only these three).
[[nodiscard]] inline stage_placement placement_of(const scenario& sc) {
    if (sc.placement.empty()) return stage_placement::linear(sc.stages);
    const std::size_t D = sc.device_count();
    if (D == 0 || sc.stages % D != 0)
        throw invalid_argument("scenario: " + std::to_string(sc.stages) + " stages do not divide into " +
                               std::to_string(D) + " devices");
    const std::size_t C = sc.stages / D;
    for (const stage_placement& pl : {stage_placement::interleaved(D, C), stage_placement::v_shape(D, C)}) {
        bool same = true;
        for (std::size_t v = 0; v < sc.stages && same; ++v) same = pl.device_of(v) == sc.placement[v];
        if (same) return pl;
    }
    throw invalid_argument("scenario: the placement is neither linear, interleaved (stage s on device s mod " +
                           std::to_string(D) + ") nor v-shaped");
}

/// Op string as the CLI prints it: "F3", or "F3.1" when the placement has several chunks.
[[nodiscard]] inline std::string op_label(const pipeline_schedule& s, op o) {
    return s.placement.chunks() > 1 ? to_string(o, static_cast<int>(s.placement.chunk_of(o.stage))) : to_string(o);
}

/// Device d's order as device_orders text spells it (`pipeplan simulate --json`, orders_text.hpp):
/// op_label() per op, and an overlapped pair (op::overlaps_next) as one token: the forward, `&`,
/// the B it overlaps (`F3.1&B5.0`).
[[nodiscard]] inline std::vector<std::string> order_labels(const pipeline_schedule& s, std::size_t d) {
    const std::vector<op>& ops = s.orders[d];
    std::vector<std::string> out;
    out.reserve(ops.size());
    for (std::size_t p = 0; p < ops.size(); ++p) {
        out.push_back(op_label(s, ops[p]));
        if (ops[p].overlaps_next && p + 1 < ops.size()) out.back() += "&" + op_label(s, ops[++p]);
    }
    return out;
}

}  // namespace pipeplan::schedule
