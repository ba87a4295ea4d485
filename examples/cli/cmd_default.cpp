// `pipeplan` with no subcommand: a short report of the built-in default cost model, the
// analytic GPT-6.7B on an A100-40GB (no profile needed), then one iteration planned end to end
// (cmd_plan.cpp: split, candidate schedules, lowering, validation, the plan summary).
#include <algorithm>
#include <array>
#include <random>
#include <vector>
#include <string>

#include <fmt/core.h>

#include "commands.hpp"
#include "pipeplan/batching.hpp"
#include "pipeplan/bridge/split_to_scenario.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/model_state.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan::cli {

namespace {
/// "6.66B" / "412M": a parameter count for humans.
std::string human_count(double n) {
    if (n >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
    return fmt::format("{:.0f}M", n / 1e6);
}
}  // namespace

void run_default() {
    const analytic_cost_model model = make_analytic_model("gpt-6.7b", "a100-40gb");
    const transformer_shape& sh = model.shape();
    const hardware_traits& hw = model.hardware();
    constexpr int mbs = 1, tp = 1;
    constexpr recompute_mode rc = recompute_mode::none;

    fmt::print("pipeplan: built-in default cost model: analytic {} on {} (no profile given)\n", sh.name, hw.name);
    fmt::print("  model: {} layers, hidden {}, {} heads, FFN {}, vocab {}\n", sh.layers, sh.hidden, sh.heads,
               sh.ffn_hidden, sh.vocab);
    fmt::print("  hardware: {:.0f} TFLOP/s fp16, {:.0f} GB/s memory, {:.0f} MB device memory ({:.0f} GiB; MB = 10^6 bytes "
               "throughout)\n",
               hw.peak_tensor_flops / 1e12, hw.memory_bandwidth_bytes_per_s / 1e9, hw.device_memory_mb,
               hw.device_memory_mb * 1e6 / 1073741824.0);
    fmt::print("\nOne transformer layer, mbs {}, tp {}, recompute {} (times in ms, memory in MB):\n", mbs, tp,
               to_string(rc));
    fmt::print("  {:>8} {:>11} {:>12} {:>10} {:>10} {:>9}\n", "seqlen", "forward_ms", "backward_ms", "stored_mb",
               "peak_mb", "TFLOP/s");
    for (int s : std::array{512, 1024, 2048, 4096, 8192}) {
        const layer_query q{component::encoder, mbs, s, 0, tp, rc};
        const layer_cost c = model.evaluate(q);
        const double fwd = c.forward_ms.value(), bwd = c.backward_ms.value();
        const double flops = *model.flops(q, time_phase::forward) + *model.flops(q, time_phase::backward);
        fmt::print("  {:>8} {:>11.3f} {:>12.3f} {:>10.1f} {:>10.1f} {:>9.1f}\n", s, fwd, bwd,
                   c.stored_mb.value(), c.peak_mb.value(), flops / ((fwd + bwd) * 1e-3) / 1e12);
    }
    const layer_cost head = model.evaluate({component::postprocess, mbs, 2048, 0, tp, rc});
    fmt::print("  LM head + loss at seqlen 2048: forward {:.3f} ms, backward {:.3f} ms\n",
               head.forward_ms.value(), head.backward_ms.value());

    // Parameters and model state (tp 1, no pipeline): layers + embedding (+ LM head if untied).
    const double layer_params = *model.parameter_count(component::encoder, tp);
    const double emb_params = *model.parameter_count(component::embedding, tp);
    const double head_params =
        sh.tied_embeddings ? sh.norm_params() : *model.parameter_count(component::postprocess, tp);
    const double total_params = sh.layers * layer_params + emb_params + head_params;
    fmt::print("\nParameters: {} per layer ({:.1f} MB fp16), {} embedding, {} in total\n",
               human_count(layer_params), model.parameter_mb(component::encoder, tp, rc).value(),
               human_count(emb_params), human_count(total_params));
    constexpr int dp = 8;
    fmt::print("Model state of the whole model per GPU (mixed-precision Adam, 16 B/param), dp {}:\n", dp);
    fmt::print("  {:>7} {:>11} {:>13} {:>13} {:>10}\n", "ZeRO", "weights_mb", "gradients_mb", "optimizer_mb",
               "total_mb");
    for (int stage = 0; stage <= max_zero_stage; ++stage) {
        const model_state_mb m = model_state_from_params(total_params, stage, dp);
        fmt::print("  {:>7} {:>11.0f} {:>13.0f} {:>13.0f} {:>10.0f}\n", stage, m.weights_mb, m.gradients_mb,
                   m.optimizer_mb, m.total_mb);
    }
    print_default_plan();
    fmt::print("\nMore: pipeplan --help; pipeplan cost --model analytic:<preset> ...; "
               "pipeplan split ...; pipeplan simulate ...; pipeplan calibrate --profiles DIR ...\n");
}

}  // namespace pipeplan::cli
