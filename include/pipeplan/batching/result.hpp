// pipeplan/batching/result.hpp — the result every splitter (the exact split and the baselines) returns.
//
// The objective is the pipelined iteration time estimate
//     objective = (S − 1) · t_max / C + Σ t / dp
// (pipeline fill and drain plus the work per data-parallel rank), with t_max the largest `t`
// of the returned micro-batches.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/sample.hpp"
#include "pipeplan/batching/stage_cost.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan::batching {

/// Which stored-activation limit a split satisfies.
enum class memory_limit_kind : std::uint8_t {
    preferred = 0,  ///< available / S (or the caller's fraction of available)
    available = 1,  ///< device memory − model states
};
[[nodiscard]] constexpr auto enum_names(memory_limit_kind) noexcept {
    return name_table<memory_limit_kind, 2>{
        "memory limit", {{{memory_limit_kind::preferred, "preferred"}, {memory_limit_kind::available, "available"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(memory_limit_kind k) noexcept { return name_of(k); }

/// (S − 1) · t_max / C + Σ t / dp, in ms.
[[nodiscard]] constexpr double pipeline_objective_ms(int stages, int virtual_chunks, int dp, double tmax_ms,
                                                     double sum_ms) noexcept {
    return (stages - 1) * tmax_ms / virtual_chunks + sum_ms / dp;
}

/// One micro-batch of a split.
struct microbatch_record {
    microbatch_shape shape;  ///< padded shape (mbs = rows when packed)
    microbatch_cost cost;    ///< t, stored, peak under the result's recomputation mode
    /// Packed rows (sample ids per row, each row ≤ shape.seqlen_tokens including separators);
    /// empty when every sample has its own row.
    std::vector<std::vector<int>> rows;
};

/// A split of one global batch into micro-batches.
struct split_result {
    std::string method;  ///< "dp", "fixed", "fixed-sorted", "tokens", "packing"
    accounting_mode accounting = accounting_mode::pipeplan;
    /// Sample ids (0-based, into the caller's batch) of each micro-batch, in execution order.
    std::vector<std::vector<int>> microbatches;
    std::vector<microbatch_record> per_microbatch;  ///< parallel to `microbatches`
    double objective_ms = 0;  ///< (S − 1) · tmax_ms / C + sum_ms / dp
    double tmax_ms = 0;       ///< the largest t of the micro-batches
    double sum_ms = 0;        ///< Σ t
    recompute_mode recompute = recompute_mode::none;  ///< the recomputation mode used
    memory_limit_kind limit = memory_limit_kind::preferred;  ///< the stored limit satisfied
    double memory_limit_mb = 0;  ///< that stored-activation limit (MB): every stored_mb ≤ it
    double available_mb = 0;     ///< device memory − model states (MB): every peak_mb ≤ it
    double model_state_mb = 0;   ///< model states of the most loaded device (MB)
    int stages = 1;              ///< S
    int virtual_chunks = 1;      ///< C
    int dp = 1;                  ///< data-parallel degree used in the objective
    /// Micro-batch indices per data-parallel rank (in order), when balanced; else empty.
    std::vector<std::vector<int>> dp_groups;
    std::vector<double> dp_group_ms;  ///< Σ t of each rank's micro-batches
};

}  // namespace pipeplan::batching
