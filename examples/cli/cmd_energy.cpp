// `pipeplan energy`: the iteration time–energy frontier of a schedule and its frequency plan.
//
//   pipeplan energy --scenario FILE.json --schedule NAME [--chunks C] [--checkpoint-ratio r]
//                   [--memory-limit-mb M]
//                   [--energy-profile FILE.csv | --gpu a100] [--idle-power-w W] [--step-ms S]
//                   [--exact-breakpoints] [--target-ms T] [--svg out.svg] [--trace out.json] [--json]
//
// Output files are rendered in memory first and written atomically.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/energy.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

namespace pipeplan::cli {

namespace {

namespace ps = pipeplan::schedule;
namespace pe = pipeplan::energy;

struct energy_args {
    std::string scenario_path;
    std::string schedule = "1f1b";
    std::size_t chunks = 0;
    double checkpoint_ratio = std::numeric_limits<double>::quiet_NaN();
    double memory_limit_mb = std::numeric_limits<double>::infinity();
    std::string profile_path;
    std::string gpu = "a100";
    double idle_power_w = std::numeric_limits<double>::quiet_NaN();
    double step_ms = 0.0;
    bool exact = false;
    double target_ms = std::numeric_limits<double>::quiet_NaN();
    std::string svg_path, trace_path;
    bool json = false;
};

pe::energy_profile load_profile(const energy_args& a) {
    if (!a.profile_path.empty()) return pe::read_energy_profile_csv(a.profile_path);
    return pe::gpu_profile(parse_name<pe::gpu_model>(a.gpu));
}

nlohmann::json point_json(double time_ms, double energy_j) {
    return {{"time_ms", time_ms}, {"energy_j", energy_j}};
}

/// Per device, in execution order: op label and clock.
nlohmann::json frequencies_json(const pe::energy_problem& p, const pe::frequency_choice& c) {
    nlohmann::json devs = nlohmann::json::array();
    for (const auto& dev : pe::frequency_plan(p, c)) {
        nlohmann::json ops = nlohmann::json::array();
        for (const auto& s : dev) ops.push_back({{"op", ps::op_label(*p.sched, s.o)}, {"mhz", s.frequency_mhz}});
        devs.push_back(std::move(ops));
    }
    return devs;
}

/// The `--json` object (docs/formats.md).
nlohmann::json result_json(const pe::energy_problem& p, const pe::energy_profile& profile, const pe::frontier_result& r,
                           const pe::chosen_point& chosen, bool targeted) {
    const auto& sched = *p.sched;
    const pe::frontier_point& fastest = r.frontier.front();
    nlohmann::json j;
    j["schedule"] = sched.name;
    j["devices"] = p.graph.devices();
    j["computations"] = p.size();
    j["profile"] = profile.source;
    j["idle_power_w"] = profile.idle_power_w;
    j["step_ms"] = r.step_ms;
    j["pd_steps"] = r.iterations;
    j["frontier"] = nlohmann::json::array();
    for (const auto& x : r.frontier) j["frontier"].push_back(point_json(x.time_ms, x.energy_j));
    j["min_time_ms"] = r.all_max.time_ms;
    j["energy_at_min_time_j"] = fastest.energy_j;
    j["energy_all_max_j"] = r.all_max.energy_j;
    j["intrinsic_saving_j"] = r.all_max.energy_j - fastest.energy_j;
    j["intrinsic_saving_fraction"] = r.all_max.energy_j > 0 ? 1.0 - fastest.energy_j / r.all_max.energy_j : 0.0;
    j["all_min_energy"] = point_json(r.all_min_energy.time_ms, r.all_min_energy.energy_j);
    nlohmann::json ch = point_json(chosen.point.time_ms, chosen.point.energy_j);
    ch["frequencies"] = frequencies_json(p, chosen.point.choice);
    if (targeted) {
        ch["target_ms"] = chosen.target_ms;
        ch["energy_at_target_j"] = chosen.energy_at_target_j;
        j["energy_all_max_at_target_j"] = chosen.all_max_at_target_j;
        j["saving_j"] = chosen.all_max_at_target_j - chosen.energy_at_target_j;
        j["saving_fraction"] = 1.0 - chosen.energy_at_target_j / chosen.all_max_at_target_j;
    }
    j["chosen"] = std::move(ch);
    return j;
}

/// The text summary.
void print_summary(const pe::energy_problem& p, const pe::energy_profile& profile, const pe::frontier_result& r,
                   const pe::chosen_point& chosen, bool targeted) {
    const auto& sched = *p.sched;
    const pe::frontier_point& fastest = r.frontier.front();
    std::printf("schedule %s on %zu devices, %zu computations, profile %s (idle %.1f W)\n", sched.name.c_str(),
                p.graph.devices(), p.size(), profile.source.c_str(), profile.idle_power_w);
    std::printf("frontier: %zu points from %.3f ms / %.3f J to %.3f ms / %.3f J (%zu steps of %.4f ms)\n",
                r.frontier.size(), r.frontier.front().time_ms, r.frontier.front().energy_j, r.frontier.back().time_ms,
                r.frontier.back().energy_j, r.iterations, r.step_ms);
    std::printf("minimum time %.3f ms: %.3f J versus %.3f J with every op at the top clock (intrinsic saving %.2f %%)\n",
                r.all_max.time_ms, fastest.energy_j, r.all_max.energy_j,
                100.0 * (1.0 - fastest.energy_j / r.all_max.energy_j));
    std::printf("all ops at minimum energy: %.3f ms, %.3f J\n", r.all_min_energy.time_ms, r.all_min_energy.energy_j);
    if (targeted)
        std::printf("target %.3f ms: plan of %.3f ms, %.3f J over the target versus %.3f J at the top clock (saving %.2f %%)\n",
                    chosen.target_ms, chosen.point.time_ms, chosen.energy_at_target_j, chosen.all_max_at_target_j,
                    100.0 * (1.0 - chosen.energy_at_target_j / chosen.all_max_at_target_j));
}

void run_energy(const energy_args& a, const std::set<std::string>& given) {
    const ps::schedule_traits& kind = ps::schedules().at(a.schedule);
    reject_unless(given, "--memory-limit-mb", kind.plans_under_memory_limit,
                  "to --schedule " + a.schedule + " (only adaptive, zb-h1 plan under a memory limit)");
    pe::energy_profile profile = load_profile(a);
    if (!std::isnan(a.idle_power_w)) profile.idle_power_w = a.idle_power_w;  // range-checked by the flag
    const ps::scenario base = ps::read_scenario_json(a.scenario_path);
    try {
        base.validate();
    } catch (const invalid_argument& e) {
        throw input_error(a.scenario_path, 0, "", e.what());
    }
    ps::named_schedule_options opt;
    opt.chunks = a.chunks;
    opt.memory_limit_mb = a.memory_limit_mb;
    opt.checkpoint_ratio = a.checkpoint_ratio;
    const ps::scenario sc = ps::prepare_scenario(kind, base, opt);
    reject_changed_chunks(a.chunks, opt.chunks, a.schedule);
    const ps::pipeline_schedule sched = ps::make_generator(kind, opt)(sc);

    const pe::energy_problem p = pe::make_energy_problem(sc, sched, profile);
    pe::frontier_options fo;
    fo.step_ms = a.step_ms;
    fo.exact_breakpoints = a.exact;
    const pe::frontier_result r = pe::compute_frontier(p, fo);
    const bool targeted = !std::isnan(a.target_ms);
    const pe::chosen_point chosen = targeted ? pe::choose_for_target(p, r, a.target_ms) : pe::choose_min_time(p, r);

    std::string svg_text, trace_text;
    if (!a.svg_path.empty()) {
        std::ostringstream ss;
        pe::write_frequency_svg(ss, p, chosen.point.choice);
        svg_text = ss.str();
    }
    if (!a.trace_path.empty()) {
        std::ostringstream ss;
        pe::write_frequency_trace(ss, p, chosen.point.choice);
        trace_text = ss.str();
    }

    const nlohmann::json j = result_json(p, profile, r, chosen, targeted);

    if (!a.svg_path.empty()) write_file_atomically(a.svg_path, svg_text);
    if (!a.trace_path.empty()) write_file_atomically(a.trace_path, trace_text);
    if (a.json) {
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }
    print_summary(p, profile, r, chosen, targeted);
}

}  // namespace

void register_energy(CLI::App& app) {
    auto args = std::make_shared<energy_args>();
    CLI::App* sub = app.add_subcommand(
        "energy", "Iteration time-energy frontier of a schedule (Perseus) and its per-computation GPU clocks");
    sub->add_option("--scenario", args->scenario_path, "Scenario JSON file (docs/formats.md)")->required();
    sub->add_option("--schedule", args->schedule, ps::schedules().name_list(" | ") + " (or a registered one)")->required();
    sub->add_option("--chunks", args->chunks,
                    "Model chunks per device for interleaved (default: the scenario's, or 2)")
        ->check(integer_in<std::size_t>(1, max_chunks));
    sub->add_option("--checkpoint-ratio", args->checkpoint_ratio, "Merak's activation checkpoint ratio in [0, 1] (merak-* only)")
        ->check(number_in(0, 1));
    sub->add_option("--memory-limit-mb", args->memory_limit_mb, "Per-device memory limit (MB) for adaptive and zb-h1")
        ->check(number_in(0, max_memory_mb, true));
    auto* prof = sub->add_option("--energy-profile", args->profile_path,
                                 "Time-energy profile CSV (docs/formats.md: kind,stage,frequency_mhz,time_ms,energy_j)");
    sub->add_option("--gpu", args->gpu, "Analytic DVFS model instead of a profile: " + name_list<pe::gpu_model>("|") +
                                            " (default a100)")
        ->excludes(prof);
    sub->add_option("--idle-power-w", args->idle_power_w, "Power of a waiting GPU (W); overrides the profile's")
        ->check(number_in(0, max_power_w));
    sub->add_option("--step-ms", args->step_ms, "Time cut per Phillips-Dessouky step (default: makespan / 100)")
        ->check(number_in(0, max_time_ms, true));
    sub->add_flag("--exact-breakpoints", args->exact, "Also stop steps where an op's cost slope changes (slower)");
    sub->add_option("--target-ms", args->target_ms, "Pick the least-energy plan for this iteration time (e.g. a straggler's)")
        ->check(number_in(0, max_time_ms, true));
    sub->add_option("--svg", args->svg_path, "Write the chosen plan's Gantt chart coloured by GPU clock here");
    sub->add_option("--trace", args->trace_path, "Write the chosen plan's Chrome trace (with frequency_mhz) here");
    sub->add_flag("--json", args->json, "Print the result as JSON");
    sub->callback([args, sub] { run_energy(*args, given_flags(*sub)); });
}

}  // namespace pipeplan::cli
