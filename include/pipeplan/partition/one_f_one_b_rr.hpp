// pipeplan/partition/one_f_one_b_rr.hpp — PipeDream's asynchronous pipeline: 1F1B-RR with
// weight stashing, generated and simulated on a partition.
//
// Stage k runs on r_k workers (replicas); minibatch i goes to replica i mod r_k of every stage
// (round robin). A worker of stage k first runs w_k forwards, then alternates one forward and
// one backward, then drains its last w_k backwards, where (PipeDream's runtime)
//   w_k = ⌊(W − 1 − Σ_{i<k} r_i) / r_k⌋,   W = Σ r_k workers,
// so the input stage keeps NOAM = ⌈W / r_0⌉ = w_0 + 1 minibatches in flight per replica. There
// is no flush: weight updates happen after every backward, and each worker stashes one weight
// version per minibatch in flight (w_k + 1) so a minibatch's backward uses the weights its
// forward used. Staleness is the number of updates a worker makes between a minibatch's forward
// and its backward (w_k in steady state); with vertical sync every stage uses the version the
// input stage used, so the input stage's staleness applies to all.
//
// The flushed (synchronous) variant runs the same per-worker order on groups of NOAM · r_0
// minibatches and waits for every backward of a group before admitting the next (one weight
// version, no staleness).
//
// Times: a forward / backward of stage k takes forward_ms / backward_ms (+ sync_ms, the
// replicas' weight synchronisation, on every backward); an activation (and its gradient) takes
// transfer_ms to cross the boundary after stage k. A worker runs one operation at a time;
// transfers overlap compute. The steady-state time per minibatch is measured between the
// completions of minibatches N/4 and 3N/4 (a whole number of round-robin periods).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/partition/pipedream.hpp"

