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
// - Events are processed in time order, ties by op id, so results are bit-for-bit
//   deterministic.
// The result's timeline gives every op's start and end; timing.hpp's cross_successor() and
// input_count() give its dependencies (plans and energy profiles build on both).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/links.hpp"
#include "pipeplan/schedule/lower_bound.hpp"
#include "pipeplan/schedule/timing.hpp"

namespace pipeplan::schedule {

/// When one op ran.
struct op_timing {
    op o;
    double start_ms = 0.0;
    double end_ms = 0.0;
};

/// A step of a device's memory-over-time curve: from `time_ms` on, the device holds
/// `memory_mb` (until the next point).
struct memory_point {
    double time_ms = 0.0;
    double memory_mb = 0.0;
};

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
    std::vector<std::vector<op_timing>> timeline;      ///< per device, in executed order
    std::vector<std::vector<memory_point>> memory_mb;  ///< per device (if recorded)
};

struct simulation_options {
    bool record_timeline = true;      ///< fill simulation_result::timeline
    bool record_memory_curve = true;  ///< fill simulation_result::memory_mb
    bool compute_lower_bound = true;  ///< fill lower_bound_ms / makespan_over_lower_bound
    /// Per-op durations (ms) replacing the scenario's, indexed by op id: the ops of device 0
    /// in order, then device 1's, ... (the order of pipeline_schedule::orders). Empty = the
    /// scenario's durations. Used to replay plans that change op speeds (energy/).
    std::span<const double> duration_ms{};
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

/// Index of each op of a schedule by (kind, micro-batch, stage), with validation.
struct op_index {
    static constexpr std::int32_t none = -1;
    std::size_t V = 0;
    std::vector<std::int32_t> fwd, rec, bwd, wgt;  // [v * M + j] -> op id (stage-major: a device's ops are contiguous)
    std::size_t M = 0;
    [[nodiscard]] std::int32_t rec_of(std::size_t k) const noexcept { return rec.empty() ? none : rec[k]; }
    [[nodiscard]] std::int32_t wgt_of(std::size_t k) const noexcept { return wgt.empty() ? none : wgt[k]; }
    std::vector<op> ops;                           // by id
    std::vector<std::uint32_t> device_of_stage;    // [v]
    std::vector<std::uint32_t> first_of_device;    // prefix offsets: device d owns ids [first[d], first[d+1])

