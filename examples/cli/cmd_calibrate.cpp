// `pipeplan calibrate`: fits the analytic model's efficiency factors to a real profile and
// reports the relative error before and after (the table in docs/cost-models.md).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/calibrate.hpp"
#include "pipeplan/cost/profile.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan::cli {
namespace {

struct calibrate_options {
    std::string profiles;
    std::string model;
    std::string preset;
    std::string hardware = "a100-40gb";
    int tp = 0;  // 0: every tp of the profile (when --tp is not given)
    bool tp_given = false;
    std::string recompute;  // empty: every mode
    bool json = false;
};

/// Every profiled configuration of the profile (the union over its grids) for the selected tp
/// degrees and recomputation modes, as analytic-compatible queries (an independent axis is
/// reported as 0; the LM head of an encoder-decoder model gets seqlen = decoder length).
std::vector<layer_query> profiled_points(const profile_cost_model& p, const std::vector<int>& tps,
                                         const std::vector<recompute_mode>& modes) {
    std::set<std::tuple<int, int, int, int, int, int>> seen;
    std::vector<layer_query> out;
    for (int tp : tps)
        for (recompute_mode r : modes)
            for (component c : all_components)
                for (cost_metric m : all_cost_metrics) {
                    const profile_grid* g = p.grid(tp, r, c, m);
                    if (!g) continue;
                    for (std::size_t i = 0; i < g->size(0); ++i)
                        for (std::size_t j = 0; j < g->size(1); ++j)
                            for (std::size_t l = 0; l < g->size(2); ++l) {
                                if (!g->at_index(i, j, l)) continue;
                                layer_query q;
                                q.comp = c;
                                q.tp = tp;
                                q.recompute = r;
                                q.mbs = static_cast<int>(g->axis_value(0, i));
                                q.seqlen_tokens = static_cast<int>(g->axis_value(1, j));
                                q.dec_seqlen_tokens = static_cast<int>(g->axis_value(2, l));
                                if (q.seqlen_tokens < 1) q.seqlen_tokens = q.dec_seqlen_tokens;
                                if (q.mbs < 1 || q.seqlen_tokens < 1) continue;
                                const auto key = std::tuple{static_cast<int>(c), tp, static_cast<int>(r), q.mbs,
                                                            q.seqlen_tokens, q.dec_seqlen_tokens};
                                if (seen.insert(key).second) out.push_back(q);
                            }
                }
    return out;
}

std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

nlohmann::json summary_json(const error_summary& s) {
    return {{"points", s.points}, {"median", s.median}, {"p90", s.p90}, {"max", s.max}};
}
nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

void run_calibrate(const calibrate_options& o) {
    if (o.tp_given && o.tp < 1) throw invalid_argument("--tp must be >= 1 (got " + std::to_string(o.tp) + ")");
    const analytic_cost_model initial = make_analytic_model(o.preset, o.hardware);  // names checked first
    const profile_cost_model reference = profile_cost_model::load(o.profiles, o.model, interpolation_mode::linear);
    if (reference.is_encoder_decoder() != initial.is_encoder_decoder())
        throw invalid_argument("profile '" + o.model + "' and preset '" + o.preset +
                               "' disagree on the architecture (encoder-decoder vs decoder-only)");
    std::vector<int> tps = reference.tp_degrees();
    if (o.tp_given) {
        if (std::find(tps.begin(), tps.end(), o.tp) == tps.end()) {
            std::string have;
            for (int t : tps) have += (have.empty() ? "" : ", ") + std::to_string(t);
            throw invalid_argument("--tp " + std::to_string(o.tp) + " is not in profile '" + o.model +
                                   "' (profiled: " + have + ")");
        }
        tps = {o.tp};
    }
    std::vector<recompute_mode> modes(all_recompute_modes.begin(), all_recompute_modes.end());
    if (!o.recompute.empty()) modes = {parse_recompute(o.recompute)};

    const auto points = profiled_points(reference, tps, modes);
    const calibration_result r = calibrate(initial, reference, points);
    const calibration_report& rep = r.report;

    std::string tp_list, mode_list;
    for (int t : tps) tp_list += (tp_list.empty() ? "" : ",") + std::to_string(t);
    for (auto m : modes) mode_list += (mode_list.empty() ? "" : ",") + std::string(to_string(m));

    if (o.json) {
        nlohmann::json j;
        j["profile"] = o.model;
        j["preset"] = o.preset;
        j["hardware"] = o.hardware;
        j["tp"] = tps;
        std::vector<std::string> mode_names;
        for (auto m : modes) mode_names.emplace_back(to_string(m));
        j["recompute"] = mode_names;
        j["query_points"] = points.size();
        j["skipped_values"] = rep.skipped_values;
        j["time"] = {{"before", summary_json(rep.time_before)}, {"after", summary_json(rep.time_after)}};
        j["memory"] = {{"before", summary_json(rep.memory_before)}, {"after", summary_json(rep.memory_after)}};
        for (const auto& g : rep.groups)
            j["groups"].push_back({{"component", to_string(g.comp)},
                                   {"metric", to_string(g.metric)},
                                   {"before", summary_json(g.before)},
                                   {"after", summary_json(g.after)}});
        for (const auto& f : rep.time_fits)
            j["time_factors"].push_back({{"component", to_string(f.comp)},
                                         {"phase", to_string(f.phase)},
                                         {"points", f.points},
                                         {"compute_efficiency", number_or_null(f.factors.compute_efficiency)},
                                         {"memory_efficiency", number_or_null(f.factors.memory_efficiency)},
                                         {"link_efficiency", number_or_null(f.factors.link_efficiency)},
                                         {"overhead_ms_per_kernel", f.factors.overhead_ms_per_kernel}});
        for (const auto& f : rep.memory_fits)
            j["memory_factors"].push_back({{"component", to_string(f.comp)},
                                           {"recompute", to_string(f.recompute)},
                                           {"points", f.points},
                                           {"stored_scale", f.factors.stored_scale},
                                           {"peak_stored_scale", f.factors.peak_stored_scale},
                                           {"peak_working_scale", f.factors.peak_working_scale}});
        fmt::print("{}\n", j.dump(2));
        return;
    }

    fmt::print("calibrating analytic:{} ({}) to profile {} (tp {}; recompute {}; {} profiled points)\n", o.preset,
               o.hardware, o.model, tp_list, mode_list, points.size());
    fmt::print("\nrelative error |analytic - profile| / profile\n");
    fmt::print("{:<30} {:>7} {:>9} {:>9} | {:>9} {:>9}\n", "", "values", "before:", "", "after:", "");
    fmt::print("{:<30} {:>7} {:>9} {:>9} | {:>9} {:>9}\n", "", "", "median", "p90", "median", "p90");
    const auto row = [](const std::string& name, const error_summary& b, const error_summary& a) {
        fmt::print("{:<30} {:>7} {:>9} {:>9} | {:>9} {:>9}\n", name, b.points, pct(b.median), pct(b.p90),
                   pct(a.median), pct(a.p90));
    };
    row("time (forward + backward)", rep.time_before, rep.time_after);
    row("memory (stored + peak)", rep.memory_before, rep.memory_after);
    for (const auto& g : rep.groups)
        row(fmt::format("  {} {}", to_string(g.comp), to_string(g.metric)), g.before, g.after);
    if (rep.skipped_values > 0)
        fmt::print("({} values skipped: the profile has none there, e.g. no activation memory of the LM head)\n",
                   rep.skipped_values);

    fmt::print("\nfitted time factors (time = max(kernels*overhead, "
               "compute/e_compute + memory/e_memory + link/e_link)):\n");
    fmt::print("  {:<12} {:<9} {:>7} {:>10} {:>9} {:>7} {:>12}\n", "component", "phase", "values", "e_compute",
               "e_memory", "e_link", "overhead_ms");
    for (const auto& f : rep.time_fits)
        fmt::print("  {:<12} {:<9} {:>7} {:>10.3f} {:>9.3f} {:>7.3f} {:>12.4f}\n", to_string(f.comp),
                   to_string(f.phase), f.points, f.factors.compute_efficiency, f.factors.memory_efficiency,
                   f.factors.link_efficiency, f.factors.overhead_ms_per_kernel);
    fmt::print("fitted memory factors (stored = k*stored formula; peak = p1*stored formula + p2*working):\n");
    fmt::print("  {:<12} {:<9} {:>7} {:>10} {:>9} {:>7}\n", "component", "recompute", "values", "k", "p1", "p2");
    for (const auto& f : rep.memory_fits)
        fmt::print("  {:<12} {:<9} {:>7} {:>10.3f} {:>9.3f} {:>7.3f}\n", to_string(f.comp), to_string(f.recompute),
                   f.points, f.factors.stored_scale, f.factors.peak_stored_scale, f.factors.peak_working_scale);
}

}  // namespace

