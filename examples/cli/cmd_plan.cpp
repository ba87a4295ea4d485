// `pipeplan plan`: plans one iteration end to end (split → schedule choice → lowering →
// validation) and writes the per-rank execution plans; `pipeplan plan-check` validates plan
// files; `pipeplan plan-show` prints one rank's program. Also the main job's summary (run
// without a subcommand). Flag parsing and printing only: the work is plan/planner.hpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "model_spec.hpp"
#include "plan_inputs.hpp"
#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/batching/json.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/transformer_shape.hpp"
#include "pipeplan/energy/profile.hpp"
#include "pipeplan/plan/export.hpp"
#include "pipeplan/plan/frequency.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/schedule/svg.hpp"

namespace pipeplan::cli {
namespace {

struct plan_cli_options {
    plan_model_flags inputs;  ///< the model/cluster flag block (plan_inputs.hpp)
    std::string batch, format = "binary";
    unsigned long long iteration = 0;
    unsigned threads = 1, alternative_splits = 0;
    std::string microbatches, out_dir, torch_csv, torch_csv_comms, trace, svg;
    bool json = false;
    // Perseus's per-computation clocks as set_frequency instructions (plan/frequency.hpp)
    std::string energy_target;  // "" = off, "min" = the minimum time, else T (ms)
    std::string energy_profile, gpu = "a100";
    double energy_step_ms = 0.0;
};

void print_summary(const plan::plan_result& r) {
    fmt::print("  candidates (simulated makespan, max peak memory):\n");
    for (const auto& c : r.candidates)
        fmt::print("    {:<12} {:<9} split {:>10.1f} ms {:>10.1f} MB{}{}\n", c.name, c.split, c.makespan_ms,
                   c.peak_memory_mb, c.polished ? "  polished" : "",
                   c.feasible ? (c.name == r.schedule.name && c.makespan_ms == r.makespan_ms ? "  <- chosen" : "")
                              : "  (over the memory limit)");
    fmt::print("  chosen: {} on {} micro-batches: makespan {:.1f} ms, lower bound {:.1f} ms (ratio {:.3f})\n",
               r.plan.header.schedule, r.plan.header.microbatches.size(), r.makespan_ms, r.lower_bound_ms,
               r.lower_bound_ms > 0 ? r.makespan_ms / r.lower_bound_ms : 1.0);
    fmt::print("  {:>5} {:>14} {:>10} {:>13} {:>13} {:>11}\n", "rank", "peak_mem_mb", "arena_mb", "live_peak_mb",
               "instructions", "plan_bytes");
    for (std::size_t k = 0; k < r.plan.programs.size(); ++k)
        fmt::print("  {:>5} {:>14.1f} {:>10.1f} {:>13.1f} {:>13} {:>11}\n", k, r.peak_memory_mb[k], r.arena_mb[k],
                   r.live_peak_mb[k], r.plan.programs[k].instructions.size(), plan::to_binary(plan::share_of(r.plan, k)).size());
    fmt::print("  planning time: split {:.2f} ms, schedule {:.2f} ms, lower {:.2f} ms, validate {:.2f} ms, total {:.2f} ms\n",
               r.times.split_ms, r.times.schedule_ms, r.times.lower_ms, r.times.validate_ms, r.times.total_ms);
}

nlohmann::json summary_json(const plan::plan_result& r) {
    nlohmann::json j;
    j["schedule"] = r.plan.header.schedule;
    j["microbatches"] = r.plan.header.microbatches.size();
    j["makespan_ms"] = r.makespan_ms;
    j["lower_bound_ms"] = r.lower_bound_ms;
    j["peak_memory_mb"] = r.peak_memory_mb;
    j["arena_mb"] = r.arena_mb;
    j["live_peak_mb"] = r.live_peak_mb;
    std::vector<std::size_t> bytes;
    for (std::size_t k = 0; k < r.plan.programs.size(); ++k) bytes.push_back(plan::to_binary(plan::share_of(r.plan, k)).size());
    j["plan_bytes"] = bytes;
    j["planning_ms"] = {{"split", r.times.split_ms}, {"schedule", r.times.schedule_ms}, {"lower", r.times.lower_ms},
                        {"validate", r.times.validate_ms}, {"total", r.times.total_ms}};
    nlohmann::json cs = nlohmann::json::array();
    for (const auto& c : r.candidates)
        cs.push_back({{"schedule", c.name}, {"split", c.split}, {"feasible", c.feasible},
                      {"makespan_ms", c.feasible ? nlohmann::json(c.makespan_ms) : nlohmann::json(nullptr)},
                      {"peak_memory_mb", c.peak_memory_mb}, {"polished", c.polished}});
    j["candidates"] = cs;
    return j;
}

/// --out DIR: rank files and the manifest (each file written atomically, the manifest last).
void write_plan_dir(const plan::plan_result& r, const std::string& dir, bool json) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw error("cannot create '" + dir + "': " + ec.message());
    nlohmann::json files = nlohmann::json::array();
    for (std::size_t k = 0; k < r.plan.programs.size(); ++k) {
        const std::string name = "rank_" + std::to_string(k) + (json ? ".json" : ".plan");
        const plan::rank_plan rp = plan::share_of(r.plan, k);
        write_file_atomically(std::filesystem::path(dir) / name, json ? plan::to_json_text(rp) : plan::to_binary(rp));
        files.push_back(name);
    }
    nlohmann::json m = summary_json(r);
    m.erase("planning_ms");  // timings differ run to run; the manifest stays byte-identical
    m["format"] = "pipeplan-plan-manifest";
    m["version"] = plan::plan_format_version;
    m["iteration"] = r.plan.header.iteration;
    m["ranks"] = r.plan.programs.size();
    m["files"] = files;
    write_file_atomically(std::filesystem::path(dir) / "plan.json", m.dump(1) + "\n");
}

/// With clocks (`e`): the plan's trace and SVG show the chosen clocks' replay, the SVG coloured by clock.
void write_outputs(const plan::plan_result& r, const plan_cli_options& o, const plan::energy_plan* e) {
    const std::uint32_t dp = r.plan.header.dp;
    for (std::uint32_t k = 0; k < dp; ++k) {  // one schedule CSV per replica (docs/formats.md)
        if (!o.torch_csv.empty())
            write_file_atomically(plan::replica_file_name(o.torch_csv, k, dp), plan::to_torch_csv(r.plan, false, k));
        if (!o.torch_csv_comms.empty())
            write_file_atomically(plan::replica_file_name(o.torch_csv_comms, k, dp), plan::to_torch_csv(r.plan, true, k));
    }
    if (!o.trace.empty()) {
        std::ostringstream ss;
        if (e) plan::write_plan_trace(ss, r.plan, e->simulation);  // dp = 1: the chosen clocks' replay
        else plan::write_plan_trace(ss, r.plan, r.simulations);
        write_file_atomically(o.trace, ss.str());
    }
    if (!o.svg.empty()) {
        std::ostringstream ss;
        if (e) {
            energy::write_frequency_svg(ss, e->problem, e->chosen.point.choice);
        } else {
            const auto sim = schedule::simulate(r.scenario, r.schedule);  // with the memory curve
            schedule::write_svg(ss, sim, r.schedule);
        }
        write_file_atomically(o.svg, ss.str());
    }
    if (!o.out_dir.empty()) write_plan_dir(r, o.out_dir, o.format == "json");
}

/// Flags that only make sense with some other flag are errors without it, never ignored.
void reject_inapplicable(const plan_cli_options& o, const std::set<std::string>& given) {
    if (o.format != "binary" && o.format != "json") throw invalid_argument("unknown --format '" + o.format + "' (binary, json)");
    reject_unless(given, "--format", !o.out_dir.empty(), "without --out");
    reject_inapplicable_model_flags(o.inputs, given);
}

/// --energy-target-ms: the frontier of the chosen schedule and its clocks as set_frequency
/// instructions (replacing r.plan); nullopt without the flag.
/// --energy-target-ms T|min: T, or nullopt for 'min' (the minimum time).
std::optional<double> energy_target_ms(const std::string& text) {
    if (text == "min") return std::nullopt;
    double t = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), t);
    if (ec != std::errc{} || p != text.data() + text.size() || !(t > 0) || !std::isfinite(t))
        throw invalid_argument("--energy-target-ms: expected a time > 0 (ms) or 'min', found '" + text + "'");
    return t;
}

