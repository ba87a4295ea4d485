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
#include <cstdint>
#include <cstring>
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

/// What lower_bound() combines, per device: work_d, fill_d and drain_d (file comment); per
/// micro-batch j at the last stage V − 1: pf[j], the earliest arrival of its input there, and
/// sb[j], the backward chain that must follow that stage's backward (stages below + messages).
struct bound_sweep {
    std::vector<double> work, fill, drain, pf, sb;
};

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

/// work_d of every device (the sums of the file comment, in (micro-batch, stage) order), less
/// what overlapped pairs may save when overlap_factor < 1.
inline void sum_work(const scenario& sc, const std::vector<std::size_t>& dev, const op_model& model, double overlap_factor,
                     std::vector<double>& work) {
    const std::size_t V = sc.stages, M = sc.microbatches, D = work.size();
    auto at = [](op_kind k, std::size_t j, std::size_t v) {
        return op{k, static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(v)};
    };
    // Every loop runs over micro-batches innermost (the scenario is stage-major): one pass per
    // stage. work_d adds (j, v) in (micro-batch, stage) order, as its definition reads.
    std::vector<std::size_t> by_device(V);  // stages grouped by device, increasing within one
    std::iota(by_device.begin(), by_device.end(), std::size_t{0});
    std::stable_sort(by_device.begin(), by_device.end(), [&](std::size_t a, std::size_t b) { return dev[a] < dev[b]; });
    std::vector<double> forward_work(D, 0.0), b_work(D, 0.0);
    const bool pairs = overlap_factor < 1.0;  // only then are the forward and B sums needed
    for (std::size_t i = 0, n = 0; i < V; i += n) {
        for (n = 1; i + n < V && dev[by_device[i + n]] == dev[by_device[i]];) ++n;
        if (n == 1 && !pairs && sum_four_alone(sc, by_device.data() + i, V - i, dev, work)) {
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
                    forward += model.duration_ms(at(op_kind::F, j, v));
                    b += model.duration_ms(at(op_kind::B, j, v));  // B alone when split
                }
            }
        work[d] = all;
        forward_work[d] = forward;
        b_work[d] = b;
    }
    if (pairs)  // the most that overlapped pairs can save (file comment)
        for (std::size_t d = 0; d < D; ++d) work[d] -= (1.0 - overlap_factor) * std::min(forward_work[d], b_work[d]);
}

/// fill_d and drain_d of every device and pf, sb at the last stage (bound_sweep), advanced stage
/// by stage (`first_of[v]`: the device whose first stage v is, or none).
inline void sweep_stages(const scenario& sc, const std::vector<std::size_t>& dev, const std::vector<std::size_t>& first_of,
                         const op_model& model, bool split, bound_sweep& out) {
    const std::size_t V = sc.stages, M = sc.microbatches;
    const bool free_net = sc.network.is_free();
    auto at = [](op_kind k, std::size_t j, std::size_t v) {
        return op{k, static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(v)};
    };
    auto fwd = [&](std::size_t j, std::size_t v) { return model.duration_ms(at(op_kind::F, j, v)); };
    auto bwd = [&](std::size_t j, std::size_t v) { return model.duration_ms(at(op_kind::B, j, v)); };  // B alone when split
    // The message op `from` sends to stage b, uncontended.
    auto msg = [&](op from, std::size_t b) {
        const std::size_t da = dev[from.stage], db = dev[b];
        if (free_net || da == db) return 0.0;
        return sc.network.latency(da, db) + sc.network.wire_ms(model.message_mb(from), da, db);
    };
    std::vector<double>&pf = out.pf, &sb = out.sb;
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
        if (const std::size_t d = first_of[v]; d < out.fill.size()) {
            // Minima in registers, two at a time (a minimum is exact, so the order does not matter).
            double f0 = out.fill[d], f1 = out.fill[d], d0 = out.drain[d], d1 = out.drain[d];
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
            out.fill[d] = std::min(f0, f1);
            out.drain[d] = std::min(d0, d1);
        }
    }
}

/// Two lanes of doubles (micro-batches j, j + 1), for one_stage_group(); GCC's and Clang's vector
/// extension (SSE2 on x86-64): each lane's additions are the scalar ones, bit for bit.
using double2 = double __attribute__((vector_size(16)));
[[nodiscard, gnu::always_inline]] inline double2 load2(const double* p) noexcept {
    double2 x;
    std::memcpy(&x, p, sizeof x);
    return x;
}
[[gnu::always_inline]] inline void store2(double* p, double2 x) noexcept { std::memcpy(p, &x, sizeof x); }
/// std::min(a, b) per lane (b where b < a, else a: minpd).
[[nodiscard, gnu::always_inline]] inline double2 min2(double2 a, double2 b) noexcept { return b < a ? b : a; }

