// pipeplan/schedule/zero_bubble_v.hpp — the V-shaped zero-bubble schedules: ZB-V (Qi et al.,
// "Zero Bubble Pipeline Parallelism", ICLR'24, section 6) and the controllable-memory V-Half
// and V-Min (Qi et al., "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362).
//
// All three place two model chunks on each of the S devices in a V (device d runs virtual
// stages d and 2S - 1 - d: the forward goes down the devices and comes back up, so the first
// and the last chunk share device 0) and split every backward into B and W. They differ in the
// activation memory a device may hold: 1F1B's (ZB-V), ½ of it (V-Half), ⅓ of it (V-Min), where
// 1F1B's is what its first device holds at its peak, the stored activations of S consecutive
// micro-batches (the largest such window; with equal micro-batches S of them).
// The hand-written tables of the papers assume equal F, B and W; for unequal micro-batches
// pipeplan discovers the order with the greedy engine of order_discovery.hpp in its stage
// memory mode (activations held per chunk, not reserved per micro-batch): ready B first (or the
// preference being tried), else a forward that fits the memory limit and the activation share,
// else a pending W (or a W first when `max_pending_w` are pending). Three uniform preferences
// are tried and the shortest replay kept; for ZB-V, also the paper's table (zb_v_table()) when
// its replay is shorter and fits the memory limit; for V-Half and V-Min, the orders of the
// paper's building block (v_block.hpp) timed with the real durations: squeezed, and reordered
// when that does not raise the replay's peak memory (the paper's reordering keeps the peak in
// its accounting, where W frees a whole activation; pipeplan's B frees its share earlier, and the
// reordered V-Min then holds ½ micro-batch more when S ≡ 2 mod 3). A run that stalls falls back to the per-micro-batch
// reservation with at most ⌈share·S⌉ micro-batches in flight per device, which cannot stall.
// In an order search's inner loop (the quick form) a discovery stops as soon as a device's
// ops left cannot end by the makespan to beat (order_discovery.hpp's give_up_above_ms), and the
// fallback is not run when it is sure to give up too (order_discovery::surely_gives_up).
// With equal micro-batches and F = B = W per chunk, ZB-V's discovered order reaches the lower
// bound M·(F + B + W) + (S - 1)·F of a device (derivation: tests/schedule/zero_bubble_v.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/order_discovery.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/v_block.hpp"

