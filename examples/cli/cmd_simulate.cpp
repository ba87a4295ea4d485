// `pipeplan simulate`: run a pipeline schedule on a scenario file through the event simulator.
//
//   pipeplan simulate --scenario FILE.json (--schedule gpipe|1f1b|interleaved|adaptive|zb-h1|
//                     merak-early|merak-last|merak-critical|zb-v|v-half|v-min | --orders FILE.txt)
//                     [--chunks C] [--max-pending-w N]
//                     [--checkpoint-ratio r] [--memory-limit-mb M] [--search-order] [--seed N]
//                     [--trace out.json] [--svg out.svg] [--json]
//
// A fixed-order schedule (gpipe, 1f1b, interleaved, merak-*, --orders) whose peak exceeds
// --memory-limit-mb fails with exit status 3 (pipeplan::limit_exceeded) after its output.
//
// Output files are rendered in memory first and then written with write_output_file: regular
// files atomically (temporary file beside the target, then rename), so a failure never leaves a
// half-written file behind; devices and FIFOs are streamed to; `-` is standard output (the
// summary then goes to standard error). A non-finite figure is an error, never printed.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

namespace pipeplan::cli {

namespace {

namespace ps = pipeplan::schedule;

struct simulate_args {
    std::string scenario_path;
    std::string schedule;
    std::string orders_path;
    std::size_t chunks = 0;
    bool chunks_given = false;
    double checkpoint_ratio = std::numeric_limits<double>::quiet_NaN();
    double memory_limit_mb = std::numeric_limits<double>::infinity();
    double overlap_factor = 1.0;
    std::size_t max_pending_w = 0;  ///< zb-v, v-half, v-min (named_schedule_options::max_pending_w)
    bool search = false;
    std::uint64_t seed = 1;
    std::string trace_path, svg_path;
    bool json = false;
};

/// The scenario file, validated.
ps::scenario read_scenario(const std::string& path) {
    ps::scenario sc = ps::read_scenario_json(path);
    try {
        sc.validate();
    } catch (const invalid_argument& e) {
        throw input_error(path, 0, "", e.what());
    }
    return sc;
}

/// `--orders FILE`: the device orders of the file on the scenario as placed; a deadlock
/// names the line of the device that waits.
ps::simulation_result run_orders(const simulate_args& a, const ps::scenario& sc, ps::pipeline_schedule& sched) {
    if (a.chunks_given || a.search || !std::isnan(a.checkpoint_ratio))
        throw invalid_argument("--chunks, --checkpoint-ratio and --search-order do not apply to --orders "
                               "(the orders run on the scenario as placed)");
    const ps::orders_text t =
        ps::parse_orders_text(read_text_file(a.orders_path), a.orders_path, sc, ps::placement_of(sc));
    sched = t.schedule;
    sched.overlap_factor = a.overlap_factor;  // prices the file's overlapped pairs (F3&B1)
    try {
        return ps::simulate(sc, sched);
    } catch (const ps::schedule_deadlock& e) {
        throw input_error(a.orders_path, t.line_of_device[e.device()],
                          "device " + std::to_string(e.device()) + ", position " + std::to_string(e.position()) +
                              ", op " + ps::op_label(sched, e.at()),
                          "deadlock: an op it depends on (on another device) is ordered after it");
    }
}

/// What one run produced.
struct simulate_run {
    ps::scenario sc;
    ps::pipeline_schedule sched;
    ps::simulation_result res;
    std::vector<std::uint32_t> order;  ///< micro-batch order (scenario indices)
    ps::order_search_result search;
    bool plans_under_limit = false;  ///< the schedule's row: it plans under the limit (else fixed order)
};

/// `--schedule NAME`: prepare the scenario (placement, chunks, checkpoint ratio), optionally
/// search the order, generate and simulate.
void run_named(const simulate_args& a, const ps::scenario& base, simulate_run& run) {
    const ps::schedule_traits& kind = ps::schedules().at(a.schedule);
    run.plans_under_limit = kind.plans_under_memory_limit;
    ps::named_schedule_options opt;
    opt.chunks = a.chunks_given ? a.chunks : 0;
    opt.memory_limit_mb = a.memory_limit_mb;
    opt.checkpoint_ratio = a.checkpoint_ratio;
    opt.overlap_factor = a.overlap_factor;
    opt.max_pending_w = a.max_pending_w;
    if (a.max_pending_w > 0 && !ps::places_v(kind))
        throw invalid_argument("--max-pending-w does not apply to --schedule " + a.schedule + " (it bounds the V schedules' pending W)");
    const ps::scenario sc = ps::prepare_scenario(kind, base, opt);
    reject_changed_chunks(a.chunks_given ? a.chunks : 0, opt.chunks, a.schedule);
    if (!a.search) {
        run.sc = sc;
        run.sched = ps::make_generator(kind, opt)(run.sc);
        run.res = ps::simulate(run.sc, run.sched);
        return;
    }
    if (!kind.searchable_order) throw invalid_argument("--search-order: schedule '" + a.schedule + "' fixes its own order");
    ps::order_search_options so;
    so.memory_limit_mb = a.memory_limit_mb;
    so.seed = a.seed;
    run.search = ps::search_named_order(kind, sc, opt, so);
    if (!run.search.feasible)
        throw limit_exceeded("--search-order: no micro-batch order of schedule '" + a.schedule + "' fits " +
                             std::to_string(a.memory_limit_mb) + " MB");
    opt.inflight_limit = run.search.inflight_limit;
    sc.validate();
    ps::simulation_workspace ws;
    ps::ordered_schedule r = ps::schedule_in_order(kind, sc, opt, run.search.order, ps::simulation_options{}, ws);
    run.sc = std::move(r.sc);
    run.order = std::move(r.order);
    run.sched = std::move(r.sched);
    run.res = std::move(r.sim);
    // report micro-batches by their index in the scenario file
    for (auto& dev : run.sched.orders)
        for (auto& o : dev) o.microbatch = run.order[o.microbatch];
    for (auto& dev : run.res.timeline)
        for (auto& t : dev) t.o.microbatch = run.order[t.o.microbatch];
    for (auto& o : run.res.peak_memory_op) o.microbatch = run.order[o.microbatch];
}

/// Output files, JSON or the summary; then exit status 3 for a fixed-order schedule over the limit.
void report(const simulate_args& a, const simulate_run& run, std::size_t microbatches) {
    const ps::simulation_result& res = run.res;
    ps::require_finite(res);  // a non-finite figure is an error, never printed
    std::string trace_text, svg_text;
    if (!a.trace_path.empty()) {
        std::ostringstream ss;
        ps::write_chrome_trace(ss, res, run.sched);
        trace_text = ss.str();
    }
    if (!a.svg_path.empty()) {
        std::ostringstream ss;
        ps::svg_options so;
        so.memory_limit_mb = a.memory_limit_mb;
        ps::write_svg(ss, res, run.sched, so);
        svg_text = ss.str();
    }
    const double peak = *std::max_element(res.peak_memory_mb.begin(), res.peak_memory_mb.end());
    const bool limited = a.memory_limit_mb < std::numeric_limits<double>::infinity();
    // With --trace - or --svg - (standard output) the summary goes to standard error.
    std::FILE* out = is_standard_output_path(a.trace_path) || is_standard_output_path(a.svg_path) ? stderr : stdout;
    if (!a.trace_path.empty()) write_output_file(a.trace_path, trace_text);
    if (!a.svg_path.empty()) write_output_file(a.svg_path, svg_text);
    if (a.json) {
        nlohmann::json j = ps::simulation_to_json(res, run.sched);
        if (limited) {
            j["memory_limit_mb"] = a.memory_limit_mb;
            j["within_memory_limit"] = peak <= a.memory_limit_mb + 1e-6;
        }
        if (a.search) {
            j["microbatch_order"] = run.order;
            j["inflight_limit"] = run.search.inflight_limit;
            j["search_evaluations"] = run.search.evaluations;
        }
        std::fprintf(out, "%s\n", j.dump(2).c_str());
    } else {
        std::fprintf(out, "schedule %s on %zu devices (%zu micro-batches)\n", run.sched.name.c_str(),
                    run.sched.placement.devices(), microbatches);
        std::fprintf(out, "makespan %.3f ms, lower bound %.3f ms (x%.3f)\n", res.makespan_ms, res.lower_bound_ms,
                    res.makespan_over_lower_bound);
        for (std::size_t d = 0; d < res.peak_memory_mb.size(); ++d)
            std::fprintf(out, "device %zu: peak memory %.1f MB, bubble %.1f %%\n", d, res.peak_memory_mb[d],
                        100.0 * res.bubble_fraction[d]);
        if (limited)
            std::fprintf(out, "memory limit %.1f MB: %s\n", a.memory_limit_mb,
                        peak <= a.memory_limit_mb + 1e-6 ? "met" : "EXCEEDED");
    }
    std::fflush(stdout);
    if (limited && !run.plans_under_limit) ps::check_memory_limit(res, run.sched, a.memory_limit_mb);
}

void run_simulate(const simulate_args& a, const std::set<std::string>& given) {
    if (a.schedule.empty() == a.orders_path.empty())
        throw invalid_argument("give exactly one of --schedule NAME and --orders FILE");
    reject_unless(given, "--seed", a.search, "without --search-order");
    reject_unless(given, "--max-pending-w", a.orders_path.empty(), "to --orders (the orders run as given)");
    if (a.trace_path == "-" && a.svg_path == "-")
        throw invalid_argument("--trace and --svg are both standard output ('-'): choose one");
    const ps::scenario base = read_scenario(a.scenario_path);
    simulate_run run;
    run.order.resize(base.microbatches);
    for (std::size_t j = 0; j < run.order.size(); ++j) run.order[j] = static_cast<std::uint32_t>(j);
    if (!a.orders_path.empty()) {
        run.sc = base;
        run.res = run_orders(a, run.sc, run.sched);
    } else {
        run_named(a, base, run);
    }
    report(a, run, base.microbatches);
}

}  // namespace

void register_simulate(CLI::App& app) {
    auto args = std::make_shared<simulate_args>();
    CLI::App* sub = app.add_subcommand("simulate", "Simulate a pipeline schedule on a scenario (JSON) file");
    sub->add_option("--scenario", args->scenario_path, "Scenario JSON file (docs/formats.md)")->required();
    sub->add_option("--schedule", args->schedule, ps::schedules().name_list(" | ") + " (or a registered one)");
    sub->add_option("--max-pending-w", args->max_pending_w,
                    "zb-v, v-half, v-min: weight gradients a device may leave pending before it runs one first (0 = W "
                    "only fills waits)")
        ->check(integer_in<std::size_t>(0, 1u << 20));
    sub->add_option("--orders", args->orders_path,
                    "Run device orders from a text file instead of --schedule: one device per line, ops as "
                    "printed (F0 B0 F1.1 ..., an overlapped pair F3&B1)");
    sub->add_option("--chunks", args->chunks,
                    "Model chunks per device for interleaved (default: the scenario's placement, else 2)")
        ->check(integer_in<std::size_t>(1, max_chunks));
    sub->add_option("--checkpoint-ratio", args->checkpoint_ratio,
                    "Merak's activation checkpoint ratio r in [0, 1] (merak-* only), spread by stage")
        ->check(number_in(0, 1));
    sub->add_option("--memory-limit-mb", args->memory_limit_mb,
                    "Per-device memory limit (MB): adaptive and zb-h1 plan under it, --search-order keeps to "
                    "it, a fixed-order schedule that exceeds it fails (exit 3)")
        ->check(number_in(0, max_memory_mb, true));
    sub->add_option("--overlap-factor", args->overlap_factor,
                    "dualpipe-v and the pairs of --orders (F3&B1): an overlapped forward/backward takes max(F, B) + "
                    "factor * min(F, B) (default 1: no overlap benefit)")
        ->check(number_in(0, 1));
    sub->add_flag("--search-order", args->search, "Search the micro-batch order (and adaptive's in-flight limit)");
    sub->add_option("--seed", args->seed, "Seed of --search-order (default 1)")
        ->check(integer_in<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
    sub->add_option("--trace", args->trace_path,
                    "Write a Chrome/Perfetto trace (JSON) here (- = standard output; the summary then goes to "
                    "standard error)");
    sub->add_option("--svg", args->svg_path,
                    "Write an SVG Gantt chart with the memory curve here (- = standard output, as --trace)");
    sub->add_flag("--json", args->json, "Print the result as JSON");
    sub->callback([args, sub] {
        args->chunks_given = sub->count("--chunks") > 0;
        run_simulate(*args, given_flags(*sub));
    });
}

}  // namespace pipeplan::cli
