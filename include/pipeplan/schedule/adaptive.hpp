// pipeplan/schedule/adaptive.hpp — DynaPipe's memory-aware adaptive schedule
// (Jiang et al., "DynaPipe: Optimizing Multi-task Training through Dynamic Pipelines",
// EuroSys'24): discover a per-device order by simulating a memory-aware policy on the actual
// (unequal) micro-batches, then replay that order wait-free.
//
// pipeplan's discovery (order_discovery.hpp) simulates a greedy memory-aware policy: an idle
// device runs a ready backward or admits the next micro-batch's forward when its memory
// reservation fits the limit (and the optional in-flight limit), else waits. Which of a ready
// backward and an admissible forward goes first is the device's preference: backward-first
// (frees memory, feeds upstream), forward-first (fills the pipeline), or alternate (cycles
// F, B, F, B like 1F1B when both are available). The best preference differs between the
// first stage, which has no stage upstream to feed with gradients and gains from
// forward-first or cycling, and the later stages, which gain from returning gradients early
// (under a memory limit). So the discovery runs a small, deterministic search over the pair
// (preference of the first device, preference of the others): 3 uniform + 6 split candidates,
// each one greedy simulation (O(ops · candidates)). The order with the smallest makespan
// (first found on ties) is replayed wait-free. A candidate that would repeat a run already made
// (its devices differ only where their preference never had to choose: detail::same_decisions)
// is not run again; the result is the same.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/order_discovery.hpp"

namespace pipeplan::schedule {

/// The adaptive schedule (see the file comment). The scenario has D·C virtual stages.
struct adaptive {
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< per device
    std::size_t inflight_limit = 0;  ///< max micro-batches in flight per device; 0 = no limit
    placement_kind placement = placement_kind::linear;
    std::size_t chunks = 1;  ///< virtual stages per device (interleaved / v_shape)
    bool search_preferences = true;  ///< also try first-device/other-devices splits (else 3 uniform)

    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        if (chunks == 0 || sc.stages % chunks != 0)
            throw invalid_argument("adaptive: the scenario's " + std::to_string(sc.stages) +
                                   " stages are not a multiple of chunks = " + std::to_string(chunks));
        pipeline_schedule s;
        s.name = "adaptive";
        s.placement = placement == placement_kind::linear ? stage_placement::linear(sc.stages)
                                                          : stage_placement(placement, sc.stages / chunks, chunks);
        discovery_policy pol;
        pol.memory_limit_mb = memory_limit_mb;
        if (inflight_limit > 0) pol.inflight_limit = {inflight_limit};
        using pref = discovery_policy::preference;
        constexpr pref all[3] = {pref::backward_first, pref::forward_first, pref::alternate};
        discovery_result best;
        best.makespan_ms = std::numeric_limits<double>::infinity();
        const std::size_t D = s.placement.devices();
        const bool split_search = search_preferences && D > 1;
        // One engine for every candidate: the scenario's tables are computed once, and the
        // best orders are swapped out of it (no copies, no allocations once warm).
        detail::order_discovery& engine = detail::discovery_engine();
        const detail::engine_release release(engine);
        engine.prepare(sc, s.placement, pol.w_share);
        // A candidate that would make every decision of one already run (same_decisions: its
        // devices differ only where their preference never had to choose) repeats that run
        // exactly, so it cannot be strictly better: it is skipped.
        std::vector<std::pair<std::vector<pref>, std::vector<std::uint8_t>>> ran;
        // (first device's preference, the others' preference): 3 uniform + 6 split candidates.
        for (pref p0 : all)
            for (pref p1 : all) {
                if (p0 != p1 && !split_search) continue;
                pol.prefer_on.assign(D, p1);
                pol.prefer_on[0] = p0;
                if (std::any_of(ran.begin(), ran.end(),
                                [&](const auto& r) { return detail::same_decisions(r.first, r.second, pol.prefer_on); }))
                    continue;
                discovery_result& r = engine.run(pol);
                ran.emplace_back(pol.prefer_on, engine.choice_masks());
                if (r.makespan_ms < best.makespan_ms - 1e-9) {
                    best.makespan_ms = r.makespan_ms;
                    std::swap(best.orders, r.orders);
                }
            }
        s.orders = std::move(best.orders);
        s.replay = replay_facts{best.makespan_ms, memory_limit_mb};
        return s;
    }
};

}  // namespace pipeplan::schedule