namespace pipeplan::schedule {

/// Splits each stage (one per device) of a scenario without placement into two chunks placed as
/// a V: virtual stage v runs on device v_shape(S).device_of(v) and holds half of that device's
/// stage (times, memory, model state); messages keep their size.
[[nodiscard]] inline scenario split_into_v_chunks(const scenario& sc) {
    if (!sc.placement.empty() && sc.device_count() != sc.stages)
        throw invalid_argument("split_into_v_chunks: the scenario is placed already");
    const std::size_t S = sc.stages, M = sc.microbatches;
    const stage_placement pl = stage_placement::v_shape(S, 2);
    scenario r;
    r.stages = 2 * S;
    r.microbatches = M;
    for (auto* v : {&r.forward_ms, &r.backward_ms, &r.stored_mb, &r.peak_mb}) v->resize(r.stages * M);
    r.model_state_mb.resize(r.stages);
    r.placement.resize(r.stages);
    if (!sc.checkpoint_ratio.empty()) r.checkpoint_ratio.resize(r.stages);
    for (std::size_t v = 0; v < r.stages; ++v) {
        const std::size_t d = pl.device_of(v);
        for (std::size_t j = 0; j < M; ++j) {
            r.forward_ms[r.at(j, v)] = sc.fwd(j, d) * 0.5;
            r.backward_ms[r.at(j, v)] = sc.bwd(j, d) * 0.5;
            r.stored_mb[r.at(j, v)] = sc.stored(j, d) * 0.5;
            r.peak_mb[r.at(j, v)] = sc.peak(j, d) * 0.5;
        }
        r.model_state_mb[v] = sc.model_state_mb[d] * 0.5;
        r.placement[v] = static_cast<std::uint32_t>(d);
        if (!sc.checkpoint_ratio.empty()) r.checkpoint_ratio[v] = sc.checkpoint_ratio[d];
    }
    r.activation_mb = sc.activation_mb;
    r.network = sc.network;
    r.devices = S;
    return r;
}

/// Per device of a V-placed scenario: the stored activations of the S consecutive
/// micro-batches that hold most on it (1F1B's peak on its first device), times `share`, but at
/// least the largest single micro-batch's (one micro-batch always runs).
[[nodiscard]] inline std::vector<double> v_activation_limits_mb(const scenario& sc, const stage_placement& pl,
                                                                double share) {
    const std::size_t D = pl.devices(), M = sc.microbatches;
    std::vector<double> out(D, 0.0);
    std::vector<double> per_mb(M);
    for (std::size_t d = 0; d < D; ++d) {
        std::fill(per_mb.begin(), per_mb.end(), 0.0);
        for (std::size_t c = 0; c < pl.chunks(); ++c)
            for (std::size_t j = 0; j < M; ++j) per_mb[j] += sc.stored(j, pl.stage_of(d, c));
        const std::size_t w = std::min(D, M);
        double window = 0.0, best = 0.0, single = 0.0;
        for (std::size_t j = 0; j < M; ++j) {
            window += per_mb[j];
            if (j >= w) window -= per_mb[j - w];
            best = std::max(best, window);
            single = std::max(single, per_mb[j]);
        }
        out[d] = std::max(share * best, single);
    }
    return out;
}

/// ZB-V's hand-written table (the paper's section 6) for S devices and M micro-batches: device d
/// (chunk stages d and 2S - 1 - d) runs 2(S - d) - 1 first-chunk forwards, d pairs (second-chunk
/// F, first-chunk F), S - d triples (second-chunk F, B, W), then the steady state (first-chunk
/// F, B, W; second-chunk F, B, W), then d pairs of B (first chunk, second chunk), S - d pairs
/// (first-chunk B, W), and the W left. Built for max(M, 2S - 1) micro-batches, the ops of the
/// padding ones dropped (what remains is a subsequence of a deadlock-free order on every device).
[[nodiscard]] inline device_orders zb_v_table(std::size_t S, std::size_t M) {
    const std::size_t n = std::max(2 * S - 1, M);
    device_orders out(S);
    for (std::size_t d = 0; d < S; ++d) {
        auto& o = out[d];
        o.reserve(6 * M);
        const auto s0 = static_cast<std::uint32_t>(d), s1 = static_cast<std::uint32_t>(2 * S - 1 - d);
        std::size_t f0 = 0, f1 = 0, b0 = 0, b1 = 0;
        const auto push = [&](op_kind k, std::size_t mb, std::uint32_t st) {
            if (mb < M) o.push_back({k, static_cast<std::uint32_t>(mb), st});
        };
        const auto bw = [&](std::size_t& b, std::uint32_t st) {
            push(op_kind::B, b, st);
            push(op_kind::W, b++, st);
        };
        for (std::size_t i = 0; i + 1 < 2 * (S - d); ++i) push(op_kind::F, f0++, s0);
        for (std::size_t i = 0; i < d; ++i) {
            push(op_kind::F, f1++, s1);
            push(op_kind::F, f0++, s0);
        }
        for (std::size_t i = 0; i < S - d; ++i) {
            push(op_kind::F, f1++, s1);
            bw(b1, s1);
        }
        while (f1 < f0 || f0 < n) {
            if (f0 < n) push(op_kind::F, f0++, s0);
            bw(b0, s0);
            push(op_kind::F, f1++, s1);
            bw(b1, s1);
        }
        std::size_t w0 = b0, w1 = b1;
        for (std::size_t i = 0; i < d; ++i) {
            push(op_kind::B, b0++, s0);
            push(op_kind::B, b1++, s1);
        }
        for (std::size_t i = 0; i < S - d; ++i) {
            push(op_kind::B, b0++, s0);
            push(op_kind::W, w0++, s0);
        }
        while (w1 < b1) push(op_kind::W, w1++, s1);
        while (w0 < b0) push(op_kind::W, w0++, s0);
    }
    return out;
}

/// ZB-V, V-Half or V-Min (see the file comment) on a scenario of 2S virtual stages placed as a V
/// (split_into_v_chunks()).
struct zb_v {
    std::string name = "zb-v";  ///< the schedule's name (zb-v, v-half, v-min)
    /// Share of 1F1B's activation memory a device may hold: 1 (ZB-V), 1/2 (V-Half), 1/3 (V-Min).
    double activation_share = 1.0;
    /// Share of each backward's time that is weight gradient (W); the rest is B.
    double w_share = 0.5;
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< per device
    /// Pending weight gradients after which a device runs a W first (0 = W only fills waits).
    std::size_t max_pending_w = 0;
    /// One preference (ready B first), no table and the building block squeezed only: the quick
    /// form for the inner loops of order searches (the order found is then scheduled in full).
    bool quick = false;
    /// Quick form only: a discovery whose makespan is sure to exceed this gives up
    /// (discovery_policy::give_up_above_ms). The schedule is then V-Half's or V-Min's building
    /// block when it fits the memory limit, else only a makespan above this:
    /// replay_facts::makespan_ms infinite and incomplete orders, which an order search compares
    /// and drops (order_search.hpp). Infinite: a complete schedule.
    double give_up_above_ms = std::numeric_limits<double>::infinity();

    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        if (!(w_share > 0.0 && w_share < 1.0)) throw invalid_argument(name + ": w_share must lie in (0, 1)");
        if (!(activation_share > 0.0 && activation_share <= 1.0))
            throw invalid_argument(name + ": the activation share must lie in (0, 1]");
        pipeline_schedule s;
        s.name = name;
        s.placement = placement_of(sc);
        if (s.placement.kind() != placement_kind::v_shape || s.placement.chunks() != 2)
            throw invalid_argument(name + ": the scenario must place two chunks per device as a V (" +
                                   std::to_string(sc.stages) + " stages; split_into_v_chunks)");
        s.w_share = w_share;
        discovery_policy pol;
        pol.schedule = name;
        pol.memory_limit_mb = memory_limit_mb;
        pol.w_share = w_share;
        pol.stage_memory = true;
        pol.record_choices = false;  // (adaptive's)
        pol.max_pending_w = max_pending_w;
        pol.held_limit_mb = v_activation_limits_mb(sc, s.placement, activation_share);
        if (quick) pol.give_up_above_ms = give_up_above_ms;
        detail::order_discovery& engine = detail::discovery_engine();  // prepared once for both policies
        const detail::engine_release release(engine);
        engine.prepare(sc, s.placement, pol.w_share);
        discovery_result best = best_preference(engine, pol, quick);
        if (best.stalled || best.gave_up) {
            discovery_policy per_mb = pol;  // the per-micro-batch reservation, which cannot stall
            per_mb.stage_memory = false;
            per_mb.held_limit_mb.clear();
            const auto S = static_cast<double>(s.placement.devices());
            per_mb.inflight_limit = {static_cast<std::size_t>(std::max(1.0, std::ceil(activation_share * S - 1e-9)))};
            discovery_result fallback;  // (a quick run sure to give up is not run)
            if (engine.surely_gives_up(per_mb)) fallback.gave_up = true;
            else fallback = best_preference(engine, per_mb, quick);
            // A run that gave up may have stalled: then the fallback's makespan is the discovery's,
            // and when that does not exceed the cut, the stage-memory run decides in full.
            if (best.gave_up && !fallback.gave_up) {
                pol.give_up_above_ms = std::numeric_limits<double>::infinity();
                best = best_preference(engine, pol, quick);
                if (best.stalled) best = std::move(fallback);
            } else if (best.stalled || fallback.gave_up) {
                best = std::move(fallback);
            }
        }
        if (best.gave_up) best.makespan_ms = std::numeric_limits<double>::infinity();  // above the cut
        s.orders = std::move(best.orders);
        const std::size_t S = s.placement.devices(), M = sc.microbatches;
        const double no_cap = std::numeric_limits<double>::infinity();
        if (activation_share >= 1.0) {
            if (!quick) (void)keep_if_better(sc, s, best.makespan_ms, zb_v_table(S, M), no_cap);
        } else {
            const auto block = activation_share < 0.5 - 1e-9 ? v_min_block(S) : v_half_block(S);
            const double squeezed_peak_mb = keep_if_better(sc, s, best.makespan_ms, v_block_orders(block, M, false), no_cap);
            if (!quick) (void)keep_if_better(sc, s, best.makespan_ms, v_block_orders(block, M, true), squeezed_peak_mb);
        }
        s.replay = replay_facts{best.makespan_ms, memory_limit_mb};
        return s;
    }

private:
    // `orders` (ZB-V's table, a V-Half or V-Min building block) replace s's when their replay
    // is shorter and its peak fits the memory limit and `peak_cap_mb`; returns that peak. The
    // quick form's replay gives up once it is sure to end after `makespan_ms` or above
    // give_up_above_ms (simulation_options::give_up_above_ms; the peak returned is then 0): the
    // orders are then not kept, or kept with a makespan above the cut, which an order search
    // drops as it drops the infinite makespan reported instead.
    double keep_if_better(const scenario& sc, pipeline_schedule& s, double& makespan_ms, device_orders orders,
                          double peak_cap_mb) const {
        std::swap(s.orders, orders);  // `orders` holds the discovered ones while s is simulated
        thread_local simulation_workspace ws;
        thread_local simulation_result r;
        simulation_options so;
        so.record_timeline = so.record_memory_curve = so.compute_lower_bound = false;
        if (quick) so.give_up_above_ms = std::min(makespan_ms, give_up_above_ms);
        simulate_into(r, sc, s, so, ws);  // the scenario was validated by its maker
        const double peak = *std::max_element(r.peak_memory_mb.begin(), r.peak_memory_mb.end());
        if (r.makespan_ms < makespan_ms && peak <= memory_limit_mb + 1e-9 && peak <= peak_cap_mb + 1e-9)
            makespan_ms = r.makespan_ms;
        else
            std::swap(s.orders, orders);
        return peak;
    }
    // The shortest of the three uniform preferences' runs, or of the first alone when `first_only`
    // (the first on ties; a stalled run only when all stall; one that gave up only when all
    // stall or give up, and then marked as given up), on the `engine` prepared for the scenario.
    // Once a run completed, the later ones give up above its makespan (a run that gave up ends
    // above it, so it would not have been kept; the give-up flag counts only when none completed).
    static discovery_result best_preference(detail::order_discovery& engine, discovery_policy pol, bool first_only) {
        using pref = discovery_policy::preference;
        discovery_result best;
        best.stalled = true;
        best.makespan_ms = std::numeric_limits<double>::infinity();
        bool gave_up = false;
        for (const pref p : {pref::backward_first, pref::alternate, pref::forward_first}) {
            if (first_only && p != pref::backward_first) break;
            pol.prefer = p;
            // A later preference is kept only below the best so far: it may give up above it.
            if (!best.stalled) pol.give_up_above_ms = std::min(pol.give_up_above_ms, best.makespan_ms);
            discovery_result& r = engine.run(pol);
            gave_up = gave_up || r.gave_up;
            if (r.stalled || r.gave_up) continue;
            if (best.stalled || r.makespan_ms < best.makespan_ms - 1e-9) {
                best.stalled = false;
                best.makespan_ms = r.makespan_ms;
                std::swap(best.orders, r.orders);
            }
        }
        if (best.stalled && gave_up) {
            best.stalled = false;
            best.gave_up = true;
        }
        return best;
    }
};

}  // namespace pipeplan::schedule