    /// (Re)builds the index; reuses the vectors' capacity.
    void build(const scenario& sc, const pipeline_schedule& s) {
        ops.clear();
        first_of_device.clear();
        V = sc.stages;
        M = sc.microbatches;
        const std::size_t D = s.placement.devices();
        if (s.placement.virtual_stages() != V)
            throw invalid_argument("simulate: schedule '" + s.name + "' places " +
                                   std::to_string(s.placement.virtual_stages()) + " virtual stages, the scenario has " +
                                   std::to_string(V));
        if (s.orders.size() != D)
            throw invalid_argument("simulate: schedule '" + s.name + "' has " + std::to_string(s.orders.size()) +
                                   " device orders for " + std::to_string(D) + " devices");
        std::size_t n = 0;
        for (const auto& o : s.orders) n += o.size();
        if (n > static_cast<std::size_t>(INT32_MAX)) throw invalid_argument("simulate: too many ops");
        fwd.assign(M * V, none);
        // R and W tables only when the schedule has such ops (saves memory on big runs).
        bool any_r = false, any_w = false;
        for (const auto& o : s.orders)
            for (const op& x : o) {
                any_r |= x.kind == op_kind::R;
                any_w |= x.kind == op_kind::W;
            }
        if (any_r) rec.assign(M * V, none);
        else rec.clear();
        bwd.assign(M * V, none);
        if (any_w) wgt.assign(M * V, none);
        else wgt.clear();
        ops.reserve(n);
        device_of_stage.resize(V);
        for (std::size_t v = 0; v < V; ++v) device_of_stage[v] = static_cast<std::uint32_t>(s.placement.device_of(v));
        first_of_device.reserve(D + 1);
        const bool split = s.w_share > 0.0;
        for (std::size_t d = 0; d < D; ++d) {
            first_of_device.push_back(static_cast<std::uint32_t>(ops.size()));
            for (const op& o : s.orders[d]) {
                auto bad = [&](const std::string& why) {
                    throw invalid_argument("simulate: schedule '" + s.name + "', device " + std::to_string(d) +
                                           ", op " + to_string(o) + " (stage " + std::to_string(o.stage) +
                                           "): " + why);
                };
                if (o.mb >= M) bad("micro-batch out of range (the scenario has " + std::to_string(M) + ")");
                if (o.stage >= V) bad("stage out of range (the scenario has " + std::to_string(V) + ")");
                if (device_of_stage[o.stage] != d)
                    bad("the placement runs that stage on device " + std::to_string(device_of_stage[o.stage]));
                const std::size_t k = o.stage * M + o.mb;
                std::int32_t* slot = nullptr;
                switch (o.kind) {
                    case op_kind::F:
                    case op_kind::f: slot = &fwd[k]; break;
                    case op_kind::R: slot = &rec[k]; break;
                    case op_kind::B: slot = &bwd[k]; break;
                    case op_kind::W:
                        if (!split) bad("W op in a schedule without a B/W split (w_share = 0)");
                        slot = &wgt[k];
                        break;
                }
                if (*slot != none) bad("appears twice");
                *slot = static_cast<std::int32_t>(ops.size());
                ops.push_back(o);
            }
        }
        first_of_device.push_back(static_cast<std::uint32_t>(ops.size()));
        for (std::size_t j = 0; j < M; ++j)
            for (std::size_t v = 0; v < V; ++v) {
                const std::size_t k = v * M + j;
                auto missing = [&](char what) {
                    throw invalid_argument("simulate: schedule '" + s.name + "' has no " + std::string(1, what) +
                                           " op for micro-batch " + std::to_string(j) + " on stage " + std::to_string(v));
                };
                if (fwd[k] == none) missing('F');
                if (bwd[k] == none) missing('B');
                if (split && wgt_of(k) == none) missing('W');
                if (rec_of(k) != none && ops[static_cast<std::size_t>(fwd[k])].kind != op_kind::f)
                    throw invalid_argument("simulate: schedule '" + s.name + "' recomputes (R) micro-batch " +
                                           std::to_string(j) + " on stage " + std::to_string(v) +
                                           " whose forward was not checkpointed (f)");
            }
    }
};

/// Per op: earliest input arrival (then: start time), duration and successors (the op that
/// receives its output on another stage: `cross`, and the op of the same stage: `local`).
struct sim_node {
    double ready = 0.0;
    double dur = 0.0;
    std::int32_t cross = op_index::none;
    std::int32_t local = op_index::none;
};

/// Fills, per op id, the duration, the successors and the number of inputs it waits for
/// (`pending`): the simulator's timing model, shared by simulate_into() and op_graph().
inline void build_nodes(const op_index& idx, const scenario& sc, double w, std::vector<sim_node>& nodes,
                        std::vector<std::uint8_t>& pending) {
    using node = sim_node;
    const std::size_t V = sc.stages, N = idx.ops.size();
    nodes.assign(N, node{});
    pending.assign(N, 0);
    const op_model model(sc, w);
    for (std::size_t i = 0; i < N; ++i) {
        const op& o = idx.ops[i];
        const std::size_t key = o.stage * idx.M + o.mb;
        node& n = nodes[i];
        pending[i] = input_count(o, V);
        const bool inline_recompute = o.kind == op_kind::B && idx.rec_of(key) == detail::op_index::none &&
                                      idx.ops[static_cast<std::size_t>(idx.fwd[key])].kind == op_kind::f;
        n.dur = model.duration_ms(o, inline_recompute);
        if (const cross_target c = cross_successor(o, V); c.has)
            n.cross = c.to.kind == op_kind::B ? idx.bwd[key - idx.M] : idx.fwd[key + idx.M];
        switch (o.kind) {
            case op_kind::F:
            case op_kind::f: n.local = idx.rec_of(key) != detail::op_index::none ? idx.rec_of(key) : idx.bwd[key]; break;
            case op_kind::R: n.local = idx.bwd[key]; break;
            case op_kind::B: n.local = idx.wgt_of(key); break;
            case op_kind::W: break;
        }
    }
}

}  // namespace detail

/// Scratch memory of simulate(): keep one around (or use `simulator`) to simulate many
/// schedules without re-allocating (large simulations spend much of their time in the
/// kernel's page faults for fresh memory otherwise).
struct simulation_workspace {
    detail::op_index idx;
    std::vector<detail::sim_node> nodes;
    std::vector<std::uint8_t> pending;
    std::vector<double> held, dev_free;
    std::vector<std::uint32_t> pos, work;
    link_channels links;
};

