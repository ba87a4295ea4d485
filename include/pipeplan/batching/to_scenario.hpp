// pipeplan/batching/to_scenario.hpp — the bridge from a micro-batch split to a schedule
// scenario: per (micro-batch, pipeline chunk) forward and backward time, stored and peak
// activation memory, per-chunk model states, and activation message sizes.
//
// This is the one header that joins the batching and schedule tiers; include it only where
// both are wanted (e.g. "split a batch, then simulate the pipeline").
//
// Pricing follows the `pipeplan` accounting of stage_cost.hpp, chunk by chunk: a chunk's time is
// the sum over its layers (and embedding / LM head, where the model prices them) of the
// forward and of the backward; stored = sum of stored activations; peak = stored + the largest
// transient excess (peak − stored) of a component the chunk holds. Model state per chunk =
// its fp16 parameters × 16 B/param, ZeRO-sharded (cost/model_state.hpp). Scenario stage k is
// pipeline chunk k (device k mod S), as the schedule tier's interleaved placement expects.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "pipeplan/batching/errors.hpp"
#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/result.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/model_state.hpp"
#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::batching {

/// Options of make_scenario_from_split.
struct scenario_options {
    /// Hidden size of the model: the activation message between chunks of a micro-batch is
    /// mbs × seqlen × hidden × bytes_per_value (the encoder length for encoder-decoder models).
    /// 0 = messages of size 0 (communication is a pure dependency).
    int hidden_size = 0;
    double bytes_per_value = 2.0;  ///< fp16/bf16 activations
    schedule::network_model network{};
};

/// Builds the simulator's scenario for `split` (a result of split_dp or a baseline, made with
/// the same `model` and `config`). Throws pipeplan::invalid_argument when the split was made in
/// the `dynapipe` accounting mode (it has no per-chunk layout) or when a micro-batch cannot be
/// priced (e.g. beyond the profiled range), naming the micro-batch and the component.
template <cost_model Model>
[[nodiscard]] schedule::scenario make_scenario_from_split(const Model& model, const split_result& split,
                                                          const pipeline_config& config,
                                                          const scenario_options& options = {}) {
    const bool enc_dec = model.is_encoder_decoder();
    config.validate(enc_dec);
    if (split.accounting != accounting_mode::pipeplan)
        throw invalid_argument("make_scenario_from_split: the split uses '" + std::string(to_string(split.accounting)) +
                               "' accounting, which has no per-chunk layout; split with 'pipeplan' accounting");
    if (split.per_microbatch.empty())
        throw invalid_argument("make_scenario_from_split: the split has no micro-batches");
    const std::vector<stage_layout> chunks = config.layout(enc_dec);
    const std::size_t K = chunks.size(), M = split.per_microbatch.size();
    const recompute_mode r = split.recompute;

    std::vector<std::vector<double>> fwd(M, std::vector<double>(K)), bwd = fwd, stored = fwd, peak = fwd;
    std::vector<double> activation(M, 0.0);
    for (std::size_t j = 0; j < M; ++j) {
        const microbatch_shape& s = split.per_microbatch[j].shape;
        // Price each component once per micro-batch, then sum it into the chunks that hold it.
        struct priced {
            double f = 0, b = 0, st = 0, excess = 0;
            bool present = false;
        };
        std::array<priced, 4> p{};
        for (component c : all_components) {
            const auto ci = static_cast<std::size_t>(c);
            const bool needed = std::any_of(chunks.begin(), chunks.end(), [&](const stage_layout& l) {
                return (ci == 0 && l.encoder_layers > 0) || (ci == 1 && l.decoder_layers > 0) ||
                       (ci == 2 && l.embedding) || (ci == 3 && l.postprocess);
            });
            if (!needed) continue;
            const layer_cost lc = model.evaluate(
                layer_query{c, s.mbs, s.seqlen_tokens, s.dec_seqlen_tokens, config.tp, r});
            const bool layer = c == component::encoder || c == component::decoder;
            // A layer must be fully priced; the embedding / LM head only where the model has data.
            for (const estimate<double>* e : {&lc.forward_ms, &lc.backward_ms, &lc.stored_mb})
                if (!e->ok() && (layer || e->status() != estimate_status::unsupported))
                    throw invalid_argument("make_scenario_from_split: micro-batch " + std::to_string(j) + " (mbs " +
                                           std::to_string(s.mbs) + ", seqlen " + std::to_string(s.seqlen_tokens) +
                                           "): " + std::string(to_string(c)) + " is " +
                                           std::string(to_string(e->status())));
            p[ci].f = lc.forward_ms.value_or(0.0);
            p[ci].b = lc.backward_ms.value_or(0.0);
            p[ci].st = lc.stored_mb.value_or(0.0);
            p[ci].excess = lc.peak_mb.ok() ? std::max(0.0, lc.peak_mb.value() - p[ci].st) : 0.0;
            p[ci].present = true;
        }
        for (std::size_t k = 0; k < K; ++k) {
            const stage_layout& l = chunks[k];
            const std::array<int, 4> count{l.encoder_layers, l.decoder_layers, l.embedding ? 1 : 0,
                                           l.postprocess ? 1 : 0};
            double excess = 0;
            for (std::size_t c = 0; c < 4; ++c) {
                if (count[c] == 0 || !p[c].present) continue;
                fwd[j][k] += count[c] * p[c].f;
                bwd[j][k] += count[c] * p[c].b;
                stored[j][k] += count[c] * p[c].st;
                excess = std::max(excess, p[c].excess);
            }
            peak[j][k] = stored[j][k] + excess;
        }
        activation[j] = options.hidden_size > 0
                            ? static_cast<double>(s.mbs) * s.seqlen_tokens * options.hidden_size *
                                  options.bytes_per_value / 1e6
                            : 0.0;
    }

    // Model states per chunk: fp16 parameters of what it holds (an LM-head chunk without its own
    // embedding keeps a tied copy of it), × 16 B/param, ZeRO-sharded over dp.
    const auto param = [&](component c) { return model.parameter_mb(c, config.tp, r); };
    const estimate<double> emb = param(component::embedding);
    std::vector<double> model_state(K, 0.0);
    for (std::size_t k = 0; k < K; ++k) {
        const stage_layout& l = chunks[k];
        double fp16_mb = 0;
        if ((l.embedding || l.postprocess) && emb.ok()) fp16_mb += emb.value();
        for (auto [c, n] : {std::pair{component::encoder, l.encoder_layers}, std::pair{component::decoder, l.decoder_layers}}) {
            if (n == 0) continue;
            const estimate<double> e = param(c);
            if (!e.ok())
                throw invalid_argument("make_scenario_from_split: parameter memory of " + std::string(to_string(c)) +
                                       " at tp " + std::to_string(config.tp) + " is " + std::string(to_string(e.status())));
            fp16_mb += n * e.value();
        }
        model_state[k] = model_state_from_fp16_mb(fp16_mb, config.zero_stage, config.dp).total_mb;
    }
    return schedule::make_scenario(fwd, bwd, stored, peak, std::move(model_state),
                                   options.hidden_size > 0 ? std::move(activation) : std::vector<double>{},
                                   options.network);
}

}  // namespace pipeplan::batching
