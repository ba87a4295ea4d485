// `pipeplan compare`: padding, packing, token-budget micro-batching, DynaPipe's method and
// pipeplan side by side on global batches drawn from length files, over a sweep of settings;
// a terminal table, --json, --csv and --html. Flag parsing and printing only: the work is
// compare/sweep.hpp, the outputs compare/report.hpp and compare/html.hpp.
#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "lengths_flag.hpp"
#include "model_spec.hpp"
#include "plan_inputs.hpp"
#include "pipeplan/compare/html.hpp"
#include "pipeplan/compare/report.hpp"
#include "pipeplan/compare/sweep.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/cost/leave_one_out.hpp"
#include "pipeplan/cost/transformer_shape.hpp"

namespace pipeplan::cli {
namespace {

struct compare_cli_options {
    plan_model_flags inputs;
    lengths_flags lengths;
    std::size_t iterations = 10;
    std::vector<std::string> sweep;
    int gpus = 0;
    bool json = false;
    std::string csv, html;
    std::vector<int> padding_mbs, packing_rows;
    std::vector<long long> token_budgets;
    std::vector<std::string> recompute;
};

/// --sweep KEY=V1,V2,... (max-seqlen, tokens) into the settings (their cross product).
std::vector<compare::setting> settings_of(const compare_cli_options& o) {
    std::vector<int> seqlens{o.inputs.max_seqlen > 0 ? o.inputs.max_seqlen : 2048};
    std::vector<long long> tokens{o.lengths.tokens};
    for (const auto& s : o.sweep) {
        const auto eq = s.find('=');
        const std::string key = s.substr(0, eq);
        if (eq == std::string::npos || (key != "max-seqlen" && key != "tokens"))
            throw invalid_argument("--sweep '" + s + "': expected max-seqlen=N,N,... or tokens=N,N,...");
        std::vector<long long> values;
        std::string rest = s.substr(eq + 1) + ",";
        for (std::size_t a = 0, b; (b = rest.find(',', a)) != std::string::npos; a = b + 1) {
            const std::string v = rest.substr(a, b - a);
            std::size_t used = 0;
            long long x = 0;
            try {
                x = std::stoll(v, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used == 0 || used != v.size() || x < 1 || (key == "max-seqlen" && x > max_seqlen_tokens))
                throw invalid_argument("--sweep " + key + ": '" + v + "' is not a valid value (an integer >= 1)");
            values.push_back(x);
        }
        if (key == "max-seqlen") seqlens.assign(values.begin(), values.end());
        else tokens = values;
    }
    std::vector<compare::setting> out;
    for (long long t : tokens)
        for (int m : seqlens) out.push_back({m, t});
    return out;
}

/// The model's total layer count (encoder + decoder): --layers N with --gpus, else the preset's.
int total_layers_of(const compare_cli_options& o) {
    if (o.inputs.layers.size() == 1) return o.inputs.layers.front();
    std::string preset = is_analytic_model(o.inputs.model) ? o.inputs.model.substr(analytic_prefix.size()) : o.inputs.model;
    std::replace(preset.begin(), preset.end(), '_', '-');
    try {
        const auto& sh = find_transformer_shape(preset);
        return sh.layers + sh.decoder_layers;
    } catch (const invalid_argument&) {
        throw invalid_argument("the layer count of model '" + o.inputs.model + "' is unknown: pass --layers N with --gpus");
    }
}

compare::compare_options compare_options_of(const compare_cli_options& o) {
    compare::compare_options c;
    plan_model_flags f = o.inputs;
    if (o.gpus > 0) {  // the shape is searched: any valid placeholder passes to_planner_options
        f.layers.clear();
        f.stages = 1;
        f.layers_per_stage = 1;
    }
    c.planner = to_planner_options(f, 0);
    c.settings = settings_of(o);
    c.iterations = o.iterations;
    c.draw = draw_options_of(o.lengths);
    c.gpus = o.gpus;
    if (o.gpus > 0) c.total_layers = total_layers_of(o);
    if (!o.padding_mbs.empty()) c.knobs.padding_mbs = o.padding_mbs;
    if (!o.packing_rows.empty()) c.knobs.packing_rows = o.packing_rows;
    if (!o.token_budgets.empty()) c.knobs.token_budgets = o.token_budgets;
    if (!o.recompute.empty()) {
        c.knobs.recompute.clear();
        for (const auto& r : o.recompute) c.knobs.recompute.push_back(parse_name<recompute_mode>(r));
    }
    return c;
}

/// Flags of the model block that the comparison fixes itself are errors, never ignored.
void reject_inapplicable_compare(const compare_cli_options& o, const std::set<std::string>& given) {
    reject_unless(given, "--schedule", false, "to compare (each method runs its own schedules)");
    reject_unless(given, "--chunks", false, "to compare (the baselines run 1F1B with one chunk per device)");
    reject_unless(given, "--accounting", false, "to compare (every method is priced with pipeplan's accounting)");
    if (o.gpus > 0) {
        reject_unless(given, "--stages", false, "with --gpus (the parallelism is searched)");
        reject_unless(given, "--layers-per-stage", false, "with --gpus (the parallelism is searched)");
        reject_unless(given, "--dp", false, "with --gpus (the parallelism is searched)");
        reject_unless(given, "--tp", false, "with --gpus (the parallelism is searched)");
        if (o.inputs.layers.size() > 1) throw invalid_argument("--layers with --gpus is the model's total layer count: give one number");
    } else {
        reject_unless(given, "--layers", false, "without --gpus (give --stages and --layers-per-stage)");
    }
    if (o.lengths.files.empty()) throw invalid_argument("compare needs --lengths FILE (the samples to draw global batches from)");
}

template <class Model>
void run_with(const Model& model, const compare_cli_options& o) {
    compare::compare_options c = compare_options_of(o);
    if constexpr (std::is_same_v<Model, profile_cost_model>) {
        if (o.gpus > 0) c.tp_degrees = model.tp_degrees();
        else require_profiled_tp(model, o.inputs.tp);
    }
    const batching::length_pool pool = pool_of(o.lengths);
    const compare::compare_report rep = compare::run_compare(model, pool, c);
    std::string description = "model " + o.inputs.model + ", " + fmt::format("{:.0f}", o.inputs.memory_mb) + " MB per device, " +
                              fmt::format("{:.0f} Gbit/s links", o.inputs.bandwidth_gbps) + ", lengths from ";
    for (const auto& f : o.lengths.files) description += f + " ";
    if (o.gpus == 0)
        description += fmt::format("(tp {}, pp {}, dp {}, {} layers per stage)", o.inputs.tp, o.inputs.stages, o.inputs.dp,
                                   o.inputs.layers_per_stage);
    if (!o.html.empty()) {
        compare::html_options h;
        h.title = "pipeplan compare: " + o.inputs.model;
        h.description = description;
        if constexpr (std::is_same_v<Model, profile_cost_model>) {
            const std::array<interpolation_scheme, 1> scheme{scheme_of(interpolation_mode::recommended)};
            const leave_one_out_errors loo = leave_one_out(model, scheme);
            h.cost_model_errors = {{"time (forward, backward)", loo.time[0]}, {"memory (stored, peak)", loo.memory[0]}};
        }
        write_output_file(o.html, compare::to_html(rep, h));
    }
    if (!o.csv.empty()) write_output_file(o.csv, compare::to_csv(rep));
    if (o.json) {
        std::puts(compare::to_json(rep).dump(2).c_str());
        return;
    }
    fmt::print("pipeplan compare: {}\n{}", description, compare::to_table(rep));
}

}  // namespace

void register_compare(CLI::App& app) {
    auto o = std::make_shared<compare_cli_options>();
    CLI::App* sub = app.add_subcommand(
        "compare",
        "Padding, packing, token-budget micro-batching, DynaPipe's method and pipeplan side by side on global batches drawn "
        "from length files: throughput, efficiency, memory, planning time and speedups per setting (docs/compare.md)");
    sub->add_option("--model", o->inputs.model, "Profiled model (gpt_6.7b, t5_11b) or analytic:<preset>")->required();
    add_plan_model_options(sub, o->inputs, true);
    add_lengths_options(sub, o->lengths, false);
    sub->add_option("--iterations", o->iterations, "Global batches per setting")->capture_default_str()->check(integer_in<std::size_t>(1, 100000));
    sub->add_option("--sweep", o->sweep,
                    "Settings: max-seqlen=N,N,... and/or tokens=N,N,... (cross product; default: --max-seqlen, 2048 "
                    "when not given, and --tokens)");
    sub->add_option("--gpus", o->gpus,
                    "Search tp x pp x dp = N for every method (tp from the profiles, pp dividing the layer count: the "
                    "model's, or --layers N)")
        ->check(integer_in(1, max_stages));
    sub->add_option("--padding-mbs", o->padding_mbs, "Padding: micro-batch sizes searched (default 1,2,4,8,16)")
        ->delimiter(',')
        ->check(integer_in(1, max_mbs));
    sub->add_option("--packing-rows", o->packing_rows, "Packing: rows per micro-batch searched (default 1,2,4,8)")
        ->delimiter(',')
        ->check(integer_in(1, max_mbs));
    sub->add_option("--token-budgets", o->token_budgets, "Tokens: budgets per micro-batch searched (default 4096,8192,16384,32768)")
        ->delimiter(',')
        ->check(integer_in(1LL, 1LL << 40));
    sub->add_option("--recompute", o->recompute, "Baselines: recomputation modes searched (default none,selective,full)")
        ->delimiter(',');
    sub->add_flag("--json", o->json, "Print only the report as one JSON object");
    sub->add_option("--csv", o->csv, "Write one CSV row per setting and method");
    sub->add_option("--html", o->html, "Write the HTML report (self-contained: inline SVG)");
    sub->callback([o, sub] {
        const auto given = given_flags(*sub);
        reject_inapplicable_compare(*o, given);
        with_plan_model(o->inputs, [&](const auto& model) { run_with(model, *o); });
    });
}

}  // namespace pipeplan::cli
