// pipeplan/schedule/merak.hpp — Merak's recomputation-aware variants of 1F1B
// (Lai et al., "Merak: An Efficient Distributed DNN Training Framework with Automated 3D
// Parallelism for Giant Foundation Models", TPDS'23; Merak/core/pipeline/schedule.py:
// PreRecomputeTrainSchedule, LastNoRecomputeTrainSchedule, FullCriticalPathTrainSchedule).
//
// Merak trains with activation checkpointing on: on every checkpointed stage every forward is
// `f` (keeps its input). A `B` whose forward was `f` recomputes inline, after its gradient
// arrived, unless an explicit `R` ("RecomputeRecvGrad") comes before it: R re-runs the stage
// forward from the stored input before the gradient is received, so it starts as soon as the
// previous op ended. Ops are in DeepSpeed's 1F1B order. C(s) = the last S−1−s micro-batches
// (those whose backward falls in stage s's cool-down).
// - early (`merak-early`): every stage, the last included, runs f; on stage s the micro-batches
//   in C(s) get an explicit R right before their B; the other Bs recompute inline.
// - last (`merak-last`): the last stage runs F and plain B. Stage S−2 gives micro-batch 0 an
//   explicit R0 before B0 and recomputes every other micro-batch inline. Stages s < S−2 as early.
// - critical (`merak-critical`, Merak's shifted_critical_path): the last stage runs F/B. Stage
//   S−2 runs the forward of micro-batch 2 before its first backward and gives micro-batches 0
//   and 1 explicit early Rs (f0 f1 f2 R0 B0 R1 B1 f3 B2 ...), then 1F1B with inline
//   recomputation. Stage S−3 gives micro-batch 0 an explicit R0 and C(s) explicit Rs. Stages
//   s < S−3 as early.
// Merak requires M >= S (and M >= 4 for the shifted critical path).
// A stage whose checkpoint ratio (scenario::checkpoint_ratio) is 0 does not checkpoint: its
// forwards are F and its explicit Rs are dropped (nothing to recompute).
// Merak's stage-aware ratio for `activation_checkpoint_ratio` r: merak_checkpoint_ratios().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"

namespace pipeplan::schedule {

enum class merak_variant : std::uint8_t { early_recompute, last_stage_no_recompute, shifted_critical_path };

[[nodiscard]] constexpr auto enum_names(merak_variant) noexcept {
    return name_table<merak_variant, 3>{"Merak variant",
                                        {{{merak_variant::early_recompute, "merak-early"},
                                          {merak_variant::last_stage_no_recompute, "merak-last"},
                                          {merak_variant::shifted_critical_path, "merak-critical"}}}};
}

/// Merak's stage-aware checkpoint ratios for `activation_checkpoint_ratio` r in [0, 1] on S
/// stages: stage s < S−1 gets r_s = 1 − (1 − r)·(S−1)/(S−1−s), clamped at 0 (no
/// checkpointing); the last stage 0. With the shifted critical path stage S−2 takes the ratio
/// of stage S−3 (S >= 3).
[[nodiscard]] inline std::vector<double> merak_checkpoint_ratios(std::size_t S, double r, merak_variant v) {
    if (S == 0) throw invalid_argument("merak_checkpoint_ratios: S must be >= 1");
    if (!(r >= 0.0 && r <= 1.0))
        throw invalid_argument("checkpoint ratio must lie in [0, 1], is " + std::to_string(r));
    std::vector<double> out(S, 0.0);
    for (std::size_t s = 0; s + 1 < S; ++s)
        out[s] = std::max(0.0, 1.0 - (1.0 - r) * static_cast<double>(S - 1) / static_cast<double>(S - 1 - s));
    if (v == merak_variant::shifted_critical_path && S >= 3) out[S - 2] = out[S - 3];
    return out;
}

/// Merak's recomputation-aware 1F1B (see the file comment).
struct merak {
    merak_variant variant = merak_variant::early_recompute;

    /// The base order of stage `s` (kinds F and B): DeepSpeed's 1F1B, except stage S−2 of the
    /// shifted critical path, which runs three forwards before its first backward and its
    /// first two backwards back to back: F0 F1 F2 B0 B1 F3 B2 F4 B3 ... B(M−1).
    [[nodiscard]] std::vector<op> base_order(std::size_t S, std::size_t M, std::size_t s) const {
        if (variant != merak_variant::shifted_critical_path || s + 2 != S) return one_f_one_b::stage_order(S, M, s);
        const auto st = static_cast<std::uint32_t>(s);
        std::vector<op> o;
        o.reserve(2 * M);
        for (std::uint32_t j = 0; j < 3; ++j) o.push_back({op_kind::F, j, st});
        o.push_back({op_kind::B, 0, st});
        o.push_back({op_kind::B, 1, st});
        for (std::uint32_t j = 3; j < M; ++j) {
            o.push_back({op_kind::F, j, st});
            o.push_back({op_kind::B, j - 1, st});
        }
        o.push_back({op_kind::B, static_cast<std::uint32_t>(M - 1), st});
        return o;
    }

    /// True when stage s checkpoints (runs f) under this variant with ratio `ratio`.
    [[nodiscard]] bool checkpoints(std::size_t S, std::size_t s, double ratio) const noexcept {
        if (ratio <= 0.0) return false;
        return variant == merak_variant::early_recompute || s + 1 < S;
    }

    /// True when micro-batch j gets an explicit R before its B on a checkpointed stage s.
    [[nodiscard]] bool explicit_recompute(std::size_t S, std::size_t M, std::size_t s, std::size_t j) const noexcept {
        const bool cooldown = j + (S - 1 - s) >= M;  // j in C(s)
        switch (variant) {
            case merak_variant::early_recompute: return cooldown;
            case merak_variant::last_stage_no_recompute:
                if (s + 2 == S) return j == 0;
                return s + 1 < S && cooldown;
            case merak_variant::shifted_critical_path:
                if (s + 2 == S) return j <= 1;
                if (s + 3 == S) return j == 0 || cooldown;
                return s + 1 < S && cooldown;
        }
        return false;
    }

    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        const std::size_t S = sc.stages, M = sc.microbatches;
        pipeline_schedule s;
        s.name = std::string(name_of(variant));
        if (M < S)
            throw invalid_argument(s.name + ": Merak requires at least as many micro-batches as stages (M = " +
                                   std::to_string(M) + " < S = " + std::to_string(S) + ")");
        if (variant == merak_variant::shifted_critical_path && M < 4)
            throw invalid_argument(s.name + ": the shifted critical path requires M >= 4 micro-batches (M = " +
                                   std::to_string(M) + ")");
        s.placement = stage_placement::linear(S);
        s.orders.resize(S);
        for (std::size_t d = 0; d < S; ++d) {
            const bool ckpt = checkpoints(S, d, sc.ratio(d));
            auto& o = s.orders[d];
            o.reserve(3 * M);
            for (op x : base_order(S, M, d)) {
                if (ckpt && x.kind == op_kind::F) x.kind = op_kind::F_checkpoint;
                if (ckpt && x.kind == op_kind::B && explicit_recompute(S, M, d, x.microbatch))
                    o.push_back({op_kind::R, x.microbatch, x.stage});
                o.push_back(x);
            }
        }
        return s;
    }
};

}  // namespace pipeplan::schedule
