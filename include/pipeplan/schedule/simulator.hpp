// pipeplan/schedule/simulator.hpp — deterministic discrete-event simulation of a schedule.
//
// Model: the op model of timing.hpp (durations, data flow, messages, memory) — the one timing
// model of the library — replayed over fixed per-device orders:
// - Each device runs its op list in order, one op at a time, and starts an op as soon as the
//   previous one ended and the op's inputs are there (wait-free replay of the order).
// - Messages between different devices use the per-ordered-pair link (links.hpp): a link sends
//   one message at a time (FIFO in send order), for size/bandwidth, then the latency elapses.
//   Communication overlaps compute. A free network makes messages pure dependencies.
// - Memory of a device = model state of its stages + activations held by its stages + the
//   running op's transient (timing.hpp).
// - An overlapped forward/backward pair (op::overlaps_next) starts when both parts' inputs are
//   there and runs as one op of timing.hpp's overlapped duration; both parts' outputs leave at
//   its end. The timeline lists both parts with the pair's start and end.
// - Events are processed in time order, ties by op id, so results are bit-for-bit
//   deterministic.
// The result's timeline gives every op's start and end; timing.hpp's cross_successor() and
// input_count() give its dependencies (plans and energy profiles build on both).
// Replay: on a free network the devices run as far as their inputs allow, each op timed into its
// timeline entry, then each device's entries are recorded in order (simulator_structure.hpp,
// detail::order_sweep); a workspace that is kept also keeps that replay order, and the next
// schedule with the same orders is timed in one loop over it. With links, or for
// what that leaves (overlapped pairs, durations given per op), the ops are indexed (op_index),
// replayed by op id and recorded in one pass per device.
// The result's timeline and memory curve are rows of one allocation each (core/row_array.hpp);
// a reused result keeps them. Figures: docs/schedules.md, "Simulator speed".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/huge_pages.hpp"
#include "pipeplan/core/row_array.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/links.hpp"
#include "pipeplan/schedule/lower_bound.hpp"
#include "pipeplan/schedule/op_index.hpp"
#include "pipeplan/schedule/simulator_structure.hpp"
#include "pipeplan/schedule/timing.hpp"

