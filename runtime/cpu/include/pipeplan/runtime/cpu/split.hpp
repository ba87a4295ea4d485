// pipeplan/runtime/cpu/split.hpp — splitting a real batch into micro-batches for the tiny model.
//
// The tiny model gets a cost model of its own (tiny_cost_model, a pipeplan::cost_model): per
// layer and micro-batch a fixed launch overhead plus time proportional to the padded tokens
// times the layer's multiply-adds, activations of one hidden-size double tensor per stored
// intermediate. With it the batching tier's exact split (batching::exact_split) or the fixed-size
// baseline (batching::split_fixed_mbs, dataset order) splits a batch of samples; sequence
// lengths are input + target tokens, truncated at max_seqlen_tokens, never rounded (the tiny
// model pads each micro-batch to its longest sample). With dp > 1 the micro-batches are
// balanced over the replicas (batching::balance_result).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/batching/baselines.hpp"
#include "pipeplan/batching/dp_balance.hpp"
#include "pipeplan/batching/exact_split.hpp"
#include "pipeplan/runtime/cpu/tiny_model.hpp"

namespace pipeplan::runtime::cpu {

/// Sample ids (indices into the batch) of each micro-batch: [replica][micro-batch] → ids.
using replica_split = std::vector<std::vector<std::vector<std::uint32_t>>>;

/// The tiny model as a pipeplan cost model (see the file comment). Units: ms and MB.
struct tiny_cost_model {
    model_config model;
    double launch_ms = 0.05;        ///< fixed cost per layer and micro-batch
    double ms_per_mflop = 100.0;    ///< time per 10^6 multiply-adds (a slow CPU core, in double)

    [[nodiscard]] layer_cost evaluate(const layer_query& q) const {
        const double tokens = static_cast<double>(q.mbs) * static_cast<double>(q.seqlen_tokens);
        const double h = static_cast<double>(model.hidden), f = static_cast<double>(model.ffn);
        const double v = static_cast<double>(model.vocab);
        const bool head = q.comp == component::postprocess, embed = q.comp == component::embedding;
        const double madds = embed ? 0.0 : tokens * (head ? h * v : 2.0 * h * f);
        const double tensor_mb = tokens * h * sizeof(double) / 1e6;
        layer_cost c;
        c.forward_ms = launch_ms + madds * 1e-6 * ms_per_mflop;
        c.backward_ms = 2.0 * c.forward_ms.value();
        c.stored_mb = embed ? 0.0 : 4.0 * tensor_mb;
        c.peak_mb = embed ? tensor_mb : 4.0 * tensor_mb + tokens * f * sizeof(double) / 1e6;
        return c;
    }
    [[nodiscard]] estimate<double> parameter_mb(component comp, int /*tp*/, recompute_mode /*r*/) const {
        const double h = static_cast<double>(model.hidden), f = static_cast<double>(model.ffn);
        const double v = static_cast<double>(model.vocab);
        const double params = comp == component::embedding ? h * v : comp == component::postprocess ? h * v + v
                                                                                                  : 2 * h * f + f + 2 * h;
        return params * sizeof(double) / 1e6;
    }
    [[nodiscard]] bool is_encoder_decoder() const noexcept { return false; }
};
static_assert(cost_model<tiny_cost_model>);

/// How to split a batch for the tiny model.
struct tiny_split_options {
    std::size_t devices = 2;             ///< S
    std::size_t chunks = 1;              ///< virtual stages per device (interleaved)
    std::size_t dp = 1;                  ///< data-parallel replicas
    std::size_t mbs = 0;                 ///< 0: the exact split; else fixed micro-batches of mbs samples
    std::size_t max_seqlen_tokens = 0;   ///< truncation (0: none)
};

/// A batch split for the tiny model: every sample's length and each replica's micro-batches.
struct tiny_batch {
    std::vector<std::size_t> lengths_tokens;
    replica_split split;
};

/// The pipeline the tiny model of `c` runs on under `o` (S, C, dp; blocks per virtual stage).
/// Throws when its blocks do not divide into the virtual stages.
[[nodiscard]] inline batching::pipeline_config tiny_pipeline(const model_config& c, const tiny_split_options& o) {
    if (o.devices == 0 || o.chunks == 0 || o.dp == 0) throw invalid_argument("split: devices, chunks and dp must be >= 1");
    const std::size_t stages = o.devices * o.chunks;
    if (c.blocks < stages || c.blocks % stages != 0)
        throw invalid_argument("split: the tiny model's " + std::to_string(c.blocks) + " blocks do not divide into " +
                               std::to_string(stages) + " virtual stages");
    batching::pipeline_config cfg;
    cfg.stages = static_cast<int>(o.devices);
    cfg.virtual_chunks = static_cast<int>(o.chunks);
    cfg.layers_per_stage = static_cast<int>(c.blocks / stages);
    cfg.dp = static_cast<int>(o.dp);
    cfg.device_memory_mb = 1e9;  // the CPU backend has no memory limit worth modelling
    return cfg;
}

/// The length rules of the tiny model: input + target tokens, truncated, never rounded.
[[nodiscard]] inline batching::split_options tiny_split_rules(const tiny_split_options& o) {
    batching::split_options so;
    so.lengths.round_to_tokens = 1;
    so.lengths.max_seqlen_tokens = static_cast<int>(o.max_seqlen_tokens);
    return so;
}

/// Every sample's length under the tiny model's rules (what its micro-batches pad to).
[[nodiscard]] inline std::vector<std::size_t> tiny_lengths(std::span<const batching::sample> batch, const tiny_split_options& o) {
    std::vector<std::size_t> out;
    for (const auto& sh : batching::padded_shapes(batch, tiny_split_rules(o).lengths, false))
        out.push_back(static_cast<std::size_t>(sh.seqlen_tokens));
    return out;
}

/// The fixed-size split of `batch` (o.mbs samples per micro-batch, dataset order) under the tiny
/// model's cost model.
[[nodiscard]] inline batching::split_result tiny_fixed_split(const model_config& c, std::span<const batching::sample> batch,
                                                             const tiny_split_options& o) {
    return batching::split_fixed_mbs(tiny_cost_model{c}, batch, tiny_pipeline(c, o), static_cast<int>(o.mbs),
                                     batching::fixed_order::dataset, tiny_split_rules(o));
}

[[nodiscard]] inline tiny_batch split_for_tiny(const model_config& c, std::span<const batching::sample> batch,
                                               const tiny_split_options& o) {
    const batching::pipeline_config cfg = tiny_pipeline(c, o);
    const batching::split_options so = tiny_split_rules(o);
    batching::split_result r = o.mbs == 0 ? batching::exact_split(tiny_cost_model{c}, batch, cfg, so) : tiny_fixed_split(c, batch, o);
    tiny_batch out;
    out.lengths_tokens = tiny_lengths(batch, o);
    std::vector<std::vector<int>> groups;
    if (o.dp > 1) {
        batching::balance_result(r, static_cast<int>(o.dp));
        groups = r.dp_groups;
    } else {
        groups.emplace_back();
        for (std::size_t k = 0; k < r.microbatches.size(); ++k) groups[0].push_back(static_cast<int>(k));
    }
    for (const auto& g : groups) {
        if (g.empty())
            throw invalid_argument("split: " + std::to_string(r.microbatches.size()) + " micro-batches leave a replica of " +
                                   std::to_string(o.dp) + " without work");
        auto& replica = out.split.emplace_back();
        for (int k : g) replica.emplace_back(r.microbatches[std::size_t(k)].begin(), r.microbatches[std::size_t(k)].end());
    }
    return out;
}

}  // namespace pipeplan::runtime::cpu
