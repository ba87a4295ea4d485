// pipeplan/schedule/merak.hpp — Merak's recomputation-aware variants of 1F1B
// (Lai et al., "Merak: An Efficient Distributed DNN Training Framework with Automated 3D
// Parallelism for Giant Foundation Models", TPDS'23, arXiv 2206.04959).
//
// All three keep the 1F1B positions of forwards and backwards (linear placement) and differ in
// which forwards are checkpointed (f: keep only the stage input) and where recomputation runs:
// - early (`merak_variant::early_recompute`): stage s of S checkpoints the micro-batches whose
//   backward falls in its cool-down, j >= M - (S - s - 1), and runs their recomputation R_j
//   right before B_j: in the cool-down the stage would otherwise idle waiting for the gradient,
//   so R fills that wait. For S = 4, M = 6, stage 0:
//   F0 F1 F2 f3 B0 f4 B1 f5 B2 R3 B3 R4 B4 R5 B5.
// - last-stage-no-recomputation (`last_stage_no_recompute`): full activation checkpointing
//   (every forward is f, recomputed inline by its B after the gradient arrives, as
//   torch.utils.checkpoint does) on every stage but the last; the last stage runs its backward
//   right after its forward, so checkpointing there saves no memory and only costs time.
// - shifted critical path (`shifted_critical_path`): our derivation of Merak's description. In
//   1F1B with checkpointing, the recomputation sits inside B and therefore on the critical path
//   (gradient arrives -> recompute -> backward -> send gradient). Merak shifts it off that path
//   by issuing the recomputation as its own op R_j before B_j: R_j depends only on the stage's
//   stored input, so it runs while the stage waits for the gradient (after the steady-state
//   forward), and the gradient then only waits for the backward itself. Combined with the
//   last-stage rule, stage s < S-1 runs f for every micro-batch and R_j right before every
//   B_j; the last stage runs plain F/B.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"

namespace pipeplan::schedule {

enum class merak_variant : std::uint8_t { early_recompute, last_stage_no_recompute, shifted_critical_path };

/// Merak's recomputation-aware 1F1B (see the file comment).
struct merak {
    merak_variant variant = merak_variant::early_recompute;

    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        const std::size_t S = sc.stages, M = sc.microbatches;
        pipeline_schedule s;
        switch (variant) {
            case merak_variant::early_recompute: s.name = "merak-early"; break;
            case merak_variant::last_stage_no_recompute: s.name = "merak-last"; break;
            case merak_variant::shifted_critical_path: s.name = "merak-critical"; break;
        }
        s.placement = stage_placement::linear(S);
        s.orders.resize(S);
        for (std::size_t d = 0; d < S; ++d) {
            const std::size_t w = std::min(S - d - 1, M);
            const bool last = d + 1 == S;
            auto checkpointed = [&](std::uint32_t j) {
                switch (variant) {
                    case merak_variant::early_recompute: return j + w >= M;
                    default: return !last;
                }
            };
            const bool explicit_r = variant != merak_variant::last_stage_no_recompute;
            auto& o = s.orders[d];
            o.reserve(3 * M);
            for (const op& x : one_f_one_b::stage_order(S, M, d)) {
                if (x.kind == op_kind::F && checkpointed(x.mb)) {
                    o.push_back({op_kind::f, x.mb, x.stage});
                } else if (x.kind == op_kind::B && checkpointed(x.mb) && explicit_r) {
                    o.push_back({op_kind::R, x.mb, x.stage});
                    o.push_back(x);
                } else {
                    o.push_back(x);
                }
            }
        }
        return s;
    }
};

}  // namespace pipeplan::schedule
