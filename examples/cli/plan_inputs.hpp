// The model/cluster inputs of a planned iteration, shared by `pipeplan plan` and
// `pipeplan serve-plans`: one flag block (names, help, defaults) and one conversion into the
// plan tier's planner_options, so both commands accept the same flags with the same errors.
// Flag parsing and conversion only: the planning is plan/planner.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "flags.hpp"
#include "layers_flag.hpp"
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
    std::vector<int> layers;  ///< --layers L0,L1,...: layers of each chunk (non-uniform), or empty
    int tp = 1, stages = 0, layers_per_stage = 0, chunks = 1, dp = 1, zero_stage = 0, max_seqlen = 0, hidden_size = 0;
    std::size_t max_pending_w = 0;  ///< --max-pending-w (the V schedules; 0 = W only fills waits)
    double overlap_factor = 1.0;    ///< --overlap-factor (dualpipe-v's overlapped pairs; < 1: a candidate)
    double memory_mb = 0;
    std::string schedule = "auto", accounting = "pipeplan", send_rule = "buffered";
    double bandwidth_gbps = 100.0, latency_us = 0.0, intra_bandwidth_gbps = 0.0;
    unsigned devices_per_node = 1;
};

/// Registers the flag block on `sub` (all but --model, whose meaning differs per command), with
/// the range checks of flags.hpp. With `required`, --memory-mb is required by the parser;
/// otherwise the command calls require_planner_flags() on the path that plans a real model.
/// The pipeline's shape is --stages S with --layers-per-stage L, or --layers (checked by
/// to_planner_options).
inline void add_plan_model_options(CLI::App* sub, plan_model_flags& f, bool required) {
    sub->add_option("--profiles", f.profiles, "Folder of profile CSVs (not needed for --model analytic:...)");
    sub->add_option("--tp", f.tp, "Tensor-parallel degree")->capture_default_str()->check(integer_in(1, max_tp));
    sub->add_option("--stages", f.stages, "Pipeline stages S (with --layers: optional, checked)")
        ->check(integer_in(1, max_stages));
    sub->add_option("--layers-per-stage", f.layers_per_stage, "Layers per stage (per chunk) (or --layers)")
        ->check(integer_in(1, max_layers));
    sub->add_option("--layers", f.layers,
                    "Layers of each chunk in pipeline order, e.g. 9,8,8,7 (non-uniform stages, as `split --layers`; "
                    "from `pipeplan shard --method time`); S = the count / --chunks; replaces --layers-per-stage")
        ->delimiter(',')
        ->check(integer_in(1, max_layers));
    auto* mem = sub->add_option("--memory-mb", f.memory_mb, "Device memory (MB): the memory limit of the schedules")
                    ->check(number_in(0, max_memory_mb, true));
    if (required) mem->required();
    sub->add_option("--dp", f.dp, "Data-parallel replicas")->capture_default_str()->check(integer_in(1, max_dp));
    sub->add_option("--chunks", f.chunks,
                    "Virtual chunks per device C (> 1: interleaved candidates; with --schedule auto, adaptive, "
                    "interleaved, or 2 with zb-v, v-half, v-min: --layers-per-stage counts the layers of a chunk)")
        ->capture_default_str()
        ->check(integer_in(1, max_chunks));
    sub->add_option("--zero-stage", f.zero_stage, "ZeRO stage 0..3 (>= 2: gradients reduce-scattered; needs --dp)")
        ->capture_default_str()
        ->check(integer_in(0, 3));
    sub->add_option("--schedule", f.schedule,
                    "auto | " + schedule::schedules().name_list(" | ") +
                        " (or a registered one; auto also tries zb-v, v-half and v-min, on two chunks per device placed as a V, "
                        "when a device's layer count is even)")
        ->capture_default_str();
    sub->add_option("--max-pending-w", f.max_pending_w,
                    "zb-v, v-half, v-min: weight gradients a device may leave pending before it runs one first (0 = W "
                    "only fills waits)")
        ->capture_default_str()
        ->check(integer_in<std::size_t>(0, 1u << 20));
    sub->add_option("--overlap-factor", f.overlap_factor,
                    "dualpipe-v: an overlapped forward/backward takes max(F, B) + factor * min(F, B); a measured "
                    "factor < 1 also makes dualpipe-v a candidate of --schedule auto (default 1: no overlap benefit)")
        ->capture_default_str()
        ->check(number_in(0, 1));
    sub->add_option("--max-seqlen", f.max_seqlen, "Truncate sequences (encoder and decoder) at this length")
        ->check(integer_in(1, max_seqlen_tokens));
    sub->add_option("--accounting", f.accounting, "pipeplan | dynapipe")->capture_default_str();
    sub->add_option("--send-rule", f.send_rule,
                    "Send semantics of the transport the plan is for, checked for deadlocks: " +
                        name_list<plan::send_rule>(" | ") + " (buffered: CPU threads, gloo; blocking or grouped: NCCL)")
        ->capture_default_str();
    sub->add_option("--bandwidth-gbps", f.bandwidth_gbps, "Link bandwidth between pipeline neighbours (Gbit/s)")
        ->capture_default_str()
        ->check(number_in(min_bandwidth_gbps, max_bandwidth_gbps));
    sub->add_option("--latency-us", f.latency_us, "Link latency per message (us)")
        ->capture_default_str()
        ->check(number_in(0, max_latency_us));
    sub->add_option("--devices-per-node", f.devices_per_node, "Devices per node (neighbours in a node use the intra-node link)")
        ->capture_default_str()
        ->check(integer_in(1U, static_cast<unsigned>(max_stages)));
    sub->add_option("--intra-node-bandwidth-gbps", f.intra_bandwidth_gbps,
                    "Intra-node bandwidth (0: as --bandwidth-gbps; needs --devices-per-node > 1)")
        ->capture_default_str()
        ->check(number_in(0, max_bandwidth_gbps));
    sub->add_option("--hidden-size", f.hidden_size, "Hidden size for message sizes (default: the model preset's)")
        ->check(integer_in(1, max_hidden_size));
}