namespace pipeplan::partition {

/// One stage of the pipeline as the simulator sees it.
struct rr_stage {
    double forward_ms = 0;
    double backward_ms = 0;
    int replicas = 1;
    double sync_ms = 0;           ///< weight synchronisation added to each backward
    double transfer_ms = 0;       ///< activation / gradient transfer to / from the next stage
    double parameter_bytes = 0;   ///< weights of the stage (one version)
    double activation_bytes = 0;  ///< activations one minibatch keeps until its backward
};

struct rr_options {
    std::size_t minibatches = 0;  ///< 0: enough for a steady state (see rr_minibatches)
    bool flush = false;           ///< the synchronous variant
};

/// Per-stage report.
struct rr_stage_report {
    int warmup = 0;                 ///< w_k: forwards before the first backward
    int weight_versions = 1;        ///< stashed weight versions per worker (w_k + 1; 1 flushed)
    int max_in_flight = 0;          ///< measured: most minibatches between forward and backward
    int staleness = 0;              ///< measured: most updates between a forward and its backward
    double memory_bytes = 0;        ///< weight versions × parameters + in flight × activations
    double busy_fraction = 0;       ///< compute time / (makespan) of the stage's busiest worker
};

struct rr_result {
    int workers = 0;
    int noam = 0;                        ///< ⌈W / r_0⌉
    std::size_t minibatches = 0;
    double steady_time_per_minibatch_ms = 0;
    double predicted_time_per_minibatch_ms = 0;  ///< max_k (f + b + sync) / r_k and transfers / r_k
    double makespan_ms = 0;
    int vertical_sync_staleness = 0;     ///< the input stage's staleness
    std::vector<rr_stage_report> stages;
};

namespace detail {

struct rr_op {
    bool backward = false;
    std::size_t minibatch = 0;
    std::size_t group = 0;
};

/// The per-worker operation lists: worker (k, q) handles minibatches q, q + r_k, ... of each
/// group of `group_size` minibatches (all of them in one group without a flush).
[[nodiscard]] inline std::vector<std::vector<rr_op>> rr_worker_ops(const std::vector<rr_stage>& st,
                                                                   const std::vector<int>& warmup, std::size_t n,
                                                                   std::size_t group_size) {
    std::vector<std::vector<rr_op>> ops;
    for (std::size_t k = 0; k < st.size(); ++k)
        for (int q = 0; q < st[k].replicas; ++q) {
            std::vector<rr_op> list;
            for (std::size_t g0 = 0; g0 < n; g0 += group_size) {
                std::vector<std::size_t> mine;
                for (std::size_t i = g0 + static_cast<std::size_t>(q); i < std::min(n, g0 + group_size);
                     i += static_cast<std::size_t>(st[k].replicas))
                    mine.push_back(i);
                const std::size_t w = std::min(mine.size(), static_cast<std::size_t>(warmup[k]));
                const std::size_t g = g0 / group_size;
                std::size_t f = 0, b = 0;
                for (; f < w; ++f) list.push_back({false, mine[f], g});
                for (; f < mine.size(); ++f, ++b) {
                    list.push_back({false, mine[f], g});
                    list.push_back({true, mine[b], g});
                }
                for (; b < mine.size(); ++b) list.push_back({true, mine[b], g});
            }
            ops.push_back(std::move(list));
        }
    return ops;
}

}  // namespace detail

/// The number of minibatches simulated by default: 32 round-robin periods, at least 8 × NOAM.
[[nodiscard]] inline std::size_t rr_minibatches(const std::vector<rr_stage>& st) {
    std::size_t period = 1, workers = 0;
    for (const auto& s : st) {
        period = std::lcm(period, static_cast<std::size_t>(s.replicas));
        workers += static_cast<std::size_t>(s.replicas);
    }
    return std::max<std::size_t>(32 * period, 8 * workers);
}

namespace detail {

/// When each worker's operations ended: the list schedule (each worker runs its list in order
/// as soon as the inputs are there; a flush group waits for the previous group to end).
struct rr_timeline {
    std::vector<std::vector<double>> fdone, bdone;  ///< [stage][minibatch] end of its forward / backward
    std::vector<double> busy;                       ///< [worker] compute time
};

[[nodiscard]] inline rr_timeline rr_list_schedule(const std::vector<rr_stage>& stages, const std::vector<int>& first_worker,
                                                  const std::vector<std::vector<rr_op>>& ops, std::size_t n,
                                                  std::size_t group) {
    const std::size_t S = stages.size();
    const double never = -1;
    rr_timeline t;
    t.fdone.assign(S, std::vector<double>(n, never));
    t.bdone = t.fdone;
    t.busy.assign(ops.size(), 0);
    std::vector<double> group_end((n + group - 1) / group, 0);
    std::vector<std::size_t> group_left(group_end.size(), 0);
    for (const auto& list : ops)
        for (const auto& o : list) ++group_left[o.group];
    std::vector<std::size_t> next(ops.size(), 0);
    std::vector<double> free_at(ops.size(), 0);
    std::vector<std::size_t> stage_of(ops.size());
    for (std::size_t k = 0; k < S; ++k)
        for (int w = first_worker[k]; w < first_worker[k + 1]; ++w) stage_of[static_cast<std::size_t>(w)] = k;
    std::size_t remaining = 0;
    for (const auto& l : ops) remaining += l.size();
    while (remaining > 0) {
        bool progress = false;
        for (std::size_t w = 0; w < ops.size(); ++w)
            while (next[w] < ops[w].size()) {
                const auto& o = ops[w][next[w]];
                const std::size_t k = stage_of[w], i = o.minibatch;
                const auto& s = stages[k];
                double ready = o.group > 0 ? group_end[o.group - 1] : 0.0;
                if (o.group > 0 && group_left[o.group - 1] > 0) break;
                if (!o.backward && k > 0) {
                    if (t.fdone[k - 1][i] < 0) break;
                    ready = std::max(ready, t.fdone[k - 1][i] + stages[k - 1].transfer_ms);
                }
                if (o.backward && k + 1 < S) {
                    if (t.bdone[k + 1][i] < 0) break;
                    ready = std::max(ready, t.bdone[k + 1][i] + s.transfer_ms);
                }
                if (o.backward && t.fdone[k][i] < 0) break;
                const double dur = o.backward ? s.backward_ms + s.sync_ms : s.forward_ms;
                const double end = std::max(free_at[w], ready) + dur;
                free_at[w] = end;
                t.busy[w] += dur;
                (o.backward ? t.bdone : t.fdone)[k][i] = end;
                group_end[o.group] = std::max(group_end[o.group], end);
                --group_left[o.group];
                ++next[w];
                --remaining;
                progress = true;
            }
        if (!progress) throw error("1F1B-RR: the schedule deadlocked (internal error)");
    }
    return t;
}

/// The report of stage k: warm-up, weight versions, in-flight and staleness from its workers'
/// lists, busy fraction and memory.
[[nodiscard]] inline rr_stage_report rr_report_of_stage(const std::vector<rr_stage>& stages, std::size_t k,
                                                        const std::vector<int>& warmup, const std::vector<int>& first_worker,
                                                        const std::vector<std::vector<rr_op>>& ops,
                                                        const std::vector<double>& busy, double makespan_ms, std::size_t n,
                                                        bool flush) {
    const auto& s = stages[k];
    rr_stage_report rep;
    rep.warmup = warmup[k];
    rep.weight_versions = flush ? 1 : warmup[k] + 1;
    for (int w = first_worker[k]; w < first_worker[k + 1]; ++w) {
        const auto& list = ops[static_cast<std::size_t>(w)];
        int in_flight = 0, updates = 0;
        std::vector<int> updates_at_forward(n, 0);
        for (const auto& o : list) {
            if (!o.backward) {
                ++in_flight;
                updates_at_forward[o.minibatch] = updates;
                rep.max_in_flight = std::max(rep.max_in_flight, in_flight);
            } else {
                rep.staleness = std::max(rep.staleness, updates - updates_at_forward[o.minibatch]);
                --in_flight;
                ++updates;
            }
        }
        rep.busy_fraction = std::max(rep.busy_fraction, busy[static_cast<std::size_t>(w)] / makespan_ms);
    }
    if (flush) rep.staleness = 0;  // weights update once per flush, after every backward
    rep.memory_bytes = rep.weight_versions * s.parameter_bytes + rep.max_in_flight * s.activation_bytes;
    return rep;
}

}  // namespace detail

/// Simulates 1F1B-RR (or its flushed variant) on `stages`. Throws invalid_argument for an
/// empty pipeline, a replica count < 1 or a negative time.
[[nodiscard]] inline rr_result simulate_1f1b_rr(const std::vector<rr_stage>& stages, const rr_options& opt = {}) {
    if (stages.empty()) throw invalid_argument("1F1B-RR: the pipeline has no stage");
    const std::size_t S = stages.size();
    std::vector<int> warmup(S), first_worker(S + 1, 0);
    rr_result res;
    for (std::size_t k = 0; k < S; ++k) {
        const auto& s = stages[k];
        if (s.replicas < 1) throw invalid_argument("1F1B-RR: stage " + std::to_string(k) + " has replicas < 1");
        if (!(s.forward_ms >= 0 && s.backward_ms >= 0 && s.sync_ms >= 0 && s.transfer_ms >= 0))
            throw invalid_argument("1F1B-RR: stage " + std::to_string(k) + " has a negative or NaN time");
        first_worker[k + 1] = first_worker[k] + s.replicas;
    }
    res.workers = first_worker[S];
    for (std::size_t k = 0; k < S; ++k) warmup[k] = (res.workers - 1 - first_worker[k]) / stages[k].replicas;
    res.noam = (res.workers + stages[0].replicas - 1) / stages[0].replicas;
    const std::size_t n = opt.minibatches > 0 ? opt.minibatches : rr_minibatches(stages);
    res.minibatches = n;
    const std::size_t group = opt.flush ? static_cast<std::size_t>(res.noam * stages[0].replicas) : n;
    const auto ops = detail::rr_worker_ops(stages, warmup, n, group);
    const detail::rr_timeline t = detail::rr_list_schedule(stages, first_worker, ops, n, group);

    // Steady state: completions (input stage backward) of minibatches a..b, a whole number of periods.
    std::vector<double> done = t.bdone[0];
    std::sort(done.begin(), done.end());
    res.makespan_ms = done.back();
    std::size_t period = 1;
    for (const auto& s : stages) period = std::lcm(period, static_cast<std::size_t>(s.replicas));
    if (opt.flush) period = std::lcm(period, group);
    std::size_t a = n / 4, len = (n / 2) / period * period;
    if (len == 0) {
        a = 0;
        len = n - 1;
    }
    res.steady_time_per_minibatch_ms = len > 0 ? (done[a + len] - done[a]) / static_cast<double>(len) : done.back();

    for (std::size_t k = 0; k < S; ++k) {
        const auto& s = stages[k];
        res.predicted_time_per_minibatch_ms =
            std::max({res.predicted_time_per_minibatch_ms, (s.forward_ms + s.backward_ms + s.sync_ms) / s.replicas,
                      2 * s.transfer_ms / s.replicas, k > 0 ? 2 * stages[k - 1].transfer_ms / s.replicas : 0.0});
        res.stages.push_back(detail::rr_report_of_stage(stages, k, warmup, first_worker, ops, t.busy, res.makespan_ms, n, opt.flush));
    }
    res.vertical_sync_staleness = res.stages.front().staleness;
    return res;
}

/// The stages of one level of an optimizer result, as the simulator sees them: forward and
/// backward from the layers of each range, PipeDream's weight-sync time on every backward, and
/// one direction of the boundary's activation transfer (PipeDream charges 2× for activations and
/// gradients) at the level's bandwidth and compression.
[[nodiscard]] inline std::vector<rr_stage> rr_stages(const antichain_dag& dag, const pipedream_level& level,
                                                     double activation_compression = 1.0) {
    std::vector<rr_stage> out;
    const auto& st = dag.states;
    const double bw = level.bandwidth_bytes_per_s;
    for (const auto& s : level.stages) {
        const auto range = [&](double antichain_state::*f) {
            return st[s.end - 1].*f - (s.start > 0 ? st[s.start - 1].*f : 0.0);
        };
        rr_stage r;
        r.replicas = s.replicas;
        r.forward_ms = range(&antichain_state::forward_ms);
        r.backward_ms = std::max(0.0, range(&antichain_state::compute_ms) - r.forward_ms);
        r.parameter_bytes = range(&antichain_state::parameter_bytes);
        r.activation_bytes = range(&antichain_state::activation_bytes);
        r.sync_ms = 1000.0 * 4.0 * (r.replicas - 1) * r.parameter_bytes / (bw * r.replicas);
        r.transfer_ms = s.end < st.size() ? 1000.0 * st[s.end - 1].output_activation_bytes / bw / activation_compression : 0.0;
        out.push_back(r);
    }
    return out;
}

}  // namespace pipeplan::partition
