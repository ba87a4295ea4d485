// pipeplan/schedule/lower_bound.hpp — makespan lower bounds that hold for every schedule.
//
// For a scenario and a placement, no schedule can finish faster than
//   (a) per device d: fill_d + work_d + drain_d, where work_d is all forward and backward time
//       of the stages on d, fill_d the shortest time before any micro-batch can reach d's first
//       stage (forward time + messages of the stages before it) and drain_d the shortest
//       backward chain that must still run after d's last backward (upstream backwards +
//       messages). With a split backward (B/W, zero-bubble schedules) a device may end on a W
//       that overlaps upstream work, so drain_d is 0 there;
//   (b) per micro-batch: its whole forward + backward path through all stages with messages
//       (with a split backward: the input-gradient chain plus stage 0's W).
// Overlapped forward/backward pairs (overlap_factor < 1) only shorten (a): a pair saves
// (1 − factor)·min(F, B) of its parts' time, so a device saves at most (1 − factor)·min(its
// forward time, its B time), which (a) subtracts; every op still takes at least its own
// duration, so (b) holds unchanged.
// Messages are charged latency + size/bandwidth without contention (a lower bound on the
// simulator's link model). Recomputation only adds work, so the bound holds for schedules
// with f/R ops as well.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <vector>

#include "pipeplan/schedule/placement.hpp"
#include "pipeplan/schedule/scenario.hpp"
#include "pipeplan/schedule/timing.hpp"