/// Flags of the block that only make sense with some other flag are errors without it, never
/// ignored (`given`: the flags on the command line, flags.hpp given_flags).
inline void reject_inapplicable_model_flags(const plan_model_flags& f, const std::set<std::string>& given) {
    reject_unless(given, "--zero-stage", given.count("--dp") > 0, "without --dp (ZeRO shards model states over dp ranks)");
    reject_unless(given, "--intra-node-bandwidth-gbps", f.devices_per_node > 1,
                  "with one device per node (give --devices-per-node > 1)");
    const schedule::schedule_traits* row = f.schedule == "auto" ? nullptr : &schedule::schedules().at(f.schedule);
    const bool v = row != nullptr && schedule::places_v(*row);
    if (row != nullptr && !schedule::accepts_chunks(*row, static_cast<std::size_t>(std::max(f.chunks, 1))))
        throw invalid_argument("--chunks " + std::to_string(f.chunks) + " does not apply to --schedule " + f.schedule +
                               " (auto, adaptive and interleaved run several chunks per device; zb-v, v-half and v-min two)");
    reject_unless(given, "--max-pending-w", row == nullptr || v, "with --schedule " + f.schedule + " (it bounds the V schedules' pending W)");
    reject_unless(given, "--overlap-factor", row == nullptr || row->overlaps_pairs,
                  "with --schedule " + f.schedule + " (it prices dualpipe-v's overlapped pairs)");
}

/// Throws invalid_argument naming the first flag that planning model `f.model` needs and that
/// was not given (for commands that registered the block without `required`).
inline void require_planner_flags(const plan_model_flags& f) {
    if (f.memory_mb == 0) throw invalid_argument("--memory-mb is required to plan model '" + f.model + "'");
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

/// --stages / --layers-per-stage, or --layers L0,L1,... (then --stages, if given, must be the
/// list's length / --chunks).
inline void pipeline_shape_flags(batching::pipeline_config& cfg, const plan_model_flags& f, batching::accounting_mode accounting) {
    if (f.layers.empty()) {
        if (f.stages < 1 || f.layers_per_stage < 1)
            throw invalid_argument("give --stages S and --layers-per-stage L (>= 1), or --layers L0,L1,...");
        return;
    }
    if (f.layers_per_stage > 0) throw invalid_argument("--layers replaces --layers-per-stage: give one or the other");
    apply_layers_flag(cfg, f.layers, accounting);
    if (f.stages > 0 && f.stages != cfg.stages)
        throw invalid_argument("--layers lists " + std::to_string(f.layers.size()) + " chunks, but --stages " +
                               std::to_string(f.stages) + " x --chunks " + std::to_string(f.chunks) + " = " +
                               std::to_string(f.stages * f.chunks));
}

/// The planner inputs of the flag block, for iteration `iteration`.
[[nodiscard]] inline plan::planner_options to_planner_options(const plan_model_flags& f, std::uint64_t iteration) {
    plan::planner_options po;
    po.config.stages = f.stages;
    po.config.layers_per_stage = f.layers_per_stage;
    po.config.virtual_chunks = f.chunks;
    po.split.accounting = batching::parse_accounting_mode(f.accounting);
    pipeline_shape_flags(po.config, f, po.split.accounting);
    po.config.tp = f.tp;
    po.config.dp = f.dp;
    po.config.zero_stage = f.zero_stage;
    po.config.device_memory_mb = f.memory_mb;
    po.split.lengths.max_seqlen_tokens = f.max_seqlen;
    po.split.lengths.max_dec_seqlen_tokens = f.max_seqlen;
    po.cluster.bandwidth_gbps = f.bandwidth_gbps;
    po.cluster.latency_us = f.latency_us;
    po.cluster.devices_per_node = f.devices_per_node;
    po.cluster.intra_node_bandwidth_gbps = f.intra_bandwidth_gbps;
    po.hidden_size = hidden_size_of(f.model, f.hidden_size);
    po.iteration = iteration;
    if (f.schedule != "auto") po.schedule = schedule::schedule_id(schedule::schedules().at(f.schedule).name);
    po.max_pending_w = f.max_pending_w;
    po.overlap_factor = f.overlap_factor;
    po.sends = parse_name<plan::send_rule>(f.send_rule);
    return po;
}

/// With --layers, the chunk layout of `model` (layers of each chunk, as the model's encoder and
/// decoder split them) into `po`; to_planner_options set the rest.
template <class Model>
void apply_layer_layout(plan::planner_options& po, const plan_model_flags& f, const Model& model) {
    if (!f.layers.empty()) po.config.chunks = batching::layout_from_layer_counts(f.layers, model.is_encoder_decoder());
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