namespace pipeplan::schedule {

// op_timing and memory_point: simulator_structure.hpp.

/// What simulate() reports.
struct simulation_result {
    double makespan_ms = 0.0;
    double lower_bound_ms = 0.0;             ///< lower_bound() of the scenario and placement
    double makespan_over_lower_bound = 0.0;  ///< >= 1
    std::vector<double> busy_ms;             ///< per device: time spent computing
    std::vector<double> bubble_fraction;     ///< per device: 1 - busy / makespan
    std::vector<double> peak_memory_mb;      ///< per device
    std::vector<op> peak_memory_op;          ///< per device: the (first) op during which the peak occurs
    std::vector<double> final_memory_mb;     ///< per device, after the last op (= model state)
    /// Per device, in executed order: timeline[d] is a std::span of device d's op_timing (all
    /// devices' in one allocation, core/row_array.hpp).
    row_array<op_timing> timeline;
    row_array<memory_point> memory_mb;  ///< per device (if recorded), as the timeline
};

struct simulation_options {
    bool record_timeline = true;      ///< fill simulation_result::timeline
    bool record_memory_curve = true;  ///< fill simulation_result::memory_mb
    bool compute_lower_bound = true;  ///< fill lower_bound_ms / makespan_over_lower_bound
    /// Per-op durations (ms) replacing the scenario's, indexed by op id: the ops of device 0
    /// in order, then device 1's, ... (the order of pipeline_schedule::orders). Empty = the
    /// scenario's durations. Used to replay plans that change op speeds (energy/).
    std::span<const double> duration_ms{};
    /// The event replay (a network with links) stops once a device's op start plus the
    /// durations of its ops from there on exceeds this (with a relative margin of 1e-9): the
    /// makespan is then sure to exceed it, simulation_result::makespan_ms is infinite and the
    /// rest of the result is not filled (nor is a deadlock after that point reported). Infinite,
    /// or a free network: the replay runs to its end.
    double give_up_above_ms = std::numeric_limits<double>::infinity();
};

/// A schedule that cannot run to its end: `device` waits forever at `position` (0-based) of
/// its order, on `o`, because an op it depends on is ordered after it.
class schedule_deadlock : public invalid_argument {
public:
    schedule_deadlock(const std::string& what, std::size_t device, std::size_t position, op o)
        : invalid_argument(what), device_(device), position_(position), op_(o) {}
    [[nodiscard]] std::size_t device() const noexcept { return device_; }
    [[nodiscard]] std::size_t position() const noexcept { return position_; }
    [[nodiscard]] op at() const noexcept { return op_; }

private:
    std::size_t device_, position_;
    op op_;
};

namespace detail {

/// Per op: earliest input arrival (then: start time), duration and successors (the op that
/// receives its output on another stage: `cross`, and the op of the same stage: `local`).
struct sim_node {
    double ready = 0.0;
    double dur = 0.0;
    std::int32_t cross = op_index::none;
    std::int32_t local = op_index::none;
};

/// Fills, per op id, the duration, the successors and the number of inputs it waits for
/// (`pending`): the simulator's timing model, shared by simulate_into() and op_graph(). Every
/// field is written, so reused vectors are not cleared first.
inline void build_nodes(const op_index& idx, const scenario& sc, double w, std::vector<sim_node>& nodes,
                        std::vector<std::uint32_t>& pending) {
    const std::size_t V = sc.stages, N = idx.ops.size();
    reserve_scratch(nodes, N);
    reserve_scratch(pending, N);
    nodes.resize(N);
    pending.resize(N);
    const op_model model(sc, w);
    for (std::size_t i = 0; i < N; ++i) {
        const op& o = idx.ops[i];
        pending[i] = input_count(o, V);
        nodes[i] = {0.0, model.duration_ms(o, idx.inline_recompute(o)), idx.cross_successor_of(o),
                    idx.local_successor_of(o)};
    }
}

/// Writes the two steps of an op's memory curve at `curve` (the next point of the row that
/// starts at `row`) and returns where the next point goes: {start, during} and {end, after}; a
/// step of zero length, when the op starts as the previous one ended, is replaced by the op's
/// own. Without a branch: whether an op starts as the previous one ended is data, which a
/// branch would mispredict about every other op (equal_as_one(); the row's first point, {0,
/// model state}, is written before any op, so curve[-1] is always a point of the row).
[[gnu::always_inline]] inline memory_point* add_steps(memory_point* curve, const memory_point* row, double start_ms,
                                                      double end_ms, double during_mb, double after_mb) noexcept {
    curve -= static_cast<std::ptrdiff_t>(curve - row > 1) & equal_as_one(curve[-1].time_ms, start_ms);
    curve[0] = {start_ms, during_mb};
    curve[1] = {end_ms, after_mb};
    return curve + 2;
}

}  // namespace detail

/// Scratch memory of simulate(): keep one around (or use `simulator`) to simulate many
/// schedules without re-allocating (large simulations spend much of their time in the
/// kernel's page faults for fresh memory otherwise).
struct simulation_workspace {
    op_index idx;
    std::vector<detail::sim_node> nodes;
    /// Inputs not yet arrived, per op id; 32-bit, not a char type (a char store may alias any
    /// object, so the compiler would reload every vector pointer after each decrement).
    std::vector<std::uint32_t> pending;
    huge_page_vector<double> held;  ///< [stage · M + micro-batch]: activations held (recording)
    std::vector<double> dev_free;
    std::vector<double> left_ms;  ///< the replay with links: per device, durations of ops not started
    std::vector<std::uint32_t> pos, work;
    link_channels links;
    /// The free-network replay's order of the last schedule's ops (detail::order_sweep), the tables
    /// that find it and the replay's scratch (simulator_structure.hpp).
    detail::sweep_structure structure;
    detail::structure_scratch structure_tables;
    detail::sweep_times times;
    /// Whether `structure` keeps the replay order of the orders, for the next schedule with
    /// equal orders (simulate(), which uses a workspace once, sets it false).
    bool keep_structure = true;
};

namespace detail {

/// Replaces the scenario's durations with `opt.duration_ms` (when given), checked.
inline void apply_durations(std::vector<sim_node>& nodes, const simulation_options& opt, const pipeline_schedule& sched) {
    if (opt.duration_ms.empty()) return;
    const std::size_t N = nodes.size();
    if (opt.duration_ms.size() != N)
        throw invalid_argument("simulate: schedule '" + sched.name + "' has " + std::to_string(N) + " ops, " +
                               std::to_string(opt.duration_ms.size()) + " durations were given");
    for (std::size_t i = 0; i < N; ++i) {
        if (!std::isfinite(opt.duration_ms[i]) || opt.duration_ms[i] < 0.0)
            throw invalid_argument("simulate: duration of op " + std::to_string(i) + " must be finite and >= 0");
        nodes[i].dur = opt.duration_ms[i];
    }
}

/// Prices every overlapped pair (op_index::pair_head): both nodes take overlapped_ms() of the
/// parts' durations (timing.hpp).
inline void price_pairs(std::vector<sim_node>& nodes, const op_index& idx, double overlap_factor) {
    if (!idx.has_pairs) return;
    for (std::size_t i = 0; i + 1 < nodes.size(); ++i)
        if (idx.pair_head(i)) nodes[i].dur = nodes[i + 1].dur = overlapped_ms(nodes[i].dur, nodes[i + 1].dur, overlap_factor);
}

/// Whether the op (or the overlapped pair) at id i has all its inputs.
[[nodiscard]] inline bool inputs_ready(const op_index& idx, const std::vector<std::uint32_t>& pending, std::size_t i) noexcept {
    return pending[i] == 0 && (!idx.pair_head(i) || pending[i + 1] == 0);
}

/// Whether op id u is what device e runs next (alone or as the backward of its next pair).
[[nodiscard]] inline bool next_on(const simulation_workspace& ws, std::size_t e, std::size_t u) noexcept {
    const std::size_t at = ws.idx.first_of_device[e] + ws.pos[e];
    return at == u || (at + 1 == u && ws.idx.pair_head(at));
}

/// Start times on a free network: without link contention every start time is max(device
/// free, inputs ready), which does not depend on the processing order, so devices run as far
/// as they can go from a worklist (each op touched once). An overlapped pair starts when both
/// parts' inputs are there. Leaves ws.nodes[i].ready = start.
inline void run_free_network(simulation_workspace& ws, std::size_t D) {
    const op_index& idx = ws.idx;
    std::vector<sim_node>& nodes = ws.nodes;
    std::vector<std::uint32_t>& pending = ws.pending;
    std::vector<std::uint32_t>& work = ws.work;
    work.clear();
    for (std::size_t d = 0; d < D; ++d) work.push_back(static_cast<std::uint32_t>(d));
    // Op i started at `start` and ends at `end`: its successors' inputs are there at `end`.
    auto finish = [&](std::uint32_t d, std::size_t i, double start, double end) {
        sim_node& n = nodes[i];
        n.ready = start;
        if (n.local != op_index::none) {  // same stage, so same device: this sweep reaches it
            const auto u = static_cast<std::size_t>(n.local);
            nodes[u].ready = std::max(nodes[u].ready, end);
            --pending[u];
        }
        if (n.cross != op_index::none) {
            const auto u = static_cast<std::size_t>(n.cross);
            nodes[u].ready = std::max(nodes[u].ready, end);
            if (--pending[u] == 0) {
                // The receiver's stage from the sender's (timing.hpp), not from idx.ops[u]:
                // ops[i] streams, ops[u] would be a random load.
                const std::uint32_t e = idx.device_of_stage[cross_successor(idx.ops[i], idx.V).to.stage];
                if (e != d && next_on(ws, e, u)) work.push_back(e);
            }
        }
    };
    while (!work.empty()) {
        const std::uint32_t d = work.back();
        work.pop_back();
        const std::uint32_t last = idx.first_of_device[d + 1];
        std::uint32_t i = idx.first_of_device[d] + ws.pos[d];
        double t = ws.dev_free[d];
        while (i < last && inputs_ready(idx, pending, i)) {
            const bool pair = idx.pair_head(i);
            const double s0 = std::max({t, nodes[i].ready, pair ? nodes[i + 1].ready : 0.0});
            t = s0 + nodes[i].dur;
            finish(d, i, s0, t);
            if (pair) finish(d, i + 1, s0, t);
            i += pair ? 2 : 1;
        }
        ws.pos[d] = i - idx.first_of_device[d];
        ws.dev_free[d] = t;
    }
}

/// Start times with link contention: links serialize messages in send order, so completions
/// are processed in time order (ties by op id) and the order of sends is the order of
/// completion times. An overlapped pair is one event (its forward's id). Leaves
/// ws.nodes[i].ready = start. Returns false when it gave up above `give_up_ms` (a margin
/// included; simulation_options::give_up_above_ms): a device's op start plus the durations of
/// its ops from there on exceeds it (each device runs its ops one after the other).
inline bool run_with_links(simulation_workspace& ws, std::size_t D, const op_model& model,
                           double give_up_ms = std::numeric_limits<double>::infinity()) {
    const op_index& idx = ws.idx;
    std::vector<sim_node>& nodes = ws.nodes;
    std::vector<std::uint32_t>& pending = ws.pending;
    std::vector<char> busy(D, 0);
    const bool may_give_up = std::isfinite(give_up_ms);
    bool gave_up = false;
    std::vector<double>& left_ms = ws.left_ms;  // per device, the durations of its ops not started
    if (may_give_up) {
        left_ms.assign(D, 0.0);
        for (std::size_t d = 0; d < D; ++d)
            for (std::uint32_t i = idx.first_of_device[d]; i < idx.first_of_device[d + 1]; i += idx.pair_head(i) ? 2 : 1)
                left_ms[d] += nodes[i].dur;
    }
    using event = std::pair<double, std::uint32_t>;
    std::vector<event> heap_storage;
    heap_storage.reserve(D + 1);
    std::priority_queue<event, std::vector<event>, std::greater<>> events(std::greater<>{}, std::move(heap_storage));
    auto try_start = [&](std::size_t d) {
        if (busy[d]) return;
        const std::uint32_t i = idx.first_of_device[d] + ws.pos[d];
        if (i >= idx.first_of_device[d + 1] || !inputs_ready(idx, pending, i)) return;
        const bool pair = idx.pair_head(i);
        nodes[i].ready = std::max({ws.dev_free[d], nodes[i].ready, pair ? nodes[i + 1].ready : 0.0});
        if (pair) nodes[i + 1].ready = nodes[i].ready;
        busy[d] = 1;
        events.emplace(nodes[i].ready + nodes[i].dur, i);
        if (may_give_up) {
            gave_up = gave_up || nodes[i].ready + left_ms[d] > give_up_ms;
            left_ms[d] -= nodes[i].dur;
        }
    };
    auto send = [&](std::size_t i, double t, std::size_t d) {
        const sim_node& n = nodes[i];
        for (const std::int32_t succ : {n.cross, n.local}) {
            if (succ == op_index::none) continue;
            const auto u = static_cast<std::size_t>(succ);
            const std::size_t e = idx.device_of_stage[idx.ops[u].stage];
            sim_node& m = nodes[u];
            m.ready = std::max(m.ready, ws.links.arrival(t, d, e, model.message_mb(idx.ops[i])));
            if (--pending[u] == 0 && e != d) try_start(e);
        }
    };
    for (std::size_t d = 0; d < D; ++d) try_start(d);
    while (!events.empty()) {
        if (gave_up) return false;
        const auto [t, i] = events.top();
        events.pop();
        const std::size_t d = idx.device_of_stage[idx.ops[i].stage];
        const bool pair = idx.pair_head(i);
        busy[d] = 0;
        ws.dev_free[d] = t;
        ws.pos[d] += pair ? 2 : 1;
        send(i, t, d);
        if (pair) send(i + 1, t, d);
        try_start(d);
    }
    return !gave_up;
}

/// Throws schedule_deadlock naming the first device that did not reach the end of its order.
inline void check_finished(const simulation_workspace& ws, const pipeline_schedule& sched, std::size_t D) {
    const op_index& idx = ws.idx;
    for (std::size_t d = 0; d < D; ++d)
        if (idx.first_of_device[d] + ws.pos[d] < idx.first_of_device[d + 1]) {
            const op& o = idx.ops[idx.first_of_device[d] + ws.pos[d]];
            throw schedule_deadlock("simulate: schedule '" + sched.name + "' deadlocks: device " + std::to_string(d) +
                                        " waits forever at op " + op_label(sched, o) + " (stage " +
                                        std::to_string(o.stage) + ", position " + std::to_string(ws.pos[d]) +
                                        "): an op it depends on is ordered after it",
                                    d, ws.pos[d], o);
        }
}

/// The whole simulation of a free network in two passes (simulator_structure.hpp): the timing
/// pass writes each op's timeline entry (op, start, end) in an order where each op follows its
/// inputs; then per device in order its memory, busy time, peak and curve. A workspace that is
/// kept also keeps that order (the steps), so that the next run with the same orders times them
/// in one loop (and the recording pass checks the orders against the entries). An op's inputs
/// are timing.hpp's cross_producer() and local_producer(); what a (stage, micro-batch) holds
/// before an op is what the op before it there left (timing.hpp's held_after_mb()), so no table
/// of held memory is kept. run() returns false (the result is then to be rewritten) on what it
/// leaves to the general replay, which then gives the result or names the fault: an overlapped
/// pair, a schedule of another shape, an op out of range, on another device, repeated or
/// missing, an R not after its f or after its B, a W without a split, a deadlock, a duration
/// that is negative or not finite. (Per-op durations in the options are the caller's to leave
/// to it.)
class order_sweep {
public:
    order_sweep(simulation_workspace& ws, const scenario& sc, const pipeline_schedule& sched) noexcept
        : ws_(ws), sc_(sc), sched_(sched) {}