namespace pipeplan::schedule {

/// The parts of the bound, for reporting.
struct lower_bound_parts {
    double bound_ms = 0.0;                 ///< max of everything below
    std::vector<double> device_bound_ms;   ///< (a) per device
    double longest_path_ms = 0.0;          ///< (b) the longest single micro-batch path
};

namespace detail {

/// work_d of lower_bound() for the devices of stages[0..4) when each of them holds only that
/// stage, `left` the stages from stages[0] on, grouped by device (false, nothing written, otherwise): the four sums side by side, each in its own
/// order, so that their additions overlap (one sum alone waits for each addition: ~4 cycles
/// per (micro-batch, stage)).
inline bool sum_four_alone(const scenario& sc, const std::size_t* stages, std::size_t left,
                           const std::vector<std::size_t>& dev, std::vector<double>& work) {
    const std::size_t M = sc.microbatches;
    if (left < 4) return false;
    for (std::size_t q = 0; q < 4; ++q)  // stages[0]'s device differs from the stage before it
        if (q + 1 < left && dev[stages[q + 1]] == dev[stages[q]]) return false;
    const double* f[4];
    const double* b[4];
    for (std::size_t q = 0; q < 4; ++q) {
        f[q] = sc.forward_ms.data() + sc.at(0, stages[q]);
        b[q] = sc.backward_ms.data() + sc.at(0, stages[q]);
    }
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    for (std::size_t j = 0; j < M; ++j) {
        a0 += f[0][j] + b[0][j];
        a1 += f[1][j] + b[1][j];
        a2 += f[2][j] + b[2][j];
        a3 += f[3][j] + b[3][j];
    }
    work[dev[stages[0]]] = a0;
    work[dev[stages[1]]] = a1;
    work[dev[stages[2]]] = a2;
    work[dev[stages[3]]] = a3;
    return true;
}

}  // namespace detail

/// Lower bound on the makespan of any schedule of `sc` on `pl`. `w_share` > 0 means backward
/// work may be split into B and W (a W share of that fraction), which relaxes the drain;
/// `overlap_factor` < 1 allows overlapped forward/backward pairs priced as timing.hpp's
/// overlapped_ms() (1: none can save time).
[[nodiscard]] inline lower_bound_parts lower_bound(const scenario& sc, const stage_placement& pl,
                                                   double w_share = 0.0, double overlap_factor = 1.0) {
    const std::size_t V = sc.stages, M = sc.microbatches, D = pl.devices();
    if (pl.virtual_stages() != V)
        throw invalid_argument("lower_bound: the placement has " + std::to_string(pl.virtual_stages()) +
                               " virtual stages, the scenario " + std::to_string(V));
    const bool split = w_share > 0.0;
    const op_model model(sc, split ? w_share : 0.0);  // durations and message sizes (timing.hpp)
    std::vector<std::size_t> dev(V);
    for (std::size_t v = 0; v < V; ++v) dev[v] = pl.device_of(v);
    const bool free_net = sc.network.is_free();
    // The message op `from` sends to stage b, uncontended.
    auto msg = [&](op from, std::size_t b) {
        const std::size_t da = dev[from.stage], db = dev[b];
        if (free_net || da == db) return 0.0;
        return sc.network.latency(da, db) + sc.network.wire_ms(model.message_mb(from), da, db);
    };
    auto at = [](op_kind k, std::size_t j, std::size_t v) {
        return op{k, static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(v)};
    };
    auto fwd = [&](std::size_t j, std::size_t v) { return model.duration_ms(at(op_kind::F, j, v)); };
    auto bwd = [&](std::size_t j, std::size_t v) { return model.duration_ms(at(op_kind::B, j, v)); };  // B alone when split
    lower_bound_parts r;
    r.device_bound_ms.assign(D, 0.0);
    // Every loop runs over micro-batches innermost (the scenario is stage-major): one pass per
    // stage. work_d adds (j, v) in (micro-batch, stage) order, as its definition reads.
    std::vector<std::size_t> by_device(V);  // stages grouped by device, increasing within one
    std::iota(by_device.begin(), by_device.end(), std::size_t{0});
    std::stable_sort(by_device.begin(), by_device.end(), [&](std::size_t a, std::size_t b) { return dev[a] < dev[b]; });
    std::vector<double> work(D, 0.0), forward_work(D, 0.0), b_work(D, 0.0);
    const bool pairs = overlap_factor < 1.0;  // only then are the forward and B sums needed
    for (std::size_t i = 0, n = 0; i < V; i += n) {
        for (n = 1; i + n < V && dev[by_device[i + n]] == dev[by_device[i]];) ++n;
        if (n == 1 && !pairs && detail::sum_four_alone(sc, by_device.data() + i, V - i, dev, work)) {
            n = 4;  // four devices of one stage each, their sums side by side
            continue;
        }
        const std::size_t d = dev[by_device[i]];
        double all = 0.0, forward = 0.0, b = 0.0;  // sums in registers, in the order above
        for (std::size_t j = 0; j < M; ++j)
            for (std::size_t c = i; c < i + n; ++c) {
                const std::size_t v = by_device[c];
                all += sc.fwd(j, v) + sc.bwd(j, v);
                if (pairs) {
                    forward += fwd(j, v);
                    b += bwd(j, v);
                }
            }
        work[d] = all;
        forward_work[d] = forward;
        b_work[d] = b;
    }
    if (overlap_factor < 1.0)  // the most that overlapped pairs can save (file comment)
        for (std::size_t d = 0; d < D; ++d) work[d] -= (1.0 - overlap_factor) * std::min(forward_work[d], b_work[d]);
    constexpr std::size_t no_device = std::numeric_limits<std::size_t>::max();
    std::vector<std::size_t> first_of(V, no_device);  // [v]: the device whose first stage v is
    for (std::size_t d = 0; d < D; ++d) first_of[pl.first_stage_on(d)] = d;
    std::vector<double> fill(D, std::numeric_limits<double>::infinity()), drain = fill;
    // pf[j]: earliest arrival of micro-batch j's input at stage v; sb[j]: backward chain that
    // must follow stage v's backward (stages below v + messages); both advanced stage by stage.
    std::vector<double> pf(M, 0.0), sb(M);
    for (std::size_t j = 0; j < M; ++j) sb[j] = model.duration_ms(at(op_kind::W, j, 0));  // 0 without a split
    for (std::size_t v = 0; v < V; ++v) {
        if (v > 0 && free_net)  // msg() is 0 (added all the same: the same sums bit for bit)
            for (std::size_t j = 0; j < M; ++j) {
                pf[j] = pf[j] + fwd(j, v - 1) + 0.0;
                sb[j] = sb[j] + bwd(j, v - 1) + 0.0;
            }
        else if (v > 0)
            for (std::size_t j = 0; j < M; ++j) {
                pf[j] = pf[j] + fwd(j, v - 1) + msg(at(op_kind::F, j, v - 1), v);
                sb[j] = sb[j] + bwd(j, v - 1) + msg(at(op_kind::B, j, v), v - 1);
            }
        if (const std::size_t d = first_of[v]; d != no_device) {
            // Minima in registers, two at a time (a minimum is exact, so the order does not matter).
            double f0 = fill[d], f1 = fill[d], d0 = drain[d], d1 = drain[d];
            std::size_t j = 0;
            for (; j + 2 <= M; j += 2) {
                f0 = std::min(f0, pf[j]);
                f1 = std::min(f1, pf[j + 1]);
                d0 = std::min(d0, split ? 0.0 : sb[j]);
                d1 = std::min(d1, split ? 0.0 : sb[j + 1]);
            }
            for (; j < M; ++j) {
                f0 = std::min(f0, pf[j]);
                d0 = std::min(d0, split ? 0.0 : sb[j]);
            }
            fill[d] = std::min(f0, f1);
            drain[d] = std::min(d0, d1);
        }
    }
    for (std::size_t j = 0; j < M; ++j)
        r.longest_path_ms = std::max(r.longest_path_ms, pf[j] + fwd(j, V - 1) + bwd(j, V - 1) + sb[j]);
    r.bound_ms = r.longest_path_ms;
    for (std::size_t d = 0; d < D; ++d) {
        r.device_bound_ms[d] = fill[d] + work[d] + drain[d];
        r.bound_ms = std::max(r.bound_ms, r.device_bound_ms[d]);
    }
    return r;
}

}  // namespace pipeplan::schedule
