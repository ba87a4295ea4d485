// `pipeplan shard`: Merak-style sharding of a transformer's layers into pipeline stages.
//
//   pipeplan shard --model M [--profiles DIR] --stages S [--method parameters|layers|time|all]
//                  --mbs N --seqlen T [--dec-seqlen T] [--tp N] [--recompute R] [--json]
//
// Prices the embedding, every layer and the LM head for one micro-batch shape with the cost
// model, shards them by each method, and prints layers per stage (ready for
// `split --layers L0,L1,...`), stage times and the bottleneck; with `all` (the default) also how
// much the time-balanced sharding lowers the bottleneck against uniform layers and parameters.
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "model_spec.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/partition/transformer.hpp"

namespace pipeplan::cli {

namespace {

namespace pp = pipeplan::partition;

struct shard_args {
    std::string profiles, model, method = "all", recompute = "none";
    int stages = 0, mbs = 1, seqlen = 0, dec_seqlen = 0, tp = 1;
    bool json = false;
};

/// The preset of a model name: "gpt_6.7b" / "analytic:gpt-6.7b" -> "gpt-6.7b".
std::string preset_name(std::string name) {
    if (is_analytic_model(name)) name = name.substr(analytic_prefix.size());
    for (auto& c : name)
        if (c == '_') c = '-';
    return name;
}

std::string layer_list(const std::vector<int>& v) {
    std::string s;
    for (int n : v) s.append(s.empty() ? "" : ",").append(std::to_string(n));
    return s;
}

nlohmann::json to_json(const pp::shard_result& r) {
    return {{"method", std::string(pp::to_string(r.method))},
            {"layers", r.layers_per_stage},
            {"stage_time_ms", r.stage_time_ms},
            {"stage_parameter_bytes", r.stage_parameter_bytes},
            {"bottleneck_ms", r.bottleneck_ms()}};
}

void run_shard(const shard_args& a, const std::set<std::string>& given) {
    const transformer_shape& shape = find_transformer_shape(preset_name(a.model));
    reject_unless(given, "--dec-seqlen", shape.encoder_decoder, "to model '" + a.model + "' (not encoder-decoder)");
    layer_query q;
    q.mbs = a.mbs;
    q.seqlen_tokens = a.seqlen;
    q.dec_seqlen_tokens = a.dec_seqlen;
    q.tp = a.tp;
    q.recompute = parse_recompute(a.recompute);
    if (shape.encoder_decoder && q.dec_seqlen_tokens < 1)
        throw invalid_argument("model '" + a.model + "' is encoder-decoder: --dec-seqlen must be >= 1");
    const auto parts = with_cost_model(a.profiles, a.model, interpolation_mode::recommended,
                                       [&](const auto& m) { return pp::transformer_layers(m, shape, q); });
    std::vector<pp::shard_method> methods;
    if (a.method == "all") methods = {pp::shard_method::layers, pp::shard_method::parameters, pp::shard_method::time};
    else methods = {pp::parse_shard_method(a.method)};
    std::vector<pp::shard_result> results;
    for (auto m : methods) results.push_back(pp::shard_transformer(parts, a.stages, m));

    nlohmann::json j{{"model", a.model}, {"stages", a.stages}, {"layers", parts.layers()}, {"shardings", nlohmann::json::array()}};
    for (const auto& r : results) j["shardings"].push_back(to_json(r));
    double reduction_vs_layers = 0, reduction_vs_parameters = 0;
    if (results.size() == 3) {
        const double t = results[2].bottleneck_ms();
        reduction_vs_layers = 1.0 - t / results[0].bottleneck_ms();
        reduction_vs_parameters = 1.0 - t / results[1].bottleneck_ms();
        j["time_reduction_vs_layers"] = reduction_vs_layers;
        j["time_reduction_vs_parameters"] = reduction_vs_parameters;
    }
    if (a.json) {
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }
    std::printf("%s: %d layers on %d stages (mbs %d, seqlen %d%s)\n", a.model.c_str(), parts.layers(), a.stages, a.mbs,
                a.seqlen, shape.encoder_decoder ? (", dec " + std::to_string(a.dec_seqlen)).c_str() : "");
    for (const auto& r : results) {
        std::printf("  %-10s --layers %s  bottleneck %.3f ms  stages [", std::string(pp::to_string(r.method)).c_str(),
                    layer_list(r.layers_per_stage).c_str(), r.bottleneck_ms());
        for (std::size_t s = 0; s < r.stage_time_ms.size(); ++s) std::printf("%s%.2f", s ? " " : "", r.stage_time_ms[s]);
        std::printf("] ms\n");
    }
    if (results.size() == 3)
        std::printf("  time balancing lowers the bottleneck by %.1f %% vs uniform layers, %.1f %% vs parameters\n",
                    100 * reduction_vs_layers, 100 * reduction_vs_parameters);
}

}  // namespace

void register_shard(CLI::App& app) {
    auto a = std::make_shared<shard_args>();
    CLI::App* sub = app.add_subcommand("shard", "Shard a transformer's layers into pipeline stages (Merak-style)");
    sub->add_option("--profiles", a->profiles, "Folder of profile CSVs (not needed for --model analytic:...)");
    sub->add_option("--model", a->model, "Profiled model (gpt_6.7b, t5_11b) or analytic:<preset>")->required();
    sub->add_option("--stages", a->stages, "Pipeline stages S")->required()->check(integer_in(1, max_stages));
    sub->add_option("--method", a->method, "parameters | layers | time | all")->capture_default_str();
    sub->add_option("--mbs", a->mbs, "Micro-batch size (sequences)")->capture_default_str()->check(integer_in(1, max_mbs));
    sub->add_option("--seqlen", a->seqlen, "Sequence length (encoder length for T5)")
        ->required()
        ->check(integer_in(1, max_seqlen_tokens));
    sub->add_option("--dec-seqlen", a->dec_seqlen, "Decoder length (encoder-decoder models only)")
        ->check(integer_in(1, max_seqlen_tokens));
    sub->add_option("--tp", a->tp, "Tensor-parallel degree")->capture_default_str()->check(integer_in(1, max_tp));
    sub->add_option("--recompute", a->recompute, "none | selective | full")->capture_default_str();
    sub->add_flag("--json", a->json, "Print the result as JSON");
    sub->callback([a, sub] { run_shard(*a, given_flags(*sub)); });
}

}  // namespace pipeplan::cli