    /// Replays the schedule into `r`: makespan, busy time, peaks and final memory per device,
    /// and the timeline and memory curve as `opt` asks (not the lower bound).
    [[nodiscard]] bool run(simulation_result& r, const simulation_options& opt) {
        const std::size_t D = sched_.placement.devices();
        if (sched_.placement.virtual_stages() != sc_.stages || sched_.orders.size() != D ||
            !(sched_.overlap_factor >= 0.0 && sched_.overlap_factor <= 1.0))
            return false;
        sweep_structure& st = ws_.structure;
        const bool kept = st.may_match(sc_, sched_);
        if (!kept && !st.set_shape(sc_, sched_)) return false;
        op_timing* timeline = start(r, opt);
        if (kept && time_steps(st, sc_, sched_.w_share, ws_.times, start_clocks(), timeline) && record(true)) {
            finish(r, opt);
            return true;
        }
        // Orders seen for the first time (or other than the kept ones): run as the devices allow.
        st.has_steps = false;
        if (!structure_builder(st, ws_.structure_tables, start_clocks(), timeline, sc_, sched_, ws_.keep_structure).run())
            return false;  // (has_steps stays false: the builder sets it only when it succeeds)
        (void)record(false);
        finish(r, opt);
        return true;
    }

private:
    /// Sizes the result's timeline (or the scratch entries that stand for it) and curve for the
    /// shape of ws.structure; returns the entries (entry 0: the input that does not exist).
    op_timing* start(simulation_result& r, const simulation_options& opt) {
        const sweep_structure& st = ws_.structure;
        const std::size_t D = st.D, N = st.first_op[D], entries = sweep_structure::span_of(N, D);
        r.timeline.clear();
        r.memory_mb.clear();
        op_timing* tl = nullptr;
        if (opt.record_timeline) {
            tl = r.timeline.start(D, entries);
        } else {
            reserve_scratch(ws_.times.spans, entries);
            ws_.times.spans.resize(entries);
            tl = ws_.times.spans.data();
        }
        tl[0] = op_timing{};
        timeline_ = tl;
        curve_ = opt.record_memory_curve ? r.memory_mb.start(D, sweep_structure::curve_points(N, D)) : nullptr;
        return tl;
    }