/// Simulates `sched` on `sc` into `r` (see the file comment for the model), reusing the
/// capacity of `r` and `ws`. Throws pipeplan::invalid_argument when the schedule is malformed
/// (an op missing, duplicated, on the wrong device) or deadlocks (an op ordered before one it
/// depends on). The scenario is not validated here (the inner loop of searches and planners,
/// whose scenarios were validated once): simulate() and simulator::run() do that.
inline void simulate_into(simulation_result& r, const scenario& sc, const pipeline_schedule& sched,
                          const simulation_options& opt, simulation_workspace& ws) {
    using node = detail::sim_node;
    ws.idx.build(sc, sched);
    const detail::op_index& idx = ws.idx;
    const std::size_t V = sc.stages, D = sched.placement.devices(), N = idx.ops.size();
    const double w = sched.w_share;
    const bool free_net = sc.network.is_free();

    std::vector<node>& nodes = ws.nodes;
    std::vector<std::uint8_t>& pending = ws.pending;
    detail::build_nodes(idx, sc, w, nodes, pending);
    const op_model model(sc, w);
    if (!opt.duration_ms.empty()) {
        if (opt.duration_ms.size() != N)
            throw invalid_argument("simulate: schedule '" + sched.name + "' has " + std::to_string(N) + " ops, " +
                                   std::to_string(opt.duration_ms.size()) + " durations were given");
        for (std::size_t i = 0; i < N; ++i) {
            if (!std::isfinite(opt.duration_ms[i]) || opt.duration_ms[i] < 0.0)
                throw invalid_argument("simulate: duration of op " + std::to_string(i) + " must be finite and >= 0");
            nodes[i].dur = opt.duration_ms[i];
        }
    }

    // Links: per ordered device pair, the time the link is free again.
    link_channels& links = ws.links;
    links.reset(D, sc.network);

    std::vector<std::uint32_t>& pos = ws.pos;
    pos.assign(D, 0);
    std::vector<double>& dev_free = ws.dev_free;
    dev_free.assign(D, 0.0);
    // After an op started, nodes[i].ready holds its start time.
    if (free_net) {
        // Without link contention every start time is max(device free, inputs ready), which
        // does not depend on the processing order: run devices as far as they can go from a
        // worklist (each op touched once).
        std::vector<std::uint32_t>& work = ws.work;
        work.clear();
        for (std::size_t d = 0; d < D; ++d) work.push_back(static_cast<std::uint32_t>(d));
        while (!work.empty()) {
            const std::uint32_t d = work.back();
            work.pop_back();
            const std::uint32_t last = idx.first_of_device[d + 1];
            std::uint32_t i = idx.first_of_device[d] + pos[d];
            double t = dev_free[d];
            for (; i < last && pending[i] == 0; ++i) {
                node& n = nodes[i];
                const double s0 = std::max(t, n.ready);
                n.ready = s0;
                t = s0 + n.dur;
                for (const std::int32_t succ : {n.cross, n.local}) {
                    if (succ == detail::op_index::none) continue;
                    node& m = nodes[static_cast<std::size_t>(succ)];
                    m.ready = std::max(m.ready, t);
                    if (--pending[static_cast<std::size_t>(succ)] == 0) {
                        const std::uint32_t e = idx.device_of_stage[idx.ops[static_cast<std::size_t>(succ)].stage];
                        if (e != d && idx.first_of_device[e] + pos[e] == static_cast<std::uint32_t>(succ))
                            work.push_back(e);
                    }
                }
            }
            pos[d] = i - idx.first_of_device[d];
            dev_free[d] = t;
        }
    } else {
        // Links serialize messages in send order: process completions in time order (ties by
        // op id) so that the order of sends is the order of completion times.
        std::vector<char> busy(D, 0);
        using event = std::pair<double, std::uint32_t>;
        std::vector<event> heap_storage;
        heap_storage.reserve(D + 1);
        std::priority_queue<event, std::vector<event>, std::greater<>> events(std::greater<>{}, std::move(heap_storage));
        auto try_start = [&](std::size_t d) {
            if (busy[d]) return;
            const std::uint32_t i = idx.first_of_device[d] + pos[d];
            if (i >= idx.first_of_device[d + 1] || pending[i] != 0) return;
            nodes[i].ready = std::max(dev_free[d], nodes[i].ready);
            busy[d] = 1;
            events.emplace(nodes[i].ready + nodes[i].dur, i);
        };
        for (std::size_t d = 0; d < D; ++d) try_start(d);
        while (!events.empty()) {
            const auto [t, i] = events.top();
            events.pop();
            const std::size_t d = idx.device_of_stage[idx.ops[i].stage];
            busy[d] = 0;
            dev_free[d] = t;
            ++pos[d];
            const node& n = nodes[i];
            for (const std::int32_t succ : {n.cross, n.local}) {
                if (succ == detail::op_index::none) continue;
                const auto u = static_cast<std::size_t>(succ);
                const std::size_t e = idx.device_of_stage[idx.ops[u].stage];
                node& m = nodes[u];
                m.ready = std::max(m.ready, links.arrival(t, d, e, model.message_mb(idx.ops[i])));
                if (--pending[u] == 0 && e != d) try_start(e);
            }
            try_start(d);
        }
    }
    for (std::size_t d = 0; d < D; ++d)
        if (idx.first_of_device[d] + pos[d] < idx.first_of_device[d + 1]) {
            const op& o = idx.ops[idx.first_of_device[d] + pos[d]];
            throw schedule_deadlock("simulate: schedule '" + sched.name + "' deadlocks: device " + std::to_string(d) +
                                        " waits forever at op " + op_label(sched, o) + " (stage " +
                                        std::to_string(o.stage) + ", position " + std::to_string(pos[d]) +
                                        "): an op it depends on is ordered after it",
                                    d, pos[d], o);
        }

    r.makespan_ms = r.lower_bound_ms = r.makespan_over_lower_bound = 0.0;
    r.busy_ms.assign(D, 0.0);
    r.peak_memory_mb.assign(D, 0.0);
    r.peak_memory_op.assign(D, op{});
    r.final_memory_mb.assign(D, 0.0);
    r.timeline.resize(opt.record_timeline ? D : 0);
    r.memory_mb.resize(opt.record_memory_curve ? D : 0);
    for (auto& t : r.timeline) t.clear();
    for (auto& m : r.memory_mb) m.clear();
    std::vector<double>& held = ws.held;  // [stage * M + mb]: contiguous per device
    held.assign(sc.microbatches * V, 0.0);
    for (std::size_t d = 0; d < D; ++d) {
        double state = 0.0;  // model state of the device's stages
        for (std::size_t c = 0; c < sched.placement.chunks(); ++c)
            state += sc.model_state_mb[sched.placement.stage_of(d, c)];
        double stored = 0.0, peak = state;
        const std::uint32_t b = idx.first_of_device[d], e = idx.first_of_device[d + 1];
        if (opt.record_timeline) r.timeline[d].reserve(e - b);
        std::vector<memory_point>* curve = opt.record_memory_curve ? &r.memory_mb[d] : nullptr;
        if (curve) {
            curve->reserve(2 * (e - b) + 1);
            curve->push_back({0.0, state});
        }
        if (b < e) r.peak_memory_op[d] = idx.ops[b];
        for (std::uint32_t i = b; i < e; ++i) {
            const op& o = idx.ops[i];
            double& h = held[o.stage * sc.microbatches + o.mb];
            const double st = nodes[i].ready, en = st + nodes[i].dur;
            const double during = model.during_mb(o, state + stored - h, h);
            const double after_h = model.held_after_mb(o);
            stored += after_h - h;
            h = after_h;
            if (during > peak) {
                peak = during;
                r.peak_memory_op[d] = o;
            }
            r.busy_ms[d] += en - st;
            r.makespan_ms = std::max(r.makespan_ms, en);
            if (opt.record_timeline) r.timeline[d].push_back({o, st, en});
            if (curve) {
                // A step of zero length (the op starts when the previous one ended) is dropped.
                if (curve->size() > 1 && curve->back().time_ms == st) curve->back().memory_mb = during;
                else curve->push_back({st, during});
                curve->push_back({en, state + stored});
            }
        }
        r.peak_memory_mb[d] = peak;
        r.final_memory_mb[d] = state + stored;
    }
    r.bubble_fraction.assign(D, 0.0);
    for (std::size_t d = 0; d < D; ++d)
        r.bubble_fraction[d] = r.makespan_ms > 0.0 ? 1.0 - r.busy_ms[d] / r.makespan_ms : 0.0;
    if (opt.compute_lower_bound) {
        r.lower_bound_ms = lower_bound(sc, sched.placement, w).bound_ms;
        r.makespan_over_lower_bound = r.lower_bound_ms > 0.0 ? r.makespan_ms / r.lower_bound_ms : 1.0;
    }
}

/// Simulates `sched` on `sc` (see the file comment and simulate_into()).
/// The scenario is validated first (scenario::validate(): sizes and scenario_limits), so one
/// built in code with an out-of-range value is refused with the field and its range.
[[nodiscard]] inline simulation_result simulate(const scenario& sc, const pipeline_schedule& sched,
                                                const simulation_options& opt = {}) {
    sc.validate();
    simulation_workspace ws;
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
