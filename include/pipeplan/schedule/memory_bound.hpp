// pipeplan/schedule/memory_bound.hpp — a makespan lower bound from a memory limit.
//
// lower_bound.hpp's bound ignores memory: under a tight limit few micro-batches fit in flight
// and every schedule runs far above it. This bound holds for every schedule of a scenario whose
// simulated peak memory (simulation_result::peak_memory_mb, model state included) stays within
// `memory_limit_mb` on every device.
//
// On device d, (micro-batch j, stage v on d) occupies at least s(j, v) from the start of F(j, v)
// to the end of B(j, v): s = stored_mb, or, for schedules that may run f ops (checkpointing
// forwards: schedule_traits::checkpoint_rule), min(stored_mb, the checkpoint (1 − r_v)·stored_mb
// + activation_mb(j)), which an f keeps until its R; while F(j, v) or B(j, v) itself runs, its
// footprint peak_mb covers it. That span lasts at least, one op after the other, the forward
// and the input-gradient backward of j on v and on every stage after it:
// span(j, v) = Σ_{u >= v} (F(j, u) + (1 − w)·B(j, u)) (w: the weight-gradient share split off;
// an overlapped pair takes at least either part's time; messages only add). At every instant
// the device's model state plus what its (micro-batch, stage) pairs occupy is at most the
// footprint of some op (the one running, or the last one that ran: what an op leaves held is
// at most its footprint, given a checkpoint no larger than the forward's peak_mb), so for a
// schedule within the limit
//     makespan · (limit − state_d) ≥ Σ_{j, v on d} s(j, v) · span(j, v).
// memory_bound_ms() is the largest of these quotients over the devices; 0 where a checkpoint
// of a schedule that may checkpoint could exceed its forward's peak_mb (the argument above
// needs it) or a device's model state alone reaches the limit (no schedule fits: the
// simulation says so). Cost O(stages · micro-batches).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "pipeplan/schedule/placement.hpp"
#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::schedule {

/// The memory lower bound of the file comment for scenario `sc` placed by `pl`, with the limit
/// `memory_limit_mb` (per device, model state included; infinite: 0), weight-gradient share
/// `w_share` in [0, 1) split off each backward (0 for schedules that do not split it), and
/// `checkpoints`: the schedules may run f ops (a forward that keeps only its checkpoint).
[[nodiscard]] inline double memory_bound_ms(const scenario& sc, const stage_placement& pl, double memory_limit_mb,
                                            double w_share = 0.0, bool checkpoints = false) {
    const std::size_t V = sc.stages, M = sc.microbatches, D = pl.devices();
    if (!std::isfinite(memory_limit_mb) || M == 0 || pl.virtual_stages() != V) return 0.0;
    std::vector<double> held_ms_mb(D, 0.0), state_mb(D, 0.0);  // Σ s·span and model state per device
    std::vector<double> span_ms(M, 0.0);                        // span(j, v) of the stage v below
    for (std::size_t v = V; v-- > 0;) {
        const std::size_t d = pl.device_of(v);
        state_mb[d] += sc.model_state_mb[v];
        double sum = 0.0;
        for (std::size_t j = 0; j < M; ++j) {
            const std::size_t k = sc.at(j, v);
            double held_mb = sc.stored_mb[k];
            if (checkpoints) {
                const double checkpoint_mb = (1.0 - sc.ratio(v)) * held_mb + sc.activation(j);
                if (!(checkpoint_mb <= sc.peak_mb[k])) return 0.0;
                held_mb = std::min(held_mb, checkpoint_mb);
            }
            span_ms[j] += sc.forward_ms[k] + (1.0 - w_share) * sc.backward_ms[k];
            sum += held_mb * span_ms[j];
        }
        held_ms_mb[d] += sum;
    }
    double bound_ms = 0.0;
    for (std::size_t d = 0; d < D; ++d) {
        const double room_mb = memory_limit_mb - state_mb[d];
        if (!(room_mb > 0.0)) return 0.0;
        bound_ms = std::max(bound_ms, held_ms_mb[d] / room_mb);
    }
    return bound_ms;
}

}  // namespace pipeplan::schedule
