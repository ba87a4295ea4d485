// pipeplan/cost/model_state.hpp — model-state memory of mixed-precision Adam under ZeRO.
//
// Mixed-precision Adam (Micikevicius et al. 2018; Rajbhandari et al. 2020, "ZeRO") keeps
// 16 bytes per parameter before any sharding:
//
//   fp16 weight 2 B | fp16 gradient 2 B | fp32 master weight 4 B, fp32 Adam m 4 B, fp32 Adam v 4 B
//   (weights_mb)    | (gradients_mb)    | (optimizer_mb: the "optimizer states", 12 B)
//
// ZeRO stage k shards part of it over the data-parallel degree `dp`:
//   stage 0: nothing sharded (plain data parallelism)            16 B / param
//   stage 1: optimizer states sharded (P_os)                      4 + 12/dp B / param
//   stage 2: optimizer states and gradients sharded (P_os+g)      2 + 14/dp B / param
//   stage 3: optimizer states, gradients and weights (P_os+g+p)   16/dp B / param
//
// Memory is in MB = 10^6 bytes, the unit of pipeplan's profiles (whose model-state files give
// the fp16 weight memory of one layer: 8x that figure is the unsharded 16-B total).
// Header-only, no dependencies beyond the standard library.
#pragma once

#include <cmath>
#include <string>

#include "pipeplan/core/error.hpp"

namespace pipeplan {

/// Bytes per parameter of each part of mixed-precision Adam's model state.
inline constexpr double fp16_weight_bytes_per_param = 2.0;
inline constexpr double fp16_gradient_bytes_per_param = 2.0;
/// fp32 master weight (4) + fp32 first moment m (4) + fp32 second moment v (4).
inline constexpr double optimizer_bytes_per_param = 12.0;
/// The unsharded total: 16 bytes per parameter.
inline constexpr double model_state_bytes_per_param =
    fp16_weight_bytes_per_param + fp16_gradient_bytes_per_param + optimizer_bytes_per_param;
/// One MB as pipeplan counts it (the profiles' unit).
inline constexpr double bytes_per_mb = 1.0e6;

/// Model-state memory per data-parallel rank, in MB, split by part. `total_mb` is the sum.
struct model_state_mb {
    double weights_mb = 0;     ///< fp16 weights (sharded from ZeRO stage 3)
    double gradients_mb = 0;   ///< fp16 gradients (sharded from ZeRO stage 2)
    double optimizer_mb = 0;   ///< fp32 master weights + Adam m + v (sharded from ZeRO stage 1)
    double total_mb = 0;       ///< weights_mb + gradients_mb + optimizer_mb
};

/// The highest ZeRO stage pipeplan models (ZeRO-3 / FSDP full sharding).
inline constexpr int max_zero_stage = 3;

/// Model state per rank from the fp16 parameter memory `fp16_param_mb` (MB, e.g. a layer's
/// figure from a profile's model-state file) under ZeRO stage `zero_stage` (0..3) and
/// data-parallel degree `dp` (>= 1). Throws invalid_argument for a stage outside 0..3, dp < 1,
/// or a negative / non-finite memory.
[[nodiscard]] inline model_state_mb model_state_from_fp16_mb(double fp16_param_mb, int zero_stage,
                                                             int dp) {
    if (zero_stage < 0 || zero_stage > max_zero_stage)
        throw invalid_argument("ZeRO stage " + std::to_string(zero_stage) +
                               " is invalid (valid: 0, 1, 2, 3)");
    if (dp < 1)
        throw invalid_argument("data-parallel degree " + std::to_string(dp) +
                               " is invalid (must be >= 1)");
    if (!std::isfinite(fp16_param_mb) || fp16_param_mb < 0)
        throw invalid_argument("fp16 parameter memory " + std::to_string(fp16_param_mb) +
                               " MB is invalid (must be finite and >= 0)");
    const double params_mb_per_byte = fp16_param_mb / fp16_weight_bytes_per_param;  // 1 B/param
    const double shards = static_cast<double>(dp);
    model_state_mb m;
    m.optimizer_mb = params_mb_per_byte * optimizer_bytes_per_param / (zero_stage >= 1 ? shards : 1.0);
    m.gradients_mb =
        params_mb_per_byte * fp16_gradient_bytes_per_param / (zero_stage >= 2 ? shards : 1.0);
    m.weights_mb = params_mb_per_byte * fp16_weight_bytes_per_param / (zero_stage >= 3 ? shards : 1.0);
    m.total_mb = m.weights_mb + m.gradients_mb + m.optimizer_mb;
    return m;
}

/// Model state per rank for `param_count` parameters (>= 0, finite); otherwise as
/// model_state_from_fp16_mb.
[[nodiscard]] inline model_state_mb model_state_from_params(double param_count, int zero_stage,
                                                            int dp) {
    if (!std::isfinite(param_count) || param_count < 0)
        throw invalid_argument("parameter count " + std::to_string(param_count) +
                               " is invalid (must be finite and >= 0)");
    return model_state_from_fp16_mb(param_count * fp16_weight_bytes_per_param / bytes_per_mb,
                                    zero_stage, dp);
}

}  // namespace pipeplan
