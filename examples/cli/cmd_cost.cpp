// `pipeplan cost`: one cost-model query (profile or analytic), as a table or JSON.
// `pipeplan profile-error`: the leave-one-out study of the profile interpolation schemes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "model_spec.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/error_summary.hpp"
#include "pipeplan/cost/leave_one_out.hpp"
#include "pipeplan/cost/profile.hpp"
#include "pipeplan/cost/profile_grid.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan::cli {
namespace {

struct cost_options {
    std::string profiles;
    std::string model;
    int tp = 1;
    std::string recompute = "none";
    std::string component = "encoder";
    int mbs = 1;
    int seqlen = 0;
    int dec_seqlen = 0;
    std::string interpolation = "default";
    bool json = false;
};

nlohmann::json to_json(const estimate<double>& e) {
    return e.ok() ? nlohmann::json(e.value_or(0.0)) : nlohmann::json(nullptr);
}

std::string cell(const estimate<double>& e) {
    return e.ok() ? fmt::format("{:.4f}", e.value_or(0.0)) : std::string(to_string(e.status()));
}

void run_cost(const cost_options& o, const std::set<std::string>& given) {
    reject_unless(given, "--interpolation", !is_analytic_model(o.model), "to the analytic model");
    const interpolation_mode mode = parse_interpolation_mode(o.interpolation);
    layer_query q;
    q.comp = parse_component(o.component);
    q.recompute = parse_recompute(o.recompute);
    q.tp = o.tp;
    q.mbs = o.mbs;
    q.seqlen_tokens = o.seqlen;
    q.dec_seqlen_tokens = o.dec_seqlen;
    with_cost_model(o.profiles, o.model, mode, [&](const auto& model) {
        require_profiled_tp(model, o.tp);
        reject_unless(given, "--dec-seqlen", model.is_encoder_decoder(),
                      "to decoder-only model '" + o.model + "' (it has no decoder)");
        if (model.is_encoder_decoder() && (q.comp == component::decoder || q.comp == component::postprocess) &&
            q.dec_seqlen_tokens < 1)
            throw invalid_argument("model '" + o.model + "' is an encoder-decoder model: component '" +
                                   o.component + "' needs --dec-seqlen");
        const layer_cost c = model.evaluate(q);
        const estimate<double> params = model.parameter_mb(q.comp, q.tp, q.recompute);
        if (o.json) {
            nlohmann::json j;
            j["model"] = o.model;
            j["component"] = to_string(q.comp);
            j["tp"] = q.tp;
            j["recompute"] = to_string(q.recompute);
            j["mbs"] = q.mbs;
            j["seqlen"] = q.seqlen_tokens;
            j["dec_seqlen"] = q.dec_seqlen_tokens;
            if (!is_analytic_model(o.model)) j["interpolation"] = to_string(mode);
            j["forward_ms"] = to_json(c.forward_ms);
            j["backward_ms"] = to_json(c.backward_ms);
            j["stored_mb"] = to_json(c.stored_mb);
            j["peak_mb"] = to_json(c.peak_mb);
            j["parameter_mb"] = to_json(params);
            j["status"] = {{"forward_ms", to_string(c.forward_ms.status())},
                           {"backward_ms", to_string(c.backward_ms.status())},
                           {"stored_mb", to_string(c.stored_mb.status())},
                           {"peak_mb", to_string(c.peak_mb.status())},
                           {"parameter_mb", to_string(params.status())}};
            std::puts(j.dump(2).c_str());
            return;
        }
        fmt::print("model {}  component {}  tp {}  recompute {}  mbs {}  seqlen {}", o.model, to_string(q.comp),
                   q.tp, to_string(q.recompute), q.mbs, q.seqlen_tokens);
        if (q.dec_seqlen_tokens > 0) fmt::print("  dec-seqlen {}", q.dec_seqlen_tokens);
        if (!is_analytic_model(o.model)) fmt::print("  interpolation {}", to_string(mode));
        fmt::print("\n");
        fmt::print("  {:<14} {:>22}\n", "forward_ms", cell(c.forward_ms));
        fmt::print("  {:<14} {:>22}\n", "backward_ms", cell(c.backward_ms));
        fmt::print("  {:<14} {:>22}\n", "stored_mb", cell(c.stored_mb));
        fmt::print("  {:<14} {:>22}\n", "peak_mb", cell(c.peak_mb));
        fmt::print("  {:<14} {:>22}\n", "parameter_mb", cell(params));
    });
}

// ---- leave-one-out study -------------------------------------------------------------------

struct error_options {
    std::string profiles;
    std::vector<std::string> models;
};

void run_profile_error(const error_options& o) {
    if (o.profiles.empty()) throw invalid_argument("--profiles DIR is required");
    std::vector<std::string> models = o.models;
    if (models.empty()) models = profile_cost_model::available_models(o.profiles);
    if (models.empty()) throw invalid_argument("no <model>_timing.csv files in '" + o.profiles + "'");
    // linear_extrapolating equals linear on interior points, so it is not listed separately.
    constexpr std::array<interpolation_scheme, 4> schemes{
        interpolation_scheme::linear, interpolation_scheme::log_log, interpolation_scheme::log_axes,
        interpolation_scheme::quadratic_shape};
    fmt::print("Leave-one-out relative error |predicted - measured| / measured of interior profiled points\n");
    fmt::print("(each point predicted from its neighbours on both sides of every axis; default = {})\n\n",
               to_string(scheme_of(interpolation_mode::recommended)));
    fmt::print("| model | quantity | points |");
    for (auto s : schemes) fmt::print(" {} median | {} p90 |", to_string(s), to_string(s));
    fmt::print("\n|---|---|---|");
    for (std::size_t i = 0; i < schemes.size(); ++i) fmt::print("---|---|");
    fmt::print("\n");
    for (const auto& name : models) {
        const profile_cost_model m = profile_cost_model::load(o.profiles, name, interpolation_mode::linear);
        const leave_one_out_errors loo = leave_one_out(m, schemes);
        const std::array<const std::vector<std::vector<double>>*, 2> errors{&loo.time, &loo.memory};
        for (std::size_t quantity = 0; quantity < 2; ++quantity) {
            fmt::print("| {} | {} | {} |", name, quantity == 0 ? "time" : "memory", (*errors[quantity])[0].size());
            for (std::size_t s = 0; s < schemes.size(); ++s) {
                const error_summary e = summarize_relative_errors((*errors[quantity])[s]);
                fmt::print(" {:.2f}% | {:.2f}% |", 100 * e.median, 100 * e.p90);
            }
            fmt::print("\n");
        }
    }
}

}  // namespace

