// pipeplan/schedule/dualpipe_v.hpp — DualPipeV: DeepSeek's DualPipe (DeepSeek-V3 technical
// report, arXiv 2412.19437, section 3.2) cut in half into a V (Sea AI Lab's "cut-in-half"),
// with one micro-batch's forward overlapped with another's backward in the steady phase.
//
// Two model chunks per device placed as a V (device d runs virtual stages d and 2S − 1 − d),
// backwards split into B (input gradient) and W (weight gradient). A full backward is a B with
// its W right after it; an overlapped forward/backward (op::overlaps_next, priced by
// timing.hpp's overlapped_ms() with the schedule's overlap_factor) pairs a forward with a full
// backward of another micro-batch: F (overlapping) B, then W.
// For equal micro-batches the hand-written order (dualpipe_v_table(), M ≥ 2S) runs per device d
// eight phases: 2(S − d − 1) first-chunk forwards; d + 1 pairs of (first-chunk F, second-chunk
// F); S − d − 1 triples (second-chunk B with W deferred, one deferred W, second-chunk F); the
// steady phase of M − 2S + d + 1 rounds (first-chunk F & second-chunk full backward, then
// second-chunk F & first-chunk full backward; the first round's first pair on the last device
// not overlapped); S − d − 1 rounds (second-chunk full backward, second-chunk F & first-chunk full
// backward); d + 1 rounds of (second-chunk, first-chunk) backwards, full in the first half and
// with W deferred in the second; S − d − 1 rounds (one deferred W, first-chunk B with W
// deferred); the deferred Ws. DualPipe's README gives its bubble as (PP/2 − 1)(F&B + B − 3W)
// with PP = 2S chunks (derivation and check: tests/schedule/dualpipe_v.cpp).
// For unequal micro-batches, or a memory limit the table does not meet, pipeplan discovers the
// order as ZB-V does (zero_bubble_v.hpp, order_discovery.hpp) and overlaps each forward with
// the B of another micro-batch that follows it on its device; of the table, the discovered
// order and the discovered order overlapped, the shortest replay within the memory limit is kept.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/zero_bubble_v.hpp"

namespace pipeplan::schedule {

namespace detail {

/// Builds one device's DualPipeV order (the file comment's phases); counters per chunk.
class dualpipe_v_device {
public:
    dualpipe_v_device(std::size_t S, std::size_t M, std::size_t d)
        : S_(S), M_(M), d_(d), stage_{static_cast<std::uint32_t>(d), static_cast<std::uint32_t>(2 * S - 1 - d)} {}

    std::vector<op> build() {
        const std::size_t S = S_, d = d_;
        repeat(2 * (S - d - 1), [&] { forward(0); });
        repeat(d + 1, [&] { forward(0), forward(1); });
        repeat(S - d - 1, [&] { backward(1, true), pending_w(), forward(1); });
        for (std::size_t i = 0; i < M_ + d + 1 - 2 * S; ++i) {
            if (i == 0 && d == S - 1) forward(0), backward(1, false);  // not overlapped: a shorter bubble
            else overlapped(0, 1);
            overlapped(1, 0);
        }
        repeat(S - d - 1, [&] { backward(1, false), overlapped(1, 0); });
        bool defer = false;
        for (std::size_t i = 0; i < d + 1; ++i) {
            if (i == (d + 1) / 2 && d % 2 == 1) defer = true;
            backward(1, defer);
            if (i == (d + 1) / 2 && d % 2 == 0) defer = true;
            backward(0, defer);
        }
        repeat(S - d - 1, [&] { pending_w(), backward(0, defer); });
        while (!deferred_.empty()) pending_w();
        return std::move(out_);
    }

private:
    template <class Fn>
    static void repeat(std::size_t n, Fn fn) {
        for (std::size_t i = 0; i < n; ++i) fn();
    }
    void forward(int c) { out_.push_back({op_kind::F, next_f_[c]++, stage_[c]}); }
    // A B of chunk c; its W right after (a full backward) or deferred.
    void backward(int c, bool defer_w) {
        const std::uint32_t mb = next_b_[c]++;
        out_.push_back({op_kind::B, mb, stage_[c]});
        if (defer_w) deferred_.push_back({op_kind::W, mb, stage_[c]});
        else out_.push_back({op_kind::W, mb, stage_[c]});
    }
    void pending_w() {
        if (deferred_.empty()) return;
        out_.push_back(deferred_.front());
        deferred_.pop_front();
    }
    // Chunk f's forward overlapped with chunk b's full backward.
    void overlapped(int f, int b) {
        forward(f);
        out_.back().overlaps_next = true;
        backward(b, false);
    }

