// tests/schedule/order_discovery_reference.hpp — the QUADRATIC reference of order discovery,
// kept only for equivalence testing.
//
// The same policy as schedule/order_discovery.hpp's discover_order, written the obvious way
// instead of in O(ops · log): candidates in unordered lists scanned linearly, the next
// event found by scanning every device, the reserved memory recomputed over all micro-batches
// in flight on every release. It is slow (M^2) but simple; tests/schedule/order_discovery.cpp checks
// that the library's discovery produces exactly the same orders and makespans on random
// scenarios. Do not "optimise" this file: its value is that it is the obvious code.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/schedule.hpp"

namespace pipeplan::test {

using namespace pipeplan::schedule;  // NOLINT: the copied body names the schedule tier's types

/// Runs the greedy policy (file comment) on `sc` placed by `pl`; returns the per-device orders.
/// Throws pipeplan::limit_exceeded when a micro-batch alone exceeds the memory limit.
[[nodiscard]] inline schedule::discovery_result reference_discover_order(const schedule::scenario& sc,
                                                                           const schedule::stage_placement& pl,
                                                                           const schedule::discovery_policy& pol) {
    const std::size_t V = sc.stages, M = sc.microbatches, D = pl.devices();
    if (pl.virtual_stages() != V)
        throw invalid_argument("discover_order: the placement has " + std::to_string(pl.virtual_stages()) +
                               " virtual stages, the scenario " + std::to_string(V));
    if (!pol.prefer_on.empty() && pol.prefer_on.size() != D)
        throw invalid_argument("discover_order: prefer_on needs one entry per device");
    const double w = pol.w_share;
    const bool split = w > 0.0;
    const double limit_mb = pol.memory_limit_mb + 1e-9;
    using pref_t = discovery_policy::preference;

    std::vector<std::size_t> dev_of(V), stages_count(D, 0);
    for (std::size_t v = 0; v < V; ++v) {
        dev_of[v] = pl.device_of(v);
        ++stages_count[dev_of[v]];
    }
    const std::size_t dev0 = dev_of[0];
    // Per (device, micro-batch): memory reserved at admission (stored activations on the
    // device's stages) and the largest transient (peak - stored) among them.
    std::vector<double> model(D, 0.0), res(D * M, 0.0), gap(D * M, 0.0);
    for (std::size_t v = 0; v < V; ++v) model[dev_of[v]] += sc.model_state_mb[v];
    for (std::size_t j = 0; j < M; ++j)
        for (std::size_t v = 0; v < V; ++v) {
            const std::size_t k = dev_of[v] * M + j;
            res[k] += sc.stored(j, v);
            gap[k] = std::max(gap[k], sc.peak(j, v) - sc.stored(j, v));
        }

    struct cand {
        double ready_ms;
        std::uint32_t microbatch;
        std::uint32_t stage;
    };
    struct dev_state {
        std::vector<cand> fwd, bwd, wgt;  // delivered candidates (unordered)
        std::vector<std::uint32_t> inflight;
        std::size_t limit = std::numeric_limits<std::size_t>::max();
        std::uint32_t next_admit = 0;  // next micro-batch to admit (in order)
        double reserved_mb = 0.0;      // sum of res over inflight
        double gap_mb = 0.0;           // max of gap over inflight
        double busy_until = 0.0;
        bool busy = false;
        bool last_forward = false;
        pref_t prefer = pref_t::backward_first;
    };
    std::vector<dev_state> dev(D);
    for (std::size_t d = 0; d < D; ++d) {
        auto& ds = dev[d];
        if (!pol.inflight_limit.empty())
            ds.limit = std::max<std::size_t>(1, pol.inflight_limit.size() == 1 ? pol.inflight_limit[0] : pol.inflight_limit.at(d));
        ds.prefer = pol.prefer_on.empty() ? pol.prefer : pol.prefer_on[d];
        ds.inflight.reserve(std::min<std::size_t>(M, 64));
    }
    std::vector<std::uint32_t> left(D * M);  // ops left per (device, mb) before release
    for (std::size_t d = 0; d < D; ++d)
        for (std::size_t j = 0; j < M; ++j)
            left[d * M + j] = static_cast<std::uint32_t>((split ? 3 : 2) * stages_count[d]);
    std::vector<char> admitted(D * M, 0);

    const op_model timing(sc, w);
    link_channels links;
    links.reset(D, sc.network);

    // Events: per device its running op's completion and its next wake-up (an idle device
    // waiting for a candidate that arrives later). The next event is the earliest; at equal
    // times completions go first, then lower devices. D is small, so a scan beats a heap.
    constexpr double never = std::numeric_limits<double>::infinity();
    std::vector<double> done_at(D, never), wake_at(D, never);
    std::vector<op> running(D);
    discovery_result out;
    out.orders.resize(D);
    for (std::size_t d = 0; d < D; ++d) out.orders[d].reserve((split ? 3 : 2) * M * stages_count[d]);

    // Index of the ready candidate with the smallest (mb, stage) passing `ok`, or -1.
    auto pick = [](const std::vector<cand>& v, double t, auto&& ok) -> std::ptrdiff_t {
        std::ptrdiff_t best = -1;
        for (std::size_t i = 0; i < v.size(); ++i) {
            const cand& c = v[i];
            if (c.ready_ms > t || !ok(c)) continue;
            const auto& b = v[static_cast<std::size_t>(best < 0 ? 0 : best)];
            if (best < 0 || c.microbatch < b.microbatch || (c.microbatch == b.microbatch && c.stage < b.stage)) best = static_cast<std::ptrdiff_t>(i);
        }
        return best;
    };
    auto start = [&](std::size_t d, op o, double t) {
        const double dur = timing.duration_ms(o);
        dev[d].busy = true;
        dev[d].busy_until = t + dur;
        dev[d].last_forward = o.kind == op_kind::F;
        out.orders[d].push_back(o);
        done_at[d] = t + dur;
        running[d] = o;
    };
    auto take = [&](std::size_t d, std::vector<cand>& v, std::ptrdiff_t i, op_kind kind, double t) {
        const cand c = v[static_cast<std::size_t>(i)];
        v[static_cast<std::size_t>(i)] = v.back();
        v.pop_back();
        start(d, {kind, c.microbatch, c.stage}, t);
    };
    // Admission of micro-batch j on device d (file comment).
    auto fits = [&](std::size_t d, std::uint32_t j) {
        const auto& ds = dev[d];
        if (ds.inflight.empty()) return true;
        if (ds.inflight.size() >= ds.limit) return false;
        return model[d] + ds.reserved_mb + res[d * M + j] + std::max(ds.gap_mb, gap[d * M + j]) <= limit_mb;
    };
    auto admit = [&](std::size_t d, std::uint32_t j) {
        auto& ds = dev[d];
        if (ds.inflight.empty() && model[d] + res[d * M + j] + gap[d * M + j] > limit_mb)
            throw limit_exceeded(pol.schedule + " schedule: micro-batch " + std::to_string(j) + " alone needs " +
                                   std::to_string(model[d] + res[d * M + j] + gap[d * M + j]) + " MB on device " +
                                   std::to_string(d) + ", above the memory limit of " +
                                   std::to_string(pol.memory_limit_mb) + " MB");
        admitted[d * M + j] = 1;
        ++ds.next_admit;
        ds.inflight.push_back(j);
        ds.reserved_mb += res[d * M + j];
        ds.gap_mb = std::max(ds.gap_mb, gap[d * M + j]);
    };
    auto try_run = [&](std::size_t d, double t) {
        auto& ds = dev[d];
        if (ds.busy) return;
        const bool b_first = ds.prefer == pref_t::backward_first || (ds.prefer == pref_t::alternate && ds.last_forward);
        auto any = [](const cand&) { return true; };
        if (b_first)
            if (auto i = pick(ds.bwd, t, any); i >= 0) return take(d, ds.bwd, i, op_kind::B, t);
        // Forwards: of admitted micro-batches, else the next one in order if it fits; stage 0's
        // input is always there.
        auto ok = [&](const cand& c) { return admitted[d * M + c.microbatch] || (c.microbatch == ds.next_admit && fits(d, c.microbatch)); };
        std::ptrdiff_t fi = pick(ds.fwd, t, ok);
        const bool feed = d == dev0 && ds.next_admit < M && fits(d, ds.next_admit) &&
                          (fi < 0 || ds.fwd[static_cast<std::size_t>(fi)].microbatch > ds.next_admit);
        if (feed) {
            admit(d, ds.next_admit);
            return start(d, {op_kind::F, ds.next_admit - 1, 0}, t);
        }
        if (fi >= 0) {
            const std::uint32_t j = ds.fwd[static_cast<std::size_t>(fi)].microbatch;
            if (!admitted[d * M + j]) admit(d, j);
            return take(d, ds.fwd, fi, op_kind::F, t);
        }
        if (!b_first)
            if (auto i = pick(ds.bwd, t, any); i >= 0) return take(d, ds.bwd, i, op_kind::B, t);
        if (split)
            if (auto i = pick(ds.wgt, t, any); i >= 0) return take(d, ds.wgt, i, op_kind::W, t);
    };
    auto release = [&](std::size_t d, std::uint32_t j) {
        if (--left[d * M + j] != 0) return;
        auto& ds = dev[d];
        ds.inflight.erase(std::find(ds.inflight.begin(), ds.inflight.end(), j));
        ds.reserved_mb = 0.0;
        ds.gap_mb = 0.0;
        for (auto i : ds.inflight) {  // recomputed: no drift
            ds.reserved_mb += res[d * M + i];
            ds.gap_mb = std::max(ds.gap_mb, gap[d * M + i]);
        }
    };
    auto deliver = [&](std::vector<cand>& list, std::size_t to, cand c) {
        list.push_back(c);
        const auto& ds = dev[to];
        // An idle device (or one that frees up before the arrival) must wake up for it.
        if (!ds.busy || ds.busy_until < c.ready_ms) wake_at[to] = std::min(wake_at[to], c.ready_ms);
    };
    // After its event, an idle device sleeps until its earliest candidate that is not there yet.
    auto next_wake = [&](std::size_t d, double t) {
        if (dev[d].busy) return;
        double nw = never;
        for (const auto* l : {&dev[d].fwd, &dev[d].bwd, &dev[d].wgt})
            for (const cand& c : *l)
                if (c.ready_ms > t) nw = std::min(nw, c.ready_ms);
        wake_at[d] = std::min(wake_at[d], nw);
    };

    for (std::size_t d = 0; d < D; ++d) try_run(d, 0.0);
    for (;;) {
        std::size_t d = D;
        double t = never;
        bool completion = false;
        for (std::size_t x = 0; x < D; ++x)
            if (done_at[x] < t) {  // strict: the lowest device wins a tie
                t = done_at[x];
                d = x;
                completion = true;
            }
        for (std::size_t x = 0; x < D; ++x)
            if (wake_at[x] < t) {
                t = wake_at[x];
                d = x;
                completion = false;
            }
        if (d == D) break;
        if (completion) {
            out.makespan_ms = t;
            auto& ds = dev[d];
            ds.busy = false;
            done_at[d] = never;
            const op o = running[d];
            release(d, o.microbatch);
            // The data flow of timing.hpp: the op of another stage it feeds gets a candidate
            // when the message arrives; on the last stage the forward feeds its own backward;
            // a split backward feeds its W.
            if (const cross_target c = cross_successor(o, V); c.has) {
                const std::size_t to = dev_of[c.to.stage];
                auto& list = c.to.kind == op_kind::B ? dev[to].bwd : dev[to].fwd;
                deliver(list, to, {links.arrival(t, d, to, timing.message_mb(o)), o.microbatch, c.to.stage});
            } else if (o.kind == op_kind::F) {
                deliver(ds.bwd, d, {t, o.microbatch, o.stage});
            }
            if (o.kind == op_kind::B && split) deliver(ds.wgt, d, {t, o.microbatch, o.stage});
        } else {
            wake_at[d] = never;
        }
        try_run(d, t);
        next_wake(d, t);
    }
    return out;
}

}  // namespace pipeplan::test