std::optional<plan::energy_plan> energy_clocks(plan::plan_result& r, const plan_cli_options& o) {
    if (o.energy_target.empty()) return std::nullopt;
    const std::optional<double> target = energy_target_ms(o.energy_target);
    if (target && *target < r.makespan_ms * (1.0 - 1e-9))
        throw invalid_argument("--energy-target-ms " + o.energy_target + " is below the plan's minimum iteration time (" +
                               std::to_string(r.makespan_ms) + " ms at the top clock)");
    const energy::energy_profile profile = o.energy_profile.empty() ? energy::gpu_profile(parse_name<energy::gpu_model>(o.gpu))
                                                                    : energy::read_energy_profile_csv(o.energy_profile);
    energy::frontier_options fo;
    fo.step_ms = o.energy_step_ms;
    try {
        plan::energy_plan e = plan::plan_energy(r.plan, r.scenario, r.schedule, profile, target, fo);
        r.plan = e.plan;
        return e;
    } catch (const invalid_argument& x) {
        throw invalid_argument(std::string("--energy-target-ms: ") + x.what());
    }
}

/// The `energy` object of --json: the chosen point, the frontier's ends, every rank's clocks.
nlohmann::json energy_json(const plan::energy_plan& e) {
    const auto& f = e.frontier;
    nlohmann::json j{{"target_ms", e.chosen.target_ms},
                     {"min_time_ms", f.all_max.time_ms},
                     {"energy_all_max_j", f.all_max.energy_j},
                     {"energy_all_max_at_target_j", e.chosen.all_max_at_target_j},
                     {"energy_at_target_j", e.chosen.energy_at_target_j},
                     {"saving_fraction", 1.0 - e.chosen.energy_at_target_j / e.chosen.all_max_at_target_j},
                     {"frontier_points", f.frontier.size()},
                     {"clock_range_mhz", {e.min_frequency_mhz, e.max_frequency_mhz}}};
    nlohmann::json clocks = nlohmann::json::array();
    for (const auto& dev : energy::frequency_plan(e.problem, e.chosen.point.choice)) {
        nlohmann::json c = nlohmann::json::array();
        for (const auto& s : dev) c.push_back(std::llround(s.frequency_mhz));
        clocks.push_back(std::move(c));
    }
    std::size_t changes = 0;
    for (const auto& prog : e.plan.programs)
        for (const auto& x : prog.instructions) changes += x.kind == plan::instr_kind::set_frequency;
    j["chosen"] = {{"time_ms", e.chosen.point.time_ms}, {"energy_j", e.chosen.point.energy_j}, {"frequencies_mhz", clocks},
                   {"set_frequency_instructions", changes}};
    return j;
}

