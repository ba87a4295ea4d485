// `--layers L0,L1,...` (non-uniform layers per chunk, e.g. from `pipeplan shard`), shared by
// `pipeplan split` and `pipeplan plan`: the checks that name the flags, and the pipeline
// configuration it gives. The chunk layout itself is batching::layout_from_layer_counts.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/core/error.hpp"

namespace pipeplan::cli {

/// Sets `cfg.stages` (= the list's length / `cfg.virtual_chunks`) and `cfg.layers_per_stage`
/// (the largest entry, only a bound: the layout decides) for `--layers`. Throws
/// invalid_argument naming the flag when the list's length is not a multiple of `--chunks`, or
/// when the accounting is not `pipeplan` (DynaPipe's assumes uniform stages). The caller sets
/// `cfg.chunks = batching::layout_from_layer_counts(layers, encoder_decoder)` once the model is
/// known.
inline void apply_layers_flag(batching::pipeline_config& cfg, const std::vector<int>& layers,
                              batching::accounting_mode accounting) {
    if (accounting != batching::accounting_mode::pipeplan)
        throw invalid_argument("--layers needs --accounting pipeplan (dynapipe's accounting assumes uniform stages)");
    const int chunks = cfg.virtual_chunks;
    if (layers.empty() || chunks < 1 || layers.size() % static_cast<std::size_t>(chunks) != 0)
        throw invalid_argument("--layers lists " + std::to_string(layers.size()) + " chunks, not a multiple of --chunks " +
                               std::to_string(chunks));
    cfg.stages = static_cast<int>(layers.size()) / chunks;
    cfg.layers_per_stage = *std::max_element(layers.begin(), layers.end());
}

}  // namespace pipeplan::cli