    std::size_t S_, M_, d_;
    std::uint32_t stage_[2];
    std::uint32_t next_f_[2] = {0, 0}, next_b_[2] = {0, 0};
    std::deque<op> deferred_;
    std::vector<op> out_;
};

}  // namespace detail

/// DualPipeV's hand-written order (the file comment) for S devices and M ≥ 2S micro-batches.
[[nodiscard]] inline device_orders dualpipe_v_table(std::size_t S, std::size_t M) {
    if (S == 0 || M < 2 * S)
        throw invalid_argument("dualpipe_v_table: needs at least 2S = " + std::to_string(2 * S) +
                               " micro-batches, has " + std::to_string(M));
    device_orders out(S);
    for (std::size_t d = 0; d < S; ++d) out[d] = detail::dualpipe_v_device(S, M, d).build();
    return out;
}

/// Marks every forward that a B of another micro-batch follows on its device as overlapping it
/// (op::overlaps_next); a B already in a pair is not taken twice.
inline void overlap_adjacent(device_orders& orders) {
    for (auto& o : orders)
        for (std::size_t p = 0; p + 1 < o.size(); ++p)
            if (is_forward(o[p].kind) && o[p + 1].kind == op_kind::B && o[p + 1].microbatch != o[p].microbatch) {
                o[p].overlaps_next = true;
                ++p;
            }
}

/// DualPipeV (see the file comment) on a scenario of 2S virtual stages placed as a V
/// (split_into_v_chunks()).
struct dualpipe_v {
    /// Share of each backward's time that is weight gradient (W); the rest is B.
    double w_share = 0.5;
    /// Prices an overlapped forward/backward: max(F, B) + overlap_factor·min(F, B), in [0, 1].
    double overlap_factor = 1.0;
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< per device
    std::size_t max_pending_w = 0;  ///< as zb_v's, for the discovered order

    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        if (!(overlap_factor >= 0.0 && overlap_factor <= 1.0))
            throw invalid_argument("dualpipe-v: overlap_factor must lie in [0, 1], is " + std::to_string(overlap_factor));
        zb_v base;
        base.name = "dualpipe-v";
        base.w_share = w_share;
        base.memory_limit_mb = memory_limit_mb;
        base.max_pending_w = max_pending_w;
        pipeline_schedule s = base(sc);  // checks w_share and the placement
        s.overlap_factor = overlap_factor;
        double best_ms = s.replay->makespan_ms;
        pipeline_schedule trial = s;
        overlap_adjacent(trial.orders);
        keep_if_better(sc, s, std::move(trial.orders), best_ms);
        const std::size_t S = s.placement.devices();
        if (sc.microbatches >= 2 * S) keep_if_better(sc, s, dualpipe_v_table(S, sc.microbatches), best_ms);
        s.replay = replay_facts{best_ms, memory_limit_mb};
        return s;
    }

private:
    // Replaces s's orders with `orders` when their replay is shorter and fits the memory limit
    // (orders that deadlock are dropped).
    void keep_if_better(const scenario& sc, pipeline_schedule& s, device_orders orders, double& best_ms) const {
        pipeline_schedule t;
        t.name = s.name;
        t.placement = s.placement;
        t.w_share = s.w_share;
        t.overlap_factor = s.overlap_factor;
        t.orders = std::move(orders);
        thread_local simulation_workspace ws;
        thread_local simulation_result r;
        simulation_options so;
        so.record_timeline = so.record_memory_curve = so.compute_lower_bound = false;
        try {
            simulate_into(r, sc, t, so, ws);
        } catch (const schedule_deadlock&) {
            return;
        }
        const double peak = *std::max_element(r.peak_memory_mb.begin(), r.peak_memory_mb.end());
        if (r.makespan_ms < best_ms - 1e-9 && peak <= memory_limit_mb + 1e-9) {
            best_ms = r.makespan_ms;
            s.orders = std::move(t.orders);
        }
    }
};

}  // namespace pipeplan::schedule
