// pipeplan/cost/hardware.hpp — accelerator traits for the analytic (roofline) cost model.
//
// Pure data, no planning logic: the analytic model takes a `hardware_traits` value and the
// efficiencies it reaches on it separately (see analytic.hpp), so a new accelerator is one more
// preset here. Datasheet peak values (dense, no sparsity); MB = 10^6 bytes as everywhere in
// pipeplan.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"

namespace pipeplan {

/// Peak capabilities of one accelerator.
struct hardware_traits {
    std::string_view name;               ///< e.g. "a100-40gb" (not owned: must outlive the traits)
    double peak_tensor_flops = 0;        ///< dense fp16/bf16 tensor-core FLOP/s
    double memory_bandwidth_bytes_per_s = 0;  ///< device memory (HBM) bandwidth
    double device_memory_mb = 0;         ///< device memory capacity (MB = 10^6 B)
    double link_bandwidth_bytes_per_s = 0;    ///< intra-node GPU-GPU bandwidth per direction (NVLink)
};

/// Built-in presets (datasheet values):
/// - a100-40gb: NVIDIA A100 SXM4 40GB — 312 TFLOP/s fp16/bf16, 1555 GB/s HBM2, 40 GiB,
///   NVLink 3 600 GB/s bidirectional (300 GB/s per direction).
/// - h100-sxm: NVIDIA H100 SXM5 80GB — 989.4 TFLOP/s, 3.35 TB/s HBM3, 80 GiB, NVLink 4
///   900 GB/s bidirectional (450 per direction).
/// - h200: NVIDIA H200 SXM 141GB — 989.4 TFLOP/s, 4.8 TB/s HBM3e, 141 GB, NVLink 4.
inline constexpr std::array<hardware_traits, 3> hardware_presets{{
    {"a100-40gb", 312.0e12, 1555.0e9, 40.0 * 1073.741824, 300.0e9},
    {"h100-sxm", 989.4e12, 3350.0e9, 80.0 * 1073.741824, 450.0e9},
    {"h200", 989.4e12, 4800.0e9, 141.0e3, 450.0e9},
}};

/// The preset names, comma-separated (for messages and --help).
[[nodiscard]] inline std::string hardware_preset_names() {
    std::string s;
    for (const auto& h : hardware_presets) {
        if (!s.empty()) s.append(", ");
        s.append(h.name);
    }
    return s;
}

/// The preset called `name`; throws invalid_argument listing the valid names.
[[nodiscard]] inline const hardware_traits& find_hardware(std::string_view name) {
    for (const auto& h : hardware_presets)
        if (h.name == name) return h;
    std::string msg;
    msg.append("unknown hardware preset '").append(name).append("' (valid: ");
    msg.append(hardware_preset_names()).append(")");
    throw invalid_argument(msg);
}

}  // namespace pipeplan