void register_calibrate(CLI::App& app) {
    auto opts = std::make_shared<calibrate_options>();
    CLI::App* cmd = app.add_subcommand(
        "calibrate",
        "Fit the analytic model's efficiency factors to a real profile by least squares and print the "
        "relative error before and after (median, p90) and the fitted factors.");
    cmd->add_option("--profiles", opts->profiles, "Folder of profile CSVs (e.g. ../shared/data/cost_models)")
        ->required();
    cmd->add_option("--model", opts->model, "Profiled model (file prefix, e.g. gpt_6.7b, t5_11b)")->required();
    cmd->add_option("--preset", opts->preset,
                    "Analytic model preset (" + transformer_preset_names() + ")")
        ->required();
    cmd->add_option("--hardware", opts->hardware, "Hardware preset (" + hardware_preset_names() + ")")
        ->capture_default_str();
    CLI::Option* tp = cmd->add_option("--tp", opts->tp, "Fit on this tensor-parallel degree only (default: all profiled)");
    cmd->add_option("--recompute", opts->recompute,
                    "Fit on this recomputation mode only: none, selective, full (default: all)");
    cmd->add_flag("--json", opts->json, "Print one JSON object instead of tables");
    cmd->callback([opts, tp] {
        opts->tp_given = tp->count() > 0;
        run_calibrate(*opts);
    });
}

}  // namespace pipeplan::cli