    /// Each device's clock at its start: free at 0, its first entry.
    device_clock* start_clocks() {
        const sweep_structure& st = ws_.structure;
        std::vector<device_clock>& clocks = ws_.times.clocks;
        clocks.resize(st.D);
        for (std::size_t d = 0; d < st.D; ++d) clocks[d] = {0.0, sweep_structure::span_of(st.first_op[d], d)};
        return clocks.data();
    }

    /// The recording pass (record_device()) of every device; with `verify`, whether the orders
    /// are those of the entries.
    bool record(bool verify) {
        const sweep_structure& st = ws_.structure;
        const sweep_recorder rec(sc_, sched_.w_share);
        const bool forward_backward = !st.split && !st.any_w && !st.any_inline && !st.any_recompute;
        const std::uint8_t* flags = st.any_recompute ? ws_.structure_tables.checkpoint.data() : nullptr;
        std::vector<device_walk>& walks = ws_.times.walks;
        walks.resize(st.D);
        bool same = true;
        memory_point* curve = curve_;  // device d's curve starts where device d - 1's ended
        for (std::size_t d = 0; d < st.D; ++d) {
            device_walk& w = walks[d];
            w = device_walk{};
            for (std::size_t ch = 0; ch < sched_.placement.chunks(); ++ch)
                w.state_mb += sc_.model_state_mb[sched_.placement.stage_of(d, ch)];
            w.peak_mb = w.state_mb;
            w.span = w.peak_span = sweep_structure::span_of(st.first_op[d], d);
            if (curve) {
                w.curve = curve;
                *w.curve++ = {0.0, w.state_mb};
            }
            op_timing* entries = timeline_ + w.span;
            const auto n = static_cast<std::uint32_t>(st.first_op[d + 1] - st.first_op[d]);
            const op* order = sched_.orders[d].data();
            same &= record_any(rec, w, entries, flags, n, order, forward_backward, verify, curve != nullptr);
            curve = w.curve;
        }
        return same;
    }