void run_plan(const plan_cli_options& o, const std::set<std::string>& given) {
    reject_inapplicable(o, given);
    if (!o.energy_target.empty()) {
        (void)energy_target_ms(o.energy_target);  // a bad value fails before planning
        if (o.inputs.dp != 1) throw invalid_argument("--energy-target-ms needs --dp 1 (the frontier is computed for one pipeline; "
                                                         "docs/energy.md, 'Data parallelism', says why)");
    }
    plan::planner_options po = to_planner_options(o.inputs, o.iteration);
    po.threads = o.threads;
    po.alternative_splits = o.alternative_splits;
    const std::vector<batching::sample> batch = batching::read_batch_csv(o.batch);
    with_plan_model(o.inputs, [&](const auto& model) {
        apply_layer_layout(po, o.inputs, model);
        plan::planner<std::decay_t<decltype(model)>> planner(model, po);
        plan::plan_result r =
            o.microbatches.empty()
                ? planner.plan(batch)
                : planner.plan_microbatches(batch, batching::microbatches_from_json(plan::read_file_bytes(o.microbatches),
                                                                                    o.microbatches));
        const std::optional<plan::energy_plan> e = energy_clocks(r, o);
        write_outputs(r, o, e ? &*e : nullptr);
        if (o.json) {
            nlohmann::json j = summary_json(r);
            if (e) j["energy"] = energy_json(*e);
            std::puts(j.dump(2).c_str());
        } else {
            fmt::print("pipeplan plan: {} samples, S = {}, C = {}, dp = {}, {:.0f} MB per device, link {:.0f} Gbit/s, "
                       "{:.1f} us\n", batch.size(), po.config.stages, o.inputs.chunks, o.inputs.dp, o.inputs.memory_mb,
                       o.inputs.bandwidth_gbps, o.inputs.latency_us);
            print_summary(r);
            if (e)
                fmt::print("  clocks: {:.1f} ms, {:.1f} J for a target of {:.1f} ms ({:.2f} % less than every op at the top "
                           "clock); {} set_frequency instructions\n",
                           e->chosen.point.time_ms, e->chosen.point.energy_j, e->chosen.target_ms,
                           100.0 * (1.0 - e->chosen.energy_at_target_j / e->chosen.all_max_at_target_j),
                           energy_json(*e)["chosen"]["set_frequency_instructions"].get<std::size_t>());
        }
    });
}

