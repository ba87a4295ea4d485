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
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "commands.hpp"
#include "flags.hpp"
#include "lengths_flag.hpp"
#include "model_spec.hpp"
#include "plan_inputs.hpp"
#include "sample_lines.hpp"
#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/batching/json.hpp"
#include "pipeplan/compare/methods.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/transformer_shape.hpp"
#include "pipeplan/energy/profile.hpp"
#include "pipeplan/plan/directory.hpp"
#include "pipeplan/plan/export.hpp"
#include "pipeplan/plan/frequency.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/plan_file.hpp"
#include "pipeplan/plan/result_json.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/schedule/svg.hpp"

namespace pipeplan::cli {
namespace {

struct plan_cli_options {
    plan_model_flags inputs;  ///< the model/cluster flag block (plan_inputs.hpp)
    lengths_flags lengths;    ///< --lengths FILE --tokens N --seed S instead of --batch (lengths_flag.hpp)
    std::string batch, format = "binary";
    unsigned long long iteration = 0;
    unsigned threads = 1, alternative_splits = 0;
    bool memory_probes = false;  ///< --memory-probes: planner_options::recommended_memory_probe_shares()
    double bound_tolerance = plan::planner_options{}.bound_tolerance;  ///< --bound-tolerance
    std::string microbatches, out_dir, torch_csv, torch_csv_comms, trace, svg;
    bool json = false;
    // Perseus's per-computation clocks as set_frequency instructions (plan/frequency.hpp)
    std::string energy_target;  // "" = off, "min" = the minimum time, else T (ms)
    std::string energy_profile, gpu = "a100";
    double energy_step_ms = 0.0;
};

std::string shape_text(const plan::plan_facts::shape& s) {
    std::string t = fmt::format("{}x{}", s.samples, s.seqlen_tokens);
    if (s.dec_seqlen_tokens > 0) t += fmt::format("+{}", s.dec_seqlen_tokens);
    if (s.rows != s.samples) t += fmt::format(" in {} rows", s.rows);
    return t;
}

std::string link_text(const char* what, const plan::plan_facts::link_class& l) {
    if (l.pairs == 0) return fmt::format("no {} pair", what);
    return fmt::format("{} {} pair{} at {}, {:.1f} us", l.pairs, what, l.pairs == 1 ? "" : "s",
                       l.bandwidth_gbps > 0 ? fmt::format("{:.0f} Gbit/s", l.bandwidth_gbps) : std::string("no cost"),
                       l.latency_us);
}

/// The facts as summary lines: recompute, shapes (grouped, largest count first), links.
void print_facts(const plan::plan_facts& f) {
    fmt::print("  recompute: {} ({} checkpointed forwards in the plan)\n", f.recompute, f.checkpointed_forwards);
    std::map<plan::plan_facts::shape, std::size_t> counts;
    for (const auto& s : f.shapes) ++counts[s];
    std::vector<std::pair<std::size_t, plan::plan_facts::shape>> order;
    for (const auto& [s, c] : counts) order.emplace_back(c, s);
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string list;
    for (std::size_t i = 0; i < order.size() && i < 8; ++i)
        list += fmt::format("{}{} ×{}", i ? ", " : "", shape_text(order[i].second), order[i].first);
    if (order.size() > 8) list += fmt::format(", ... ({} shapes)", order.size());
    fmt::print("  micro-batch shapes (samples x padded tokens[+decoder tokens], count): {}\n", list);
    fmt::print("  links between pipeline neighbours: {}; {}\n", link_text("intra-node", f.intra_node),
               link_text("inter-node", f.inter_node));
}

void print_summary(const plan::plan_result& r) {
    fmt::print("  candidates (simulated makespan, max peak memory):\n");
    for (std::size_t k = 0; k < r.candidates.size(); ++k) {
        const auto& c = r.candidates[k];
        fmt::print("    {:<12} {:<9} split {:>10.1f} ms {:>10.1f} MB{}{}\n", c.name, c.split, c.makespan_ms,
                   c.peak_memory_mb, c.polished ? "  polished" : "",
                   c.feasible ? (k == r.chosen ? "  <- chosen" : "") : "  (over the memory limit)");
    }
    fmt::print("  chosen: {} on {} micro-batches: makespan {:.1f} ms, lower bound {:.1f} ms (ratio {:.3f})\n",
               r.plan.header.schedule, r.plan.header.microbatches.size(), r.makespan_ms, r.lower_bound_ms,
               r.lower_bound_ms > 0 ? r.makespan_ms / r.lower_bound_ms : 1.0);
    if (r.memory_attempts > 1)
        fmt::print("  memory: planned under a budget of {:.1f} MB ({} plans): at the device memory, some rank's arena + "
                   "model state did not fit\n",
                   r.budget_mb, r.memory_attempts);
    if (r.memory_probes > 0)
        fmt::print("  memory probes: {} plans under budgets below the kept plan's (memory binds it); the plan is the "
                   "fastest that fits, under a budget of {:.1f} MB\n",
                   r.memory_probes, r.budget_mb);
    const plan::plan_facts f = plan::facts_of(r);
    print_facts(f);
    fmt::print("  {:>5} {:>14} {:>15} {:>10} {:>13} {:>13} {:>11}\n", "rank", "peak_mem_mb", "model_state_mb", "arena_mb",
               "live_peak_mb", "instructions", "plan_bytes");
    for (std::size_t k = 0; k < r.plan.programs.size(); ++k)
        fmt::print("  {:>5} {:>14.1f} {:>15.1f} {:>10.1f} {:>13.1f} {:>13} {:>11}\n", k, r.peak_memory_mb[k],
                   f.model_state_mb[k], r.arena_mb[k], r.live_peak_mb[k], r.plan.programs[k].instructions.size(),
                   plan::rank_binary_bytes(r.plan, k));
    fmt::print("  planning time: split {:.2f} ms, schedule {:.2f} ms, lower {:.2f} ms, validate {:.2f} ms, total {:.2f} ms\n",
               r.times.split_ms, r.times.schedule_ms, r.times.lower_ms, r.times.validate_ms, r.times.total_ms);
}

/// `plan --json` and the manifest: the library's result summary plus the facts above.
nlohmann::json summary_json(const plan::plan_result& r) {
    nlohmann::json j = plan::plan_result_json(r);
    j.update(plan::facts_json(plan::facts_of(r)));
    return j;
}

/// --out DIR: the plan directory (plan/directory.hpp: written whole, replacing DIR in one step;
/// the rank files on `threads` threads).
void write_plan_dir(plan::plan_result& r, const std::string& dir, bool json, unsigned threads) {
    nlohmann::json m = summary_json(r);
    m.erase("planning_ms");  // timings differ run to run; the manifest stays byte-identical
    plan::write_plan_directory(dir, r.plan, json, std::move(m), threads);
}

/// The plan's Gantt chart: one labelled group of device rows per data-parallel replica, the
/// title's makespan and lower bound the summary's, the device memory limit drawn. The memory
/// panel shows replica 0 (re-simulated with its memory curve; the planner keeps the other
/// replicas' timelines only).
void write_plan_svg(std::ostream& out, const plan::plan_result& r, double memory_limit_mb) {
    const schedule::simulation_result first = schedule::simulate(r.scenario, r.schedule);  // with the memory curve
    std::vector<schedule::svg_pipeline> ps;
    for (std::size_t k = 0; k < r.simulations.size(); ++k)
        ps.push_back({k == 0 ? &first : &r.simulations[k], &r.schedule,
                      r.simulations.size() > 1 ? "replica " + std::to_string(k) : std::string()});
    if (ps.empty()) ps.push_back({&first, &r.schedule, {}});
    schedule::svg_options so;
    so.memory_limit_mb = memory_limit_mb;
    so.makespan_ms = r.makespan_ms;
    so.lower_bound_ms = r.lower_bound_ms;
    schedule::write_svg(out, ps, so);
}

/// With clocks (`e`): the plan's trace and SVG show the chosen clocks' replay, the SVG coloured by clock.
void write_outputs(plan::plan_result& r, const plan_cli_options& o, const plan::energy_plan* e) {
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
            write_plan_svg(ss, r, o.inputs.memory_mb);
        }
        write_file_atomically(o.svg, ss.str());
    }
    if (!o.out_dir.empty()) write_plan_dir(r, o.out_dir, o.format == "json", o.threads);
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
    } catch (const option_error& x) {  // plan spells the energy options --energy-step-ms, --energy-target-ms
        throw invalid_argument(x.named("--energy-" + flag_of_option(x.option()).substr(2)));
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

/// glibc maps each block above its mmap threshold (at most 32 MiB, raised as such blocks are
/// freed) on its own and unmaps it when freed, and returns the heap's free top to the system:
/// a plan of 1M samples allocates and frees blocks of tens of MB per solve, schedule and rank
/// (range rows, simulator and placement scratch), each then faulted in page by page again (2.4 s
/// of system time in 20 s). One `pipeplan plan` process makes one plan: it keeps freed blocks
/// in the heap instead (its peak resident memory rises ~8 %, to ~0.75 GB on that plan).
void keep_freed_memory() {
#if defined(__GLIBC__)
    (void)mallopt(M_MMAP_THRESHOLD, std::numeric_limits<int>::max());
    (void)mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

void run_plan(const plan_cli_options& o, const std::set<std::string>& given) {
    reject_inapplicable(o, given);
    keep_freed_memory();
    if (!o.energy_target.empty()) {
        (void)energy_target_ms(o.energy_target);  // a bad value fails before planning
        if (o.inputs.dp != 1) throw invalid_argument("--energy-target-ms needs --dp 1 (the frontier is computed for one pipeline; "
                                                         "docs/energy.md, 'Data parallelism', says why)");
    }
    plan::planner_options po = to_planner_options(o.inputs, o.iteration);
    po.threads = o.threads;
    po.alternative_splits = o.alternative_splits;
    po.bound_tolerance = o.bound_tolerance;
    if (o.memory_probes) po.memory_probe_shares = plan::planner_options::recommended_memory_probe_shares();
    // --batch: errors about a sample name its line; --lengths: the --iteration-th batch drawn with the seed.
    const std::optional<csv_table> batch_table =
        o.lengths.files.empty() ? std::optional<csv_table>(csv_table::read(o.batch)) : std::nullopt;
    const std::vector<batching::sample> batch =
        batch_table ? batching::batch_from_table(*batch_table) : batch_from_flags(o.batch, o.lengths, o.iteration);
    with_plan_model(o.inputs, [&](const auto& model) {
        apply_layer_layout(po, o.inputs, model);
        plan::planner<std::decay_t<decltype(model)>> planner(model, po);
        plan::plan_result r;
        const auto run = [&] {
            if (o.microbatches.empty()) {
                r = planner.plan(batch);
                return;
            }
            // Packed micro-batches keep their rows (priced as rows, not as padded samples).
            batching::given_split g = batching::split_from_json(plan::read_file_bytes(o.microbatches), o.microbatches);
            r = planner.plan_microbatches(batch, std::move(g.microbatches), std::move(g.layout));
        };
        if (batch_table) naming_sample_lines(*batch_table, run);
        else run();
        const std::optional<plan::energy_plan> e = energy_clocks(r, o);
        write_outputs(r, o, e ? &*e : nullptr);
        if (o.json) {
            nlohmann::json j = summary_json(r);
            if (e) j["energy"] = energy_json(*e);
            std::puts(j.dump(2).c_str());
        } else {
            fmt::print("pipeplan plan: {} samples, S = {}, C = {}, dp = {}, tp = {}, {:.0f} MB per device (MB = 10^6 "
                       "bytes)\n", batch.size(), po.config.stages, o.inputs.chunks, o.inputs.dp, po.config.tp,
                       o.inputs.memory_mb);
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

/// One program read by plan-check, and the file it came from.
struct checked_program {
    std::string file;
    plan::rank_program program;
};

/// Prints the rank rules' verdict on each program; the count of invalid ones.
std::size_t check_ranks(const plan::plan_header& h, const std::vector<checked_program>& progs) {
    std::size_t bad = 0;
    for (const auto& [f, prog] : progs) {
        const auto rep = plan::validate_rank(plan::rank_plan{h, prog});
        fmt::print("{}: rank {}: {} instructions, {} buffers, arena {:.1f} MB (live peak {:.1f} MB): {}\n", f, prog.rank,
                   prog.instructions.size(), prog.buffers.size(), prog.arena_bytes / 1e6, prog.live_peak_bytes / 1e6,
                   rep.ok() ? "ok" : "INVALID");
        if (!rep.ok()) {
            ++bad;
            std::fputs(rep.to_string().c_str(), stdout);
        }
    }
    return bad;
}

/// The programs of `files` (plan files or plan directories) as one plan: every file must carry
/// the first file's header and plan identity, and no rank may come twice.
plan::execution_plan gather_plan(const std::vector<std::string>& files, std::vector<checked_program>& progs) {
    plan::execution_plan all;
    std::string first;
    std::map<std::uint32_t, std::string> seen;
    for (const auto& f : files) {
        plan::execution_plan p = plan::is_plan_directory(f) ? plan::read_plan_directory(f) : plan::read_plan_file(f);
        if (first.empty()) {
            all.header = p.header;
            first = f;
        } else if (p.header.plan_id != all.header.plan_id || !(p.header == all.header)) {
            throw input_error(f, 0, "header", "belongs to another plan than '" + first + "' (plan " + plan::plan_id_hex(p.header.plan_id) +
                                                  ", iteration " + std::to_string(p.header.iteration) + " vs plan " +
                                                  plan::plan_id_hex(all.header.plan_id) + ", iteration " +
                                                  std::to_string(all.header.iteration) + ")");
        }
        for (auto& prog : p.programs) {
            if (auto [it, fresh] = seen.emplace(prog.rank, f); !fresh)
                throw input_error(f, 0, "rank", "rank " + std::to_string(prog.rank) + " is also in '" + it->second + "'");
            progs.push_back({f, prog});
            all.programs.push_back(std::move(prog));
        }
    }
    std::sort(all.programs.begin(), all.programs.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    return all;
}

/// The ranks 0..n-1 of the header that `all` lacks, as "2, 3" (empty when complete).
std::string missing_ranks(const plan::execution_plan& all) {
    std::string out;
    std::size_t k = 0;
    for (std::uint32_t r = 0; r < all.header.ranks() && out.size() < 200; ++r) {
        if (k < all.programs.size() && all.programs[k].rank == r) ++k;
        else out += (out.empty() ? "" : ", ") + std::to_string(r);
    }
    return out;
}

/// The memory rule's verdict in words: the largest arena + model state of the given ranks
/// against the device memory, or why it cannot be checked (each INVALID rank names its figures).
void print_memory_check(const plan::plan_header& h, const std::vector<checked_program>& progs) {
    if (!plan::records_memory(h)) {
        fmt::print("memory: not checked: the plan (format version {}) records no device memory and model state (plans of "
                   "format version 4 made by `pipeplan plan` do)\n", h.version);
        return;
    }
    std::uint32_t worst = progs.front().program.rank;
    double worst_mb = -1.0;
    for (const auto& c : progs)
        if (const double mb = plan::rank_memory_mb(h, c.program); mb > worst_mb) worst_mb = mb, worst = c.program.rank;
    fmt::print("memory: largest arena + model state {:.1f} MB (rank {}), device memory {:.1f} MB: {}\n", worst_mb, worst,
               h.device_memory_mb, worst_mb <= h.device_memory_mb ? "fits" : "EXCEEDS");
}

void run_plan_check(const std::vector<std::string>& files, bool partial) {
    std::vector<checked_program> progs;
    plan::execution_plan all = gather_plan(files, progs);
    std::size_t bad = check_ranks(all.header, progs);
    if (!progs.empty()) print_memory_check(all.header, progs);
    const std::string missing = missing_ranks(all);
    if (!missing.empty()) {
        if (!partial)
            throw input_error(files.front(), 0, "ranks", "the plan has " + std::to_string(all.header.ranks()) + " ranks; rank(s) " +
                                                             missing + " are in none of the given files (pass every rank "
                                                             "file, the plan directory, or --partial to check these alone)");
        fmt::print("(--partial: rank(s) {} not given: cross-rank rules not checked)\n", missing);
    } else {
        const auto rep = plan::validate(all);
        fmt::print("whole plan: {} ranks, plan {}, schedule {}, iteration {}, predicted makespan {:.1f} ms: {}\n",
                   all.programs.size(), plan::plan_id_hex(all.header.plan_id), all.header.schedule, all.header.iteration,
                   all.header.predicted_makespan_ms, rep.ok() ? "valid" : "INVALID");
        if (!rep.ok()) {
            std::fputs(rep.to_string().c_str(), stdout);
            ++bad;
        }
    }
    if (bad > 0) throw error("plan-check: " + std::to_string(bad) + " invalid program(s) or plan(s)");
}

void run_plan_show(const std::string& file, int rank) {
    const plan::execution_plan p = plan::is_plan_directory(file) ? plan::read_plan_directory(file) : plan::read_plan_file(file);
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
    sub->add_option("--batch", o->batch, "Batch CSV (input_tokens,target_tokens; one sample per row), or --lengths");
    add_lengths_options(sub, o->lengths, true);
    sub->add_option("--iteration", o->iteration,
                    "Iteration number recorded in the plan (with --lengths: which drawn batch, 0 = the first)")
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
                    "Also consider up to N runner-up splits of the exact split (0..8): each is screened by one quick simulation, the best extra split is scheduled in full (docs/plans.md)")
        ->check(integer_in(0u, 8u))
        ->capture_default_str();
    sub->add_flag("--memory-probes", o->memory_probes,
                  "Where memory binds a plan of fewer than 1000 micro-batches, also plan under budgets 0.5-32 % below "
                  "its own and keep the fastest that fits (more memory is then rarely slower; where they run a plan "
                  "costs 2-8x as much; docs/plans.md)");
    sub->add_option("--bound-tolerance", o->bound_tolerance,
                    "Schedule a candidate only if its lower bound is below the fastest makespan so far by more than "
                    "this share (0 <= x < 0.01): the plan is within it of the fastest candidate; 0 = exact (docs/plans.md)")
        ->capture_default_str()
        ->check(number_in(0, 0.01));
    sub->add_option("--threads", o->threads,
                    "Worker threads for the later splits, the candidate schedules, buffer planning and writing --out's "
                    "rank files (1..256); the plan is byte-identical for every count")
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
        reject_lengths_flags_without_lengths(o->lengths, given);
        run_plan(*o, given);
    });

    auto files = std::make_shared<std::vector<std::string>>();
    auto partial = std::make_shared<bool>(false);
    CLI::App* check = app.add_subcommand(
        "plan-check", "Validate a plan (a plan directory, or rank files / whole-plan files of one plan) and print a summary; "
                      "files of different plans, a rank given twice and missing ranks are errors");
    check->add_option("files", *files, "Plan directories or plan files (binary or JSON)")->required();
    check->add_flag("--partial", *partial, "Check only the given ranks' own rules (missing ranks are no error)");
    check->callback([files, partial] { run_plan_check(*files, *partial); });

    auto show_file = std::make_shared<std::string>();
    auto show_rank = std::make_shared<int>(-1);
    CLI::App* show = app.add_subcommand("plan-show", "Print a plan's header, buffers and programs readably");
    show->add_option("file", *show_file, "Plan file (binary or JSON) or plan directory")->required();
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
               "per stage, tp {}, a {:.0f} MB limit per device (of the {}'s {:.0f} MB; the rest is left to the CUDA "
               "context, NCCL buffers and allocator fragmentation)\n",
               batch.size(), tokens, po.config.stages, po.config.layers_per_stage, po.config.tp, po.config.device_memory_mb,
               model.hardware().name, model.hardware().device_memory_mb);
    const plan::plan_result r = plan::plan_iteration(model, batch, po);
    print_summary(r);
    // The answer to "how much faster than packing?" on the same batch (compare/methods.hpp:
    // Megatron-style rows of the longest sample, the rows per micro-batch and recomputation
    // searched, 1F1B in order, simulated like the plan).
    plan::planner<analytic_cost_model> same(model, po);
    const auto packing = compare::best_knobs(model, same, batch, compare::method::packing, compare::knob_grid{});
    if (!packing)
        fmt::print("  no packing baseline fits in {:.0f} MB per device on this batch\n", po.config.device_memory_mb);
    else
        fmt::print("  {:.2f}x the throughput of packing ({}) on the same batch: {:.1f} ms vs {:.1f} ms per iteration "
                   "(`pipeplan compare` sweeps this)\n",
                   packing->run.iteration_ms / r.makespan_ms,
                   compare::describe(packing->knobs, packing->run.micro.per_microbatch.front().shape.seqlen_tokens), r.makespan_ms,
                   packing->run.iteration_ms);
}

}  // namespace pipeplan::cli