    /// record_device() of one device with its template arguments given at run time.
    static bool record_any(const sweep_recorder& rec, device_walk& w, op_timing* entries, const std::uint8_t* flags,
                           std::uint32_t n, const op* order, bool forward_backward, bool verify, bool curve) {
        auto with = [&]<bool fb, bool check>() {
            return curve ? record_device<fb, check, true>(rec, w, entries, flags, n, order)
                         : record_device<fb, check, false>(rec, w, entries, flags, n, order);
        };
        if (forward_backward) return verify ? with.template operator()<true, true>() : with.template operator()<true, false>();
        return verify ? with.template operator()<false, true>() : with.template operator()<false, false>();
    }

    /// The per-device figures and the rows of the result from the clocks and walks.
    void finish(simulation_result& r, const simulation_options& opt) {
        const sweep_structure& st = ws_.structure;
        const std::size_t D = st.D;
        r.busy_ms.resize(D);
        r.peak_memory_mb.resize(D);
        r.peak_memory_op.resize(D);
        r.final_memory_mb.resize(D);
        double makespan = 0.0;
        for (std::size_t d = 0; d < D; ++d) {
            const device_walk& w = ws_.times.walks[d];
            const std::uint32_t row = sweep_structure::span_of(st.first_op[d], d);
            const std::vector<op>& order = sched_.orders[d];
            r.busy_ms[d] = w.busy_ms;
            r.peak_memory_mb[d] = w.peak_mb;
            r.peak_memory_op[d] = order.empty() ? op{} : order[w.peak_span - row];
            r.final_memory_mb[d] = w.state_mb + w.stored_mb;
            makespan = std::max(makespan, ws_.times.clocks[d].free_ms);
            if (opt.record_timeline) r.timeline.add_row(timeline_ + row, timeline_ + w.span);
            if (curve_) r.memory_mb.end_row(w.curve);
        }
        r.makespan_ms = makespan;
    }

