// `pipeplan split`: splits one global batch (a CSV of samples) into micro-batches with the
// exact split or a baseline, prints a summary or (--json) the split result object (docs/formats.md).
#include <algorithm>
#include <optional>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "layers_flag.hpp"
#include "lengths_flag.hpp"
#include "model_spec.hpp"
#include "sample_lines.hpp"
#include "pipeplan/batching.hpp"
#include "pipeplan/batching/json.hpp"
#include "pipeplan/bridge/split_to_scenario.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/plan/export.hpp"
#include "pipeplan/schedule/scenario_json.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/profile_grid.hpp"

namespace pipeplan::cli {
namespace {

struct split_cli_options {
    std::string profiles;
    std::string model;
    int tp = 1;
    int stages = 0;
    int layers_per_stage = 0;
    std::vector<int> layers;  // --layers L0,L1,...: layers of each chunk (non-uniform)
    int chunks = 1;
    double memory_mb = 0;
    std::string batch;
    lengths_flags lengths;  // --lengths FILE --tokens N --seed S instead of --batch
    std::string method = "dp";
    int mbs = 0;
    long long tokens_per_mb = 0;
    std::string accounting = "pipeplan";
    int max_seqlen = 0;
    int dp = 0;  // 0: not given
    int zero_stage = 0;
    std::string interpolation = "default";
    std::string order = "auto";
    std::string fixed_order = "dataset";
    bool pack = false;
    int separator_tokens = 0;
    int pack_length = 0;
    double memory_fraction = 0;
    int round_to = 8;
    std::string scenario_out;
    int hidden_size = 0;
    bool json = false;
};

void print_summary(std::FILE* out, const batching::split_result& r) {
    fmt::print(out, "split of {} samples into {} micro-batches ({}, {} accounting)\n",
               [&] {
                   std::size_t n = 0;
                   for (const auto& m : r.microbatches) n += m.size();
                   return n;
               }(),
               r.microbatches.size(), r.method, to_string(r.accounting));
    fmt::print(out, "  objective {:.3f} ms = ({} - 1) x t_max {:.3f} ms / {} + sum {:.3f} ms / {}\n", r.objective_ms,
               r.stages, r.tmax_ms, r.virtual_chunks, r.sum_ms, r.dp);
    fmt::print(out, "  recompute {}, {} stored limit {:.1f} MB, available {:.1f} MB (model states {:.1f} MB)\n",
               to_string(r.recompute), to_string(r.limit), r.memory_limit_mb, r.available_mb, r.model_state_mb);
    fmt::print(out, "  {:>4} {:>5} {:>7} {:>7} {:>10} {:>10} {:>10}\n", "#", "mbs", "seqlen", "dec", "time_ms",
               "stored_mb", "peak_mb");
    for (std::size_t k = 0; k < r.per_microbatch.size(); ++k) {
        const auto& m = r.per_microbatch[k];
        fmt::print(out, "  {:>4} {:>5} {:>7} {:>7} {:>10.3f} {:>10.1f} {:>10.1f}{}\n", k, m.shape.mbs,
                   m.shape.seqlen_tokens, m.shape.dec_seqlen_tokens, m.cost.time_ms, m.cost.stored_mb,
                   m.cost.peak_mb, m.rows.empty() ? "" : "  (packed)");
    }
    if (!r.dp_groups.empty())
        for (std::size_t g = 0; g < r.dp_groups.size(); ++g)
            fmt::print(out, "  dp rank {}: {} micro-batches, {:.3f} ms\n", g, r.dp_groups[g].size(), r.dp_group_ms[g]);
}

/// Flags that only make sense with some other flag are errors without it, never ignored.
void reject_inapplicable(const split_cli_options& o, const std::set<std::string>& given) {
    const std::string method = "to --method " + o.method;
    reject_unless(given, "--mbs", o.method == "fixed" || o.method == "packing", method + " (only fixed, packing)");
    reject_unless(given, "--fixed-order", o.method == "fixed", method + " (only fixed)");
    reject_unless(given, "--tokens-per-mb", o.method == "tokens", method + " (only tokens)");
    reject_unless(given, "--order", o.method == "dp", method + " (only dp)");
    reject_unless(given, "--pack", o.method == "dp", method + " (only dp; --method packing packs always)");
    reject_unless(given, "--pack-length", o.method == "packing", method + " (only packing)");
    reject_unless(given, "--separator-tokens", o.method == "packing" || o.pack,
                  "without packing (--method packing, or --pack with --method dp)");
    reject_unless(given, "--zero-stage", given.count("--dp") > 0, "without --dp (ZeRO shards model states over dp ranks)");
    reject_unless(given, "--hidden-size", !o.scenario_out.empty(), "without --scenario-out");
    if (o.dp > 1 && !o.scenario_out.empty() && is_standard_output_path(o.scenario_out))
        throw invalid_argument("--scenario-out -: with --dp " + std::to_string(o.dp) +
                               " there is one scenario per replica; give a file name (FILE_r<k>.json are written)");
    reject_unless(given, "--interpolation", !is_analytic_model(o.model), "to the analytic model");
}

template <class Model>
void split_with(const Model& model, const std::vector<batching::sample>& batch, const batching::pipeline_config& cfg,
                const batching::split_options& opt, const split_cli_options& o) {
    const auto need = [&](bool given, const char* flag) {
        if (!given) throw invalid_argument("--method " + o.method + " needs " + flag);
    };
    batching::split_result r;
    if (o.method == "dp") {
        r = batching::exact_split(model, batch, cfg, opt);
    } else if (o.method == "fixed") {
        need(o.mbs > 0, "--mbs N (>= 1)");
        batching::fixed_order fo = batching::fixed_order::dataset;
        if (o.fixed_order == "sorted") fo = batching::fixed_order::sorted;
        else if (o.fixed_order != "dataset")
            throw invalid_argument("unknown --fixed-order '" + o.fixed_order + "' (valid: dataset, sorted)");
        r = batching::split_fixed_mbs(model, batch, cfg, o.mbs, fo, opt);
    } else if (o.method == "tokens") {
        need(o.tokens_per_mb > 0, "--tokens-per-mb N (>= 1)");
        r = batching::split_token_budget(model, batch, cfg, o.tokens_per_mb, opt);
    } else if (o.method == "packing") {
        need(o.mbs > 0, "--mbs N (>= 1)");
        r = batching::split_pack_fixed(model, batch, cfg, o.mbs, o.pack_length, o.separator_tokens, opt);
    } else {
        throw invalid_argument("unknown --method '" + o.method + "' (valid: dp, fixed, tokens, packing)");
    }
    if (o.dp > 0) batching::balance_result(r, o.dp);
    if (!o.scenario_out.empty()) {
        // One scenario per data-parallel replica (FILE_r<k>.json, as plan's --torch-csv): each
        // replica is its own pipeline over its own micro-batches.
        bridge::scenario_options so;
        so.hidden_size = o.hidden_size;
        const auto dp = static_cast<std::uint32_t>(std::max(1, o.dp));
        for (std::uint32_t k = 0; k < dp; ++k) {
            const nlohmann::json sj = bridge::make_scenario_from_split(model, batching::replica_split(r, k), cfg, so);
            write_output_file(plan::replica_file_name(o.scenario_out, k, dp), sj.dump(2) + "\n");
        }
    }
    // With --scenario-out - (standard output) the summary goes to standard error.
    std::FILE* out = !o.scenario_out.empty() && is_standard_output_path(o.scenario_out) ? stderr : stdout;
    if (o.json) {
        const nlohmann::json j = r;
        fmt::print(out, "{}\n", j.dump(2));
    } else {
        print_summary(out, r);
    }
}

void run_split(const split_cli_options& o, const std::set<std::string>& given) {
    reject_inapplicable(o, given);
    reject_lengths_flags_without_lengths(o.lengths, given);
    if (o.batch.empty() == o.lengths.files.empty())
        throw invalid_argument("give the batch as --batch FILE or --lengths FILE [--tokens N --seed S] (one of them)");
    const auto accounting = batching::parse_accounting_mode(o.accounting);
    const interpolation_mode mode = batching::profile_mode_for(accounting, parse_interpolation_mode(o.interpolation));
    // --batch: errors about a sample name its line; --lengths: the first batch drawn.
    const std::optional<csv_table> batch_table =
        o.lengths.files.empty() ? std::optional<csv_table>(csv_table::read(o.batch)) : std::nullopt;
    const std::vector<batching::sample> batch =
        batch_table ? batching::batch_from_table(*batch_table) : batch_from_flags(o.batch, o.lengths, 0);

    batching::pipeline_config cfg;
    cfg.stages = o.stages;
    cfg.layers_per_stage = o.layers_per_stage;
    cfg.virtual_chunks = o.chunks;
    if (!o.layers.empty()) {
        if (o.stages > 0 || o.layers_per_stage > 0)
            throw invalid_argument("--layers replaces --stages and --layers-per-stage: give one or the other");
        apply_layers_flag(cfg, o.layers, accounting);
    } else if (o.stages < 1 || o.layers_per_stage < 1) {
        throw invalid_argument("give --stages S and --layers-per-stage L (>= 1), or --layers L0,L1,...");
    }
    cfg.tp = o.tp;
    cfg.dp = o.dp > 0 ? o.dp : 1;
    cfg.zero_stage = o.zero_stage;
    cfg.device_memory_mb = o.memory_mb;

    batching::split_options opt;
    opt.accounting = accounting;
    opt.lengths.max_seqlen_tokens = o.max_seqlen;
    opt.lengths.max_dec_seqlen_tokens = o.max_seqlen;
    opt.lengths.round_to_tokens = o.round_to;
    opt.order = batching::parse_ordering_method(o.order);
    opt.packing.enabled = o.pack;
    opt.packing.separator_tokens = o.separator_tokens;
    opt.preferred_fraction = o.memory_fraction;

    with_cost_model(o.profiles, o.model, mode, [&](const auto& model) {
        if (!o.layers.empty()) cfg.chunks = batching::layout_from_layer_counts(o.layers, model.is_encoder_decoder());
        require_profiled_tp(model, o.tp);
        if (batch_table) naming_sample_lines(*batch_table, [&] { split_with(model, batch, cfg, opt, o); });
        else split_with(model, batch, cfg, opt, o);
    });
}

}  // namespace

void register_split(CLI::App& app) {
    auto o = std::make_shared<split_cli_options>();
    CLI::App* sub = app.add_subcommand(
        "split", "Split one global batch into micro-batches (exact split or a baseline); see docs/batching.md");
    sub->add_option("--profiles", o->profiles, "Folder of profile CSVs (not needed for --model analytic:...)");
    sub->add_option("--model", o->model, "Profiled model (gpt_6.7b, t5_11b) or analytic:<preset>")->required();
    sub->add_option("--tp", o->tp, "Tensor-parallel degree")->capture_default_str()->check(integer_in(1, max_tp));
    sub->add_option("--stages", o->stages, "Pipeline stages S (or --layers)")->check(integer_in(1, max_stages));
    sub->add_option("--layers-per-stage", o->layers_per_stage, "Layers per stage (per chunk) (or --layers)")
        ->check(integer_in(1, max_layers));
    sub->add_option("--layers", o->layers,
                    "Layers of each chunk in pipeline order, e.g. 9,8,8,7 (non-uniform stages, from "
                    "`pipeplan shard`); replaces --stages and --layers-per-stage")
        ->delimiter(',');
    sub->add_option("--chunks", o->chunks, "Virtual chunks per device C (interleaving)")
        ->capture_default_str()
        ->check(integer_in(1, max_chunks));
    sub->add_option("--memory-mb", o->memory_mb, "Device memory (MB)")->required()->check(number_in(0, max_memory_mb, true));
    sub->add_option("--batch", o->batch, "Batch CSV (input_tokens,target_tokens; one sample per row), or --lengths");
    add_lengths_options(sub, o->lengths, true);
    sub->add_option("--method", o->method, "dp | fixed | tokens | packing")->capture_default_str();
    sub->add_option("--mbs", o->mbs, "Micro-batch size of --method fixed / packing (rows)")->check(integer_in(1, max_mbs));
    sub->add_option("--fixed-order", o->fixed_order, "Order of --method fixed: dataset | sorted")->capture_default_str();
    sub->add_option("--tokens-per-mb", o->tokens_per_mb, "Padded-token budget of --method tokens")
        ->check(integer_in(1LL, 1LL << 40));
    sub->add_option("--accounting", o->accounting, "pipeplan | dynapipe")->capture_default_str();
    sub->add_option("--max-seqlen", o->max_seqlen, "Truncate sequences (encoder and decoder) at this length")
        ->check(integer_in(1, 1 << 30));
    sub->add_option("--dp", o->dp, "Data-parallel degree: divides the work term, balances micro-batches over ranks")
        ->check(integer_in(1, max_dp));
    sub->add_option("--zero-stage", o->zero_stage, "ZeRO stage 0..3 (model-state sharding over --dp; needs --dp)")
        ->capture_default_str()
        ->check(integer_in(0, 3));
    sub->add_option("--interpolation", o->interpolation,
                    "linear | dynapipe | default (the recommended); --accounting dynapipe always reads the "
                    "profiles as DynaPipe does (dynapipe: maximum of repeats, extrapolation below the grid)")
        ->capture_default_str();
    sub->add_option("--order", o->order, "Sample order of the exact split: auto | sorted | lexicographic | tour | dataset")
        ->capture_default_str();
    sub->add_flag("--pack", o->pack, "Exact split: pack short samples into rows where it lowers a micro-batch's cost");
    sub->add_option("--separator-tokens", o->separator_tokens, "Tokens between packed samples")
        ->capture_default_str()
        ->check(integer_in(0, 1 << 20));
    sub->add_option("--pack-length", o->pack_length, "Row length of --method packing (default: --max-seqlen or longest)")
        ->check(integer_in(1, 1 << 30));
    sub->add_option("--memory-fraction", o->memory_fraction, "Preferred stored limit as a fraction of available (default 1/S)")
        ->check(number_in(0, 1, true));
    sub->add_option("--round-to", o->round_to, "Round sequence lengths up to a multiple of this")
        ->capture_default_str()
        ->check(integer_in(1, 1 << 20));
    sub->add_option("--scenario-out", o->scenario_out,
                    "Also write the pipeline scenario of the split (JSON, for `pipeplan simulate --scenario`); "
                    "needs --accounting pipeplan; - = standard output (the summary then goes to standard error); "
                    "with --dp N > 1 one scenario per replica, FILE_r<k>.json (k = 0..N-1)");
    sub->add_option("--hidden-size", o->hidden_size,
                    "Hidden size, for the activation message sizes in --scenario-out (0: messages are free)")
        ->capture_default_str()
        ->check(integer_in(0, 1 << 20));
    sub->add_flag("--json", o->json, "Print the split result as one JSON object");
    sub->callback([o, sub] { run_split(*o, given_flags(*sub)); });
}

}  // namespace pipeplan::cli