/// Reads a plan file of either format (binary by its magic, else JSON).
plan::execution_plan read_plan_file(const std::string& path) {
    const std::string bytes = plan::read_file_bytes(path);
    if (bytes.compare(0, plan::binary_magic.size(), plan::binary_magic) == 0) return plan::execution_plan_from_binary(bytes, path);
    return plan::execution_plan_from_json(bytes, path);
}

void run_plan_check(const std::vector<std::string>& files) {
    std::map<std::uint32_t, plan::rank_program> ranks;
    plan::plan_header header;
    bool same_header = true, first = true;
    std::size_t bad = 0;
    for (const auto& f : files) {
        plan::execution_plan p = read_plan_file(f);
        for (auto& prog : p.programs) {
            const auto rep = plan::validate_rank(plan::rank_plan{p.header, prog});
            fmt::print("{}: rank {}: {} instructions, {} buffers, arena {:.1f} MB (live peak {:.1f} MB): {}\n", f, prog.rank,
                       prog.instructions.size(), prog.buffers.size(), prog.arena_bytes / 1e6, prog.live_peak_bytes / 1e6,
                       rep.ok() ? "ok" : "INVALID");
            if (!rep.ok()) {
                ++bad;
                std::fputs(rep.to_string().c_str(), stdout);
            }
            if (!first && !(p.header == header)) same_header = false;
            header = p.header;
            first = false;
            ranks[prog.rank] = std::move(prog);
        }
    }
    if (same_header && ranks.size() == header.ranks() && !ranks.empty()) {
        plan::execution_plan all{header, {}};
        for (auto& [r, prog] : ranks) all.programs.push_back(std::move(prog));
        const auto rep = plan::validate(all);
        fmt::print("whole plan: {} ranks, schedule {}, iteration {}, predicted makespan {:.1f} ms: {}\n", all.programs.size(),
                   header.schedule, header.iteration, header.predicted_makespan_ms, rep.ok() ? "valid" : "INVALID");
        if (!rep.ok()) {
            std::fputs(rep.to_string().c_str(), stdout);
            ++bad;
        }
    } else {
        fmt::print("(not every rank of one plan given: cross-rank rules not checked)\n");
    }
    if (bad > 0) throw error("plan-check: " + std::to_string(bad) + " invalid program(s) or plan(s)");
}

