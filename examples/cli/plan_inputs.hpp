// The model/cluster inputs of a planned iteration, shared by `pipeplan plan` and
// `pipeplan serve-plans`: one flag block (names, help, defaults) and one conversion into the
// plan tier's planner_options, so both commands accept the same flags with the same errors.
// Flag parsing and conversion only: the planning is plan/planner.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "model_spec.hpp"
#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/cost/transformer_shape.hpp"
#include "pipeplan/plan/planner.hpp"

namespace pipeplan::cli {

/// The values of the flag block (see add_plan_model_options).
struct plan_model_flags {
    std::string profiles, model;
    int tp = 1, stages = 0, layers_per_stage = 0, chunks = 1, dp = 1, zero_stage = 0, max_seqlen = 0, hidden_size = 0;
    double memory_mb = 0;
    std::string schedule = "auto", accounting = "pipeplan";
    double bandwidth_gbps = 100.0, latency_us = 0.0, intra_bandwidth_gbps = 0.0;
    unsigned devices_per_node = 1;
};

/// Registers the flag block on `sub` (all but --model, whose meaning differs per command).
/// With `required`, --stages, --layers-per-stage and --memory-mb are required by the parser;
/// otherwise the command calls require_planner_flags() on the path that plans a real model.
inline void add_plan_model_options(CLI::App* sub, plan_model_flags& f, bool required) {
    sub->add_option("--profiles", f.profiles, "Folder of profile CSVs (not needed for --model analytic:...)");
    sub->add_option("--tp", f.tp, "Tensor-parallel degree")->capture_default_str();
    sub->add_option("--stages", f.stages, "Pipeline stages S")->required();
    auto* lps = sub->add_option("--layers-per-stage", f.layers_per_stage, "Layers per stage (per chunk)");
    auto* mem = sub->add_option("--memory-mb", f.memory_mb, "Device memory (MB): the memory limit of the schedules");
    if (required) {
        lps->required();
        mem->required();
    }
    sub->add_option("--dp", f.dp, "Data-parallel replicas")->capture_default_str();
    sub->add_option("--chunks", f.chunks, "Virtual chunks per device C (> 1: interleaved candidates)")->capture_default_str();
    sub->add_option("--zero-stage", f.zero_stage, "ZeRO stage 0..3 (>= 2: gradients reduce-scattered)")->capture_default_str();
    sub->add_option("--schedule", f.schedule, "auto | adaptive | 1f1b | zb-h1 | interleaved | gpipe | merak-*")->capture_default_str();
    sub->add_option("--max-seqlen", f.max_seqlen, "Truncate sequences (encoder and decoder) at this length");
    sub->add_option("--accounting", f.accounting, "pipeplan | dynapipe")->capture_default_str();
    sub->add_option("--bandwidth-gbps", f.bandwidth_gbps, "Link bandwidth between pipeline neighbours (Gbit/s)")->capture_default_str();
    sub->add_option("--latency-us", f.latency_us, "Link latency per message (us)")->capture_default_str();
    sub->add_option("--devices-per-node", f.devices_per_node, "Devices per node (neighbours in a node use the intra-node link)")
        ->capture_default_str();
    sub->add_option("--intra-node-bandwidth-gbps", f.intra_bandwidth_gbps, "Intra-node bandwidth (0: as --bandwidth-gbps)")
        ->capture_default_str();
    sub->add_option("--hidden-size", f.hidden_size, "Hidden size for message sizes (default: the model preset's)");
}

/// Throws invalid_argument naming the first flag that planning model `f.model` needs and that
/// was not given (for commands that registered the block without `required`).
inline void require_planner_flags(const plan_model_flags& f) {
    const auto need = [&](bool given, const char* flag) {
        if (!given) throw invalid_argument(std::string(flag) + " is required to plan model '" + f.model + "'");
    };
    need(f.layers_per_stage != 0, "--layers-per-stage");
    need(f.memory_mb != 0, "--memory-mb");
}

/// The hidden size of the model: the analytic preset's, or the preset of the same name as the
/// profiled model (gpt_6.7b → gpt-6.7b), unless given.
inline int hidden_size_of(const std::string& model, int given) {
    if (given > 0) return given;
    std::string preset = is_analytic_model(model) ? model.substr(analytic_prefix.size()) : model;
    std::replace(preset.begin(), preset.end(), '_', '-');
    try {
        return find_transformer_shape(preset).hidden;
    } catch (const invalid_argument&) {
        throw invalid_argument("the hidden size of model '" + model +
                               "' is unknown (no preset of that name): pass --hidden-size N");
    }
}

/// The planner inputs of the flag block, for iteration `iteration`.
[[nodiscard]] inline plan::planner_options to_planner_options(const plan_model_flags& f, std::uint64_t iteration) {
    plan::planner_options po;
    po.config.stages = f.stages;
    po.config.layers_per_stage = f.layers_per_stage;
    po.config.virtual_chunks = f.chunks;
    po.config.tp = f.tp;
    po.config.dp = f.dp;
    po.config.zero_stage = f.zero_stage;
    po.config.device_memory_mb = f.memory_mb;
    po.split.accounting = batching::parse_accounting_mode(f.accounting);
    po.split.lengths.max_seqlen_tokens = f.max_seqlen;
    po.split.lengths.max_dec_seqlen_tokens = f.max_seqlen;
    po.cluster.bandwidth_gbps = f.bandwidth_gbps;
    po.cluster.latency_us = f.latency_us;
    po.cluster.devices_per_node = f.devices_per_node;
    po.cluster.intra_node_bandwidth_gbps = f.intra_bandwidth_gbps;
    po.hidden_size = hidden_size_of(f.model, f.hidden_size);
    po.iteration = iteration;
    if (f.schedule != "auto") po.schedule = parse_name<schedule::schedule_name>(f.schedule);
    return po;
}

/// Loads the cost model of the flag block (interpolated as its accounting requires) and calls
/// `fn(const auto& model)` with it (see with_cost_model).
template <class F>
decltype(auto) with_plan_model(const plan_model_flags& f, F&& fn) {
    const interpolation_mode mode = batching::parse_accounting_mode(f.accounting) == batching::accounting_mode::dynapipe
                                        ? interpolation_mode::dynapipe
                                        : interpolation_mode::recommended;
    return with_cost_model(f.profiles, f.model, mode, std::forward<F>(fn));
}

}  // namespace pipeplan::cli