    simulation_workspace& ws_;
    const scenario& sc_;
    const pipeline_schedule& sched_;
    op_timing* timeline_ = nullptr;
    memory_point* curve_ = nullptr;
};

/// Where record_device() writes a device's timeline and memory curve: through pointers into the
/// result's row arrays (nullptr: not recorded), each sized for all devices up front.
struct device_record {
    op_timing* timeline = nullptr;
    memory_point* curve = nullptr;      ///< where the next point goes
    memory_point* curve_row = nullptr;  ///< the device's first point

    device_record(op_timing* t, memory_point* c) noexcept : timeline(t), curve(c), curve_row(c) {}
    /// The timeline entry alone (the backward of an overlapped pair: the curve has the pair's).
    void add_timing(const op& o, double start_ms, double end_ms) noexcept {
        if (timeline) *timeline++ = {o, start_ms, end_ms};
    }
    /// One op: its timeline entry and the two steps of the curve (a step of zero length, when the
    /// op starts as the previous one ended, is replaced by the op's own).
    void add(const op& o, double start_ms, double end_ms, double during_mb, double after_mb) noexcept {
        add_timing(o, start_ms, end_ms);
        if (curve) curve = add_steps(curve, curve_row, start_ms, end_ms, during_mb, after_mb);
    }
};

/// The ops a device ran, as record_device() reads them: `ops[i - first]` is op id i for ids
/// [first, last); `pairs`: whether some op overlaps the next.
struct device_ops {
    const op* ops = nullptr;
    std::uint32_t first = 0, last = 0;
    bool pairs = false;