void run_plan_show(const std::string& file, int rank) {
    const plan::execution_plan p = read_plan_file(file);
    if (rank >= 0 && std::none_of(p.programs.begin(), p.programs.end(),
                                  [&](const auto& prog) { return prog.rank == static_cast<std::uint32_t>(rank); })) {
        std::string have;
        for (const auto& prog : p.programs) have += (have.empty() ? "" : ", ") + std::to_string(prog.rank);
        throw invalid_argument("--rank " + std::to_string(rank) + ": '" + file + "' holds no program of that rank (it has: " +
                               (have.empty() ? "none" : have) + ")");
    }
    const auto& h = p.header;
    fmt::print("header: {}\n", plan::describe_fields(h, ", "));
    for (std::size_t j = 0; j < h.microbatches.size(); ++j)
        fmt::print("  mb {:>3}: {}\n", j, plan::describe_fields(h.microbatches[j], ", "));
    for (const auto& prog : p.programs) {
        if (rank >= 0 && prog.rank != static_cast<std::uint32_t>(rank)) continue;
        fmt::print("rank {}: {} instructions, {}\n", prog.rank, prog.instructions.size(), plan::describe_fields(prog, ", "));
        for (std::size_t s = 0; s < prog.buffers.size(); ++s)
            fmt::print("  buffer {:>4}: {}\n", s, plan::describe_fields(prog.buffers[s], " "));
        for (std::size_t i = 0; i < prog.instructions.size(); ++i)
            fmt::print("  {:>5}  {}\n", i, plan::describe(prog.instructions[i]));
    }
}

}  // namespace

