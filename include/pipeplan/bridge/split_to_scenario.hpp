// pipeplan/bridge/split_to_scenario.hpp — the bridge from a micro-batch split (batching tier)
// to a schedule scenario (schedule tier): per (micro-batch, pipeline chunk) forward and backward
// time, stored and peak activation memory, per-chunk model states, activation message sizes,
// and the placement of the chunks on devices.
//
// The bridge prices nothing itself: every number comes from the one stage-cost accounting,
// batching::stage_cost_evaluator in its `pipeplan` mode, chunk by chunk (chunk_costs,
// chunk_model_state_mb). Scenario stage k is pipeline chunk k, on the device
// pipeline_config::device_of_chunk names (k mod S, or the V of v_shape); the scenario records that placement (`devices`, `placement`), so a
// simulation does not split the chunks a second time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/result.hpp"
#include "pipeplan/batching/stage_cost.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::bridge {

/// Options of make_scenario_from_split.
struct scenario_options {
    /// Hidden size of the model: the activation message between chunks of a micro-batch is
    /// mbs × seqlen × hidden × bytes_per_value (the encoder length for encoder-decoder models).
    /// 0 = messages of size 0 (communication is a pure dependency).
    int hidden_size = 0;
    double bytes_per_value = 2.0;  ///< fp16/bf16 activations
    schedule::network_model network{};
};

/// Builds the simulator's scenario for `split` (a result of exact_split or a baseline, made with
/// the same `model` and `config`). Throws pipeplan::invalid_argument when the split was made in
/// the `dynapipe` accounting mode (it has no per-chunk layout) or when a micro-batch cannot be
/// priced (e.g. beyond the profiled range), naming the micro-batch and the component.
template <cost_model Model>
[[nodiscard]] schedule::scenario make_scenario_from_split(const Model& model, const batching::split_result& split,
                                                          const batching::pipeline_config& config,
                                                          const scenario_options& options = {}) {
    if (split.accounting != batching::accounting_mode::pipeplan)
        throw invalid_argument("make_scenario_from_split: the split uses '" + std::string(to_string(split.accounting)) +
                               "' accounting, which has no per-chunk layout; split with 'pipeplan' accounting");
    if (split.per_microbatch.empty())
        throw invalid_argument("make_scenario_from_split: the split has no micro-batches");
    const batching::stage_cost_evaluator<Model> eval(model, config, batching::accounting_mode::pipeplan);
    const std::size_t K = eval.chunks(), M = split.per_microbatch.size();
    const recompute_mode r = split.recompute;

    std::vector<std::vector<double>> fwd(M, std::vector<double>(K)), bwd = fwd, stored = fwd, peak = fwd;
    std::vector<double> activation(M, 0.0);
    std::vector<batching::chunk_cost> costs;
    for (std::size_t j = 0; j < M; ++j) {
        const batching::microbatch_shape& s = split.per_microbatch[j].shape;
        component failed = component::encoder;
        if (const estimate_status st = eval.chunk_costs(s, r, costs, &failed); st != estimate_status::ok)
            throw invalid_argument("make_scenario_from_split: micro-batch " + std::to_string(j) + " (mbs " +
                                   std::to_string(s.mbs) + ", seqlen " + std::to_string(s.seqlen_tokens) +
                                   "): " + std::string(to_string(failed)) + " is " + std::string(to_string(st)));
        for (std::size_t k = 0; k < K; ++k) {
            fwd[j][k] = costs[k].forward_ms;
            bwd[j][k] = costs[k].backward_ms;
            stored[j][k] = costs[k].stored_mb;
            peak[j][k] = costs[k].peak_mb;
        }
        activation[j] = options.hidden_size > 0
                            ? static_cast<double>(s.mbs) * s.seqlen_tokens * options.hidden_size *
                                  options.bytes_per_value / 1e6
                            : 0.0;
    }

    std::vector<double> model_state(K, 0.0);
    for (std::size_t k = 0; k < K; ++k) {
        const estimate<double> e = eval.chunk_model_state_mb(k, r);
        if (!e.ok())
            throw invalid_argument("make_scenario_from_split: parameter memory of chunk " + std::to_string(k) +
                                   " at tp " + std::to_string(config.tp) + " is " + std::string(to_string(e.status())));
        model_state[k] = e.value();
    }
    schedule::scenario sc = schedule::make_scenario(fwd, bwd, stored, peak, std::move(model_state),
                                                    options.hidden_size > 0 ? std::move(activation) : std::vector<double>{},
                                                    options.network);
    sc.devices = static_cast<std::size_t>(config.stages);
    sc.placement.resize(K);
    for (std::size_t k = 0; k < K; ++k)
        sc.placement[k] = static_cast<std::uint32_t>(config.device_of_chunk(static_cast<int>(k)));
    return sc;
}

}  // namespace pipeplan::bridge