    [[nodiscard]] const op& at(std::uint32_t i) const noexcept { return ops[i - first]; }
    [[nodiscard]] bool pair_head(std::uint32_t i) const noexcept { return pairs && at(i).overlaps_next; }
    [[nodiscard]] bool pair_tail(std::uint32_t i) const noexcept { return pairs && i > first && at(i - 1).overlaps_next; }
};

/// Device d's busy time, peak and final memory into `r` (sized by the caller) and its timeline
/// and memory curve into `out`, from its ops `dev` and `timing(i, op)` = {start, duration} of op
/// id i; ws.held is the activations held per (stage, micro-batch).
template <class Timing>
void record_device(simulation_result& r, device_record& out, simulation_workspace& ws, const scenario& sc,
                   const pipeline_schedule& sched, std::size_t d, const device_ops& dev, const op_model& model,
                   const Timing& timing) {
    double state = 0.0;  // model state of the device's stages
    for (std::size_t c = 0; c < sched.placement.chunks(); ++c) state += sc.model_state_mb[sched.placement.stage_of(d, c)];
    double stored = 0.0, peak = state, busy = 0.0, makespan = r.makespan_ms;
    const std::uint32_t b = dev.first, e = dev.last;
    if (out.curve) *out.curve++ = {0.0, state};
    op peak_op = b < e ? dev.at(b) : op{};
    double* held = ws.held.data();
    for (std::uint32_t i = b; i < e; ++i) {
        const op& o = dev.at(i);
        const auto [st, dur] = timing(i, o);
        const double en = st + dur;
        if (dev.pair_tail(i)) {  // accounted with its pair's forward: its timeline entry only
            out.add_timing(o, st, en);
            continue;
        }
        double& h = held[o.stage * sc.microbatches + o.microbatch];
        double during = 0.0;
        if (dev.pair_head(i)) {  // the forward allocates and the backward frees, both at the pair's end
            const op& ob = dev.at(i + 1);
            double& hb = held[ob.stage * sc.microbatches + ob.microbatch];
            during = model.during_overlapped_mb(o, ob, state + stored - h - hb);
            const double after_b = model.held_after_mb(ob);
            stored += after_b - hb;
            hb = after_b;
        } else {
            during = model.during_mb(o, state + stored - h, h);
        }
        const double after_h = model.held_after_mb(o);
        stored += after_h - h;
        h = after_h;
        if (during > peak) {
            peak = during;
            peak_op = o;
        }
        busy += en - st;
        makespan = std::max(makespan, en);
        out.add(o, st, en, during, state + stored);
    }
    r.makespan_ms = makespan;
    r.busy_ms[d] = busy;
    r.peak_memory_op[d] = peak_op;
    r.peak_memory_mb[d] = peak;
    r.final_memory_mb[d] = state + stored;
}

}  // namespace detail

namespace detail {

/// How simulate_into() finds the start times on a free network: `orders` (one pass over the
/// orders, order_sweep; the indexed sweep for what it leaves), `sweep` (the ops indexed, then each
/// device runs as far as its inputs allow, every op touched once, run_free_network()) or
/// `events` (completions in time order, run_with_links(): the general replay, also right on a
/// free network). With links every method replays events.
enum class replay_method : std::uint8_t { orders, sweep, events };

/// The general replay: indexes the ops (op_index, which names a malformed schedule), builds the
/// per-op model and finds the start times by `method` (free network) or with links; leaves
/// ws.nodes[i] = {start, duration} for op id i. Returns false when the replay with links gave up
/// (simulation_options::give_up_above_ms; the start times are then partial).
inline bool replay_indexed(simulation_workspace& ws, const scenario& sc, const pipeline_schedule& sched,
                           const simulation_options& opt, const op_model& model, replay_method method) {
    ws.idx.build_if_changed(sc, sched);
    const std::size_t D = sched.placement.devices();
    build_nodes(ws.idx, sc, sched.w_share, ws.nodes, ws.pending);
    apply_durations(ws.nodes, opt, sched);
    price_pairs(ws.nodes, ws.idx, sched.overlap_factor);
    ws.links.reset(D, sc.network);  // per ordered device pair, the time the link is free again
    ws.pos.assign(D, 0);
    ws.dev_free.assign(D, 0.0);
    if (method != replay_method::events && sc.network.is_free()) {
        run_free_network(ws, D);
    } else if (!run_with_links(ws, D, model, give_up_past_ms(opt.give_up_above_ms))) {
        return false;
    }
    check_finished(ws, sched, D);
    return true;
}

/// The indexed replay's recording: record_device() per device from the start times and
/// durations replay_indexed() left in ws.nodes.
inline void record_indexed(simulation_result& r, const scenario& sc, const pipeline_schedule& sched,
                           const simulation_options& opt, simulation_workspace& ws, const op_model& model) {
    const std::size_t D = sched.placement.devices();
    ws.held.assign(sc.microbatches * sc.stages, 0.0);  // [stage * M + mb]: contiguous per device
    const std::vector<std::uint32_t>& first = ws.idx.first_of_device;
    const std::size_t N = first[D];  // ops; a device's curve has at most 2 points per op and 1 more
    r.timeline.clear();
    r.memory_mb.clear();
    device_record out(opt.record_timeline ? r.timeline.start(D, N) : nullptr,
                      opt.record_memory_curve ? r.memory_mb.start(D, 2 * N + D) : nullptr);
    r.makespan_ms = 0.0;
    for (std::size_t d = 0; d < D; ++d) {
        const device_ops dev{ws.idx.ops.data() + first[d], first[d], first[d + 1], ws.idx.has_pairs};
        record_device(r, out, ws, sc, sched, d, dev, model, [&](std::uint32_t i, const op&) {
            return std::pair<double, double>(ws.nodes[i].ready, ws.nodes[i].dur);
        });
        if (out.timeline) r.timeline.end_row(out.timeline);
        if (out.curve) out.curve_row = r.memory_mb.end_row(out.curve);
    }
}

/// simulate_into() with the start times found by `method` (tests check that all agree).
inline void simulate_into_by(simulation_result& r, const scenario& sc, const pipeline_schedule& sched,
                             const simulation_options& opt, simulation_workspace& ws, replay_method method) {
    const std::size_t D = sched.placement.devices();
    const double w = sched.w_share;
    const op_model model(sc, w);
    r.makespan_ms = r.lower_bound_ms = r.makespan_over_lower_bound = 0.0;
    r.busy_ms.assign(D, 0.0);
    r.peak_memory_mb.assign(D, 0.0);
    r.peak_memory_op.assign(D, op{});
    r.final_memory_mb.assign(D, 0.0);
    const bool swept = method == replay_method::orders && sc.network.is_free() && opt.duration_ms.empty() &&
                       order_sweep(ws, sc, sched).run(r, opt);
    if (!swept) {
        if (!replay_indexed(ws, sc, sched, opt, model, method)) {
            r.makespan_ms = std::numeric_limits<double>::infinity();  // above opt.give_up_above_ms
            return;
        }
        record_indexed(r, sc, sched, opt, ws, model);
    }
    r.bubble_fraction.assign(D, 0.0);
    for (std::size_t d = 0; d < D; ++d)
        r.bubble_fraction[d] = r.makespan_ms > 0.0 ? 1.0 - r.busy_ms[d] / r.makespan_ms : 0.0;
    if (opt.compute_lower_bound) {
        r.lower_bound_ms = lower_bound(sc, sched.placement, w, sched.overlap_factor).bound_ms;
        r.makespan_over_lower_bound = r.lower_bound_ms > 0.0 ? r.makespan_ms / r.lower_bound_ms : 1.0;
    }
}

}  // namespace detail

/// Simulates `sched` on `sc` into `r` (see the file comment for the model), reusing the
/// capacity of `r` and `ws`. Throws pipeplan::invalid_argument when the schedule is malformed
/// (an op missing, duplicated, on the wrong device) or deadlocks (an op ordered before one it
/// depends on); `r` then holds no result (it may be partly written). The scenario is not validated here (the inner loop of searches and planners,
/// whose scenarios were validated once): simulate() and simulator::run() do that.
/// Cost: O(ops + stages · micro-batches) time on a free network (one sweep), O(ops · log devices)
/// with links (a heap of the devices' running ops); O(ops) memory.
inline void simulate_into(simulation_result& r, const scenario& sc, const pipeline_schedule& sched,
                          const simulation_options& opt, simulation_workspace& ws) {
    detail::simulate_into_by(r, sc, sched, opt, ws, detail::replay_method::orders);
}

/// Simulates `sched` on `sc` (see the file comment and simulate_into()).
/// The scenario is validated first (scenario::validate(): sizes and scenario_limits), so one
/// built in code with an out-of-range value is refused with the field and its range.
[[nodiscard]] inline simulation_result simulate(const scenario& sc, const pipeline_schedule& sched,
                                                const simulation_options& opt = {}) {
    sc.validate();
    simulation_workspace ws;
    ws.keep_structure = false;
    simulation_result r;
    simulate_into(r, sc, sched, opt, ws);
    return r;
}

/// Throws pipeplan::limit_exceeded when a device's peak memory in `r` exceeds `limit_mb`,
/// naming the device, the op during which its peak occurs, the peak and the limit (the first
/// such device). For fixed-order schedules, which cannot plan around a limit.
inline void check_memory_limit(const simulation_result& r, const pipeline_schedule& sched, double limit_mb) {
    for (std::size_t d = 0; d < r.peak_memory_mb.size(); ++d)
        if (r.peak_memory_mb[d] > limit_mb + 1e-6) {
            const op o = d < r.peak_memory_op.size() ? r.peak_memory_op[d] : op{};
            throw limit_exceeded("schedule '" + sched.name + "' exceeds the memory limit on device " +
                                 std::to_string(d) + ": peak " + std::to_string(r.peak_memory_mb[d]) +
                                 " MB during op " + op_label(sched, o) + " (stage " + std::to_string(o.stage) +
                                 "), limit " + std::to_string(limit_mb) + " MB");
        }
}

/// A reusable simulator: keeps its scratch memory and its last result between runs.
class simulator {
public:
    /// Validates the scenario as simulate() does, simulates and returns the result (valid
    /// until the next run()).
    const simulation_result& run(const scenario& sc, const pipeline_schedule& sched,
                                 const simulation_options& opt = {}) {
        sc.validate();
        simulate_into(result_, sc, sched, opt, ws_);
        return result_;
    }

private:
    simulation_workspace ws_;
    simulation_result result_;
};

/// Generates with `gen` and simulates: the one-call form for any schedule_generator.
template <schedule_generator G>
[[nodiscard]] simulation_result simulate(const scenario& sc, const G& gen, const simulation_options& opt = {}) {
    return simulate(sc, pipeline_schedule(gen(sc)), opt);
}

}  // namespace pipeplan::schedule