void register_plan(CLI::App& app) {
    auto o = std::make_shared<plan_cli_options>();
    CLI::App* sub = app.add_subcommand(
        "plan",
        "Plan one iteration end to end: split, choose the fastest schedule under the memory limit, lower to per-rank "
        "instruction programs, validate (docs/plans.md). Without network flags the link between pipeline neighbours "
        "is 100 Gbit/s with no latency (DynaPipe's uniform cluster).");
    sub->add_option("--model", o->inputs.model, "Profiled model (gpt_6.7b, t5_11b) or analytic:<preset>")->required();
    add_plan_model_options(sub, o->inputs, true);
    sub->add_option("--batch", o->batch, "Batch CSV (input_tokens,target_tokens; one sample per row)")->required();
    sub->add_option("--iteration", o->iteration, "Iteration number recorded in the plan")
        ->capture_default_str()
        ->check(integer_in<unsigned long long>(0, std::numeric_limits<unsigned long long>::max()));
    sub->add_option("--microbatches", o->microbatches,
                    "Plan these micro-batches instead of splitting: a JSON file whose 'microbatches' lists sample ids "
                    "(rows of --batch), e.g. from `pipeplan split --json` or another planner");
    sub->add_option("--out", o->out_dir, "Write rank_<r>.plan (or .json) files and a plan.json manifest here");
    sub->add_option("--format", o->format, "Rank file format with --out: binary | json")->capture_default_str();
    sub->add_option("--torch-csv", o->torch_csv, "Write the torch.distributed.pipelining compute-only schedule CSV (dp > 1: one per replica, FILE_r<k>.csv)");
    sub->add_option("--torch-csv-comms", o->torch_csv_comms, "Write the torch schedule CSV with SEND/RECV/REDUCE_GRAD actions (dp > 1: one per replica, FILE_r<k>.csv)");
    sub->add_option("--trace", o->trace, "Write a Chrome/Perfetto trace (one process per replica, one track per rank, flow arrows for messages)");
    sub->add_option("--svg", o->svg, "Write an SVG Gantt chart of the chosen schedule");
    sub->add_option("--alternative-splits", o->alternative_splits,
                    "Also consider up to N runner-up splits of the exact DP (0..8): each is screened by one quick simulation, the best extra split is scheduled in full (docs/plans.md)")
        ->check(integer_in(0u, 8u))
        ->capture_default_str();
    sub->add_option("--threads", o->threads,
                    "Worker threads for the candidate schedules and buffer planning (1..256); the plan is "
                    "byte-identical for every count")
        ->check(integer_in(1u, 256u))
        ->capture_default_str();
    sub->add_flag("--json", o->json, "Print the summary as one JSON object");
    sub->add_option("--energy-target-ms", o->energy_target,
                    "Perseus: pick the least-energy clocks for this iteration time (ms, e.g. a straggler's) or 'min' "
                    "(the fastest), and add them to the plan as set_frequency instructions (docs/energy.md); dp 1 only");
    auto* prof = sub->add_option("--energy-profile", o->energy_profile,
                                 "Time-energy profile CSV for --energy-target-ms (docs/formats.md)");
    sub->add_option("--gpu", o->gpu, "Analytic DVFS model for --energy-target-ms: " + name_list<energy::gpu_model>("|"))
        ->capture_default_str()
        ->excludes(prof);
    sub->add_option("--energy-step-ms", o->energy_step_ms, "Frontier step (ms; 0: makespan / 100)")
        ->capture_default_str()
        ->check(number_in(0, 1e9));
    sub->callback([o, sub] {
        const auto given = given_flags(*sub);
        for (const char* f : {"--energy-profile", "--gpu", "--energy-step-ms"})
            reject_unless(given, f, !o->energy_target.empty(), "without --energy-target-ms");
        run_plan(*o, given);
    });

    auto files = std::make_shared<std::vector<std::string>>();
    CLI::App* check = app.add_subcommand("plan-check", "Validate plan files (rank files or whole plans) and print a summary");
    check->add_option("files", *files, "Plan files (binary or JSON)")->required();
    check->callback([files] { run_plan_check(*files); });

    auto show_file = std::make_shared<std::string>();
    auto show_rank = std::make_shared<int>(-1);
    CLI::App* show = app.add_subcommand("plan-show", "Print a plan file's header, buffers and program readably");
    show->add_option("file", *show_file, "Plan file (binary or JSON)")->required();
    show->add_option("--rank", *show_rank, "Only this rank (files with several programs)")
        ->check(integer_in(0, std::numeric_limits<int>::max()));
    show->callback([show_file, show_rank] { run_plan_show(*show_file, *show_rank); });
}

void print_default_plan() {
    const analytic_cost_model model = make_analytic_model("gpt-6.7b", "a100-40gb");
    constexpr long long token_budget = 65536;
    std::mt19937_64 rng(2024);
    std::lognormal_distribution<double> prompt(4.8, 0.75), target(2.5, 1.0);
    std::vector<batching::sample> batch;
    long long tokens = 0;
    while (tokens < token_budget) {
        batching::sample smp;
        smp.input_tokens = std::clamp(static_cast<int>(prompt(rng)), 4, 4000);
        smp.target_tokens = std::clamp(static_cast<int>(target(rng)), 1, 600);
        tokens += smp.input_tokens + smp.target_tokens;
        batch.push_back(smp);
    }
    plan::planner_options po;
    po.config.stages = 4;
    po.config.layers_per_stage = 8;
    po.config.tp = 2;
    po.config.device_memory_mb = 40000;
    po.hidden_size = model.shape().hidden;
    fmt::print("\nPlanning one iteration end to end: {} samples ({} tokens, seeded synthetic mixture), S = {}, {} layers "
               "per stage, tp {}, {:.0f} MB per device, 100 Gbit/s links\n",
               batch.size(), tokens, po.config.stages, po.config.layers_per_stage, po.config.tp, po.config.device_memory_mb);
    const plan::plan_result r = plan::plan_iteration(model, batch, po);
    print_summary(r);
}

}  // namespace pipeplan::cli