/// sweep_one_stage() for the N stages from v0 (each its own device's), two micro-batches at a
/// time: per stage the minima of pf and sb there (fill and drain: lanes of even and odd
/// micro-batches, as sweep_stages() keeps them), its work sum (in micro-batch order: the
/// scalar additions of sum_work()) and pf, sb advanced past it (not past the last stage, when
/// the group ends there: `last`).
template <std::size_t N, bool split, bool last>
void one_stage_group(const scenario& sc, std::size_t v0, double b_factor, bound_sweep& out) {
    const std::size_t M = sc.microbatches;
    const double inf = std::numeric_limits<double>::infinity();
    const double* f[N];
    const double* b[N];
    double2 fill[N], drain[N];
    double work[N];
    for (std::size_t q = 0; q < N; ++q) {
        f[q] = sc.forward_ms.data() + sc.at(0, v0 + q);
        b[q] = sc.backward_ms.data() + sc.at(0, v0 + q);
        fill[q] = drain[q] = double2{inf, inf};
        work[q] = 0.0;
    }
    const double2 zero{0.0, 0.0}, factor{b_factor, b_factor};
    double* pf = out.pf.data();
    double* sb = out.sb.data();
    std::size_t j = 0;
    for (; j + 2 <= M; j += 2) {
        double2 p = load2(pf + j), s = load2(sb + j);
        for (std::size_t q = 0; q < N; ++q) {
            fill[q] = min2(fill[q], p);
            if constexpr (!split) drain[q] = min2(drain[q], s);
            const double2 fw = load2(f[q] + j), bw = load2(b[q] + j), both = fw + bw;
            work[q] = work[q] + both[0] + both[1];
            if (q + 1 < N || !last) {  // (known at compile time)
                p = p + fw + zero;
                s = s + (bw * factor + zero) + zero;
            }
        }
        store2(pf + j, p);
        store2(sb + j, s);
    }
    for (; j < M; ++j) {  // an odd micro-batch count's last one: lane 0, as sweep_stages()
        for (std::size_t q = 0; q < N; ++q) {
            fill[q][0] = std::min(fill[q][0], pf[j]);
            if constexpr (!split) drain[q][0] = std::min(drain[q][0], sb[j]);
            work[q] += f[q][j] + b[q][j];
            if (q + 1 < N || !last) {
                pf[j] = pf[j] + f[q][j] + 0.0;
                sb[j] = sb[j] + (b[q][j] * b_factor + 0.0) + 0.0;
            }
        }
    }
    for (std::size_t q = 0; q < N; ++q) {
        out.work[v0 + q] = work[q];
        out.fill[v0 + q] = std::min(fill[q][0], fill[q][1]);
        out.drain[v0 + q] = split && M > 0 ? 0.0 : std::min(drain[q][0], drain[q][1]);
    }
}

/// sum_work() and sweep_stages() in one pass over the durations (each read once, a stage's sums
/// and minima taken as pf and sb pass it), the same figures bit for bit, where every device holds
/// one stage (device v runs stage v), the network is free and no pairs overlap. Four stages at a
/// time, so that their work sums (each a chain of additions) overlap. pf and sb hold stage 0's.
template <bool split>
void sweep_one_stage(const scenario& sc, double b_factor, bound_sweep& out) {
    const std::size_t V = sc.stages;
    std::size_t v = 0;
    for (; v + 4 < V; v += 4) one_stage_group<4, split, false>(sc, v, b_factor, out);
    switch (V - v) {  // the last group: 1 to 4 stages
        case 4: one_stage_group<4, split, true>(sc, v, b_factor, out); break;
        case 3: one_stage_group<3, split, true>(sc, v, b_factor, out); break;
        case 2: one_stage_group<2, split, true>(sc, v, b_factor, out); break;
        case 1: one_stage_group<1, split, true>(sc, v, b_factor, out); break;
        default: break;
    }
}

/// Fills `out` for lower_bound(): in one pass where every device holds one stage on a free network
/// without overlapped pairs (sweep_one_stage(), unless `general`), else sum_work() and
/// sweep_stages(). (Both give the same figures where both apply; tests compare them.)
inline void sweep_bounds(const scenario& sc, const stage_placement& pl, double w_share, double overlap_factor,
                         bound_sweep& out, bool general = false) {
    const std::size_t V = sc.stages, M = sc.microbatches, D = pl.devices();
    const bool split = w_share > 0.0;
    const op_model model(sc, split ? w_share : 0.0);  // durations and message sizes (timing.hpp)
    out.work.assign(D, 0.0);
    out.fill.assign(D, std::numeric_limits<double>::infinity());
    out.drain = out.fill;
    out.pf.assign(M, 0.0);
    out.sb.resize(M);
    for (std::size_t j = 0; j < M; ++j)  // 0 without a split
        out.sb[j] = model.duration_ms(op{op_kind::W, static_cast<std::uint32_t>(j), 0});
    if (!general && pl.chunks() == 1 && sc.network.is_free() && !(overlap_factor < 1.0)) {
        const double b_factor = 1.0 - model.w_share();  // B's share of the backward (timing.hpp)
        return split ? sweep_one_stage<true>(sc, b_factor, out) : sweep_one_stage<false>(sc, b_factor, out);
    }
    std::vector<std::size_t> dev(V);
    for (std::size_t v = 0; v < V; ++v) dev[v] = pl.device_of(v);
    sum_work(sc, dev, model, overlap_factor, out.work);
    std::vector<std::size_t> first_of(V, D);  // [v]: the device whose first stage v is (D: none)
    for (std::size_t d = 0; d < D; ++d) first_of[pl.first_stage_on(d)] = d;
    sweep_stages(sc, dev, first_of, model, split, out);
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
    const op_model model(sc, split ? w_share : 0.0);
    detail::bound_sweep s;
    detail::sweep_bounds(sc, pl, w_share, overlap_factor, s);
    auto at = [](op_kind k, std::size_t j, std::size_t v) {
        return op{k, static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(v)};
    };
    lower_bound_parts r;
    for (std::size_t j = 0; j < M; ++j)
        r.longest_path_ms = std::max(r.longest_path_ms, s.pf[j] + model.duration_ms(at(op_kind::F, j, V - 1)) +
                                                            model.duration_ms(at(op_kind::B, j, V - 1)) + s.sb[j]);
    r.bound_ms = r.longest_path_ms;
    r.device_bound_ms.assign(D, 0.0);
    for (std::size_t d = 0; d < D; ++d) {
        r.device_bound_ms[d] = s.fill[d] + s.work[d] + s.drain[d];
        r.bound_ms = std::max(r.bound_ms, r.device_bound_ms[d]);
    }
    return r;
}

}  // namespace pipeplan::schedule