void register_cost(CLI::App& app) {
    auto opts = std::make_shared<cost_options>();
    CLI::App* cost = app.add_subcommand(
        "cost",
        "Per-layer cost of one micro-batch: forward/backward time (ms), stored/peak activation\n"
        "memory (MB) and fp16 parameter memory (MB), from a profile (--profiles DIR --model NAME)\n"
        "or the analytic model (--model analytic:<preset>). Metrics outside the profiled range\n"
        "print 'out of profiled range' (null in --json).");
    cost->add_option("--profiles", opts->profiles,
                     "Folder with <model>_timing.csv, _activation.csv, _model_state.csv (required for "
                     "profiled models), e.g. ../shared/data/cost_models");
    cost->add_option("--model", opts->model,
                     "Profiled model (file prefix in --profiles, e.g. gpt_6.7b, t5_11b) or analytic:<preset>")
        ->required();
    cost->add_option("--tp", opts->tp, "Tensor-parallel degree")->capture_default_str()->check(integer_in(1, max_tp));
    cost->add_option("--recompute", opts->recompute, "Activation recomputation: none, selective, full")
        ->capture_default_str();
    cost->add_option("--component", opts->component, "encoder, decoder, postprocess or embedding")
        ->capture_default_str();
    cost->add_option("--mbs", opts->mbs, "Micro-batch size (sequences)")->required()->check(integer_in(1, max_mbs));
    cost->add_option("--seqlen", opts->seqlen,
                     "Sequence length in tokens (encoder length for encoder-decoder models)")
        ->required()
        ->check(integer_in(1, max_seqlen_tokens));
    cost->add_option("--dec-seqlen", opts->dec_seqlen,
                     "Decoder length in tokens (encoder-decoder models: decoder and postprocess)")
        ->capture_default_str()
        ->check(integer_in(0, max_seqlen_tokens));
    cost->add_option("--interpolation", opts->interpolation,
                     "Profile interpolation: linear (plain multilinear), dynapipe (DynaPipe's: maximum of repeated "
                     "measurements, multilinear, extrapolating below the grid, never-measured cells out of "
                     "range) or default (quadratic-shape: lowest leave-one-out error)")
        ->capture_default_str();
    cost->add_flag("--json", opts->json,
                   "Print one JSON object: forward_ms, backward_ms, stored_mb, peak_mb, parameter_mb "
                   "(null when not available) and status per metric");
    cost->callback([opts, cost] { run_cost(*opts, given_flags(*cost)); });

    auto eopts = std::make_shared<error_options>();
    CLI::App* err = app.add_subcommand(
        "profile-error",
        "Leave-one-out study of the profile interpolation schemes: each interior profiled point is\n"
        "predicted from its neighbours; prints median and p90 relative error per scheme and model\n"
        "(time and memory) as a Markdown table.");
    err->add_option("--profiles", eopts->profiles, "Folder with the profile CSVs")->required();
    err->add_option("--model", eopts->models, "Model(s) to study (default: every model in --profiles)");
    err->callback([eopts] { run_profile_error(*eopts); });
}

}  // namespace pipeplan::cli
