// `pipeplan simulate`: run a pipeline schedule on a scenario file through the event simulator.
//
//   pipeplan simulate --scenario FILE.json --schedule gpipe|1f1b|interleaved|adaptive|zb-h1|
//                     merak-early|merak-last|merak-critical [--chunks C] [--memory-limit-mb M]
//                     [--search-order] [--seed N] [--trace out.json] [--svg out.svg] [--json]
//
// Output files are rendered in memory first and then written with write_output_file: regular
// files atomically (temporary file beside the target, then rename), so a failure never leaves a
// half-written file behind; devices and FIFOs are streamed to; `-` is standard output.
#include <unistd.h>

#include <algorithm>
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
    std::string schedule = "1f1b";
    std::size_t chunks = 2;
    double memory_limit_mb = std::numeric_limits<double>::infinity();
    bool search = false;
    std::uint64_t seed = 1;
    std::string trace_path, svg_path;
    bool json = false;
};

void run_simulate(const simulate_args& a, const std::set<std::string>& given) {
    const ps::schedule_name name = ps::parse_schedule_name(a.schedule);
    reject_unless(given, "--chunks", name == ps::schedule_name::interleaved,
                  "to --schedule " + a.schedule + " (only interleaved)");
    reject_unless(given, "--seed", a.search, "without --search-order");
    const bool trace_out = is_standard_output_path(a.trace_path), svg_out = is_standard_output_path(a.svg_path);
    if (a.trace_path == "-" && a.svg_path == "-")
        throw invalid_argument("--trace and --svg are both standard output ('-'): choose one");
    const bool to_stdout = trace_out || svg_out;
    const ps::scenario base = ps::read_scenario_json(a.scenario_path);
    try {
        base.validate();
    } catch (const invalid_argument& e) {
        throw input_error(a.scenario_path, 0, "", e.what());
    }

    ps::named_schedule_options opt;
    opt.chunks = a.chunks;
    opt.memory_limit_mb = a.memory_limit_mb;
    ps::scenario sc = ps::prepare_scenario(name, base, opt);

    std::vector<std::uint32_t> order(sc.microbatches);
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = static_cast<std::uint32_t>(j);
    ps::order_search_result search;
    if (a.search) {
        ps::order_search_options so;
        so.memory_limit_mb = a.memory_limit_mb;
        so.seed = a.seed;
        so.search_inflight_limit = name == ps::schedule_name::adaptive;
        search = ps::search_order_with(
            sc,
            [&](std::size_t limit) {
                auto o = opt;
                o.inflight_limit = limit;
                o.quick = true;  // the final schedule below runs the full adaptive search
                return ps::make_generator(name, o);
            },
            so);
        if (!search.feasible)
            throw error("--search-order: no micro-batch order of schedule '" + a.schedule + "' fits " +
                        std::to_string(a.memory_limit_mb) + " MB");
        order = search.order;
        opt.inflight_limit = search.inflight_limit;
        sc = ps::reorder(sc, order);
    }
    ps::pipeline_schedule sched = ps::make_generator(name, opt)(sc);
    ps::simulation_result res = ps::simulate(sc, sched);
    ps::require_finite(res);  // a non-finite figure is an error, never printed

    // Report micro-batches by their index in the scenario file.
    if (a.search) {
        for (auto& dev : sched.orders)
            for (auto& o : dev) o.mb = order[o.mb];
        for (auto& dev : res.timeline)
            for (auto& t : dev) t.o.mb = order[t.o.mb];
    }

    std::string trace_text, svg_text;
    if (!a.trace_path.empty()) {
        std::ostringstream ss;
        ps::write_chrome_trace(ss, res, sched);
        trace_text = ss.str();
    }
    if (!a.svg_path.empty()) {
        std::ostringstream ss;
        ps::svg_options so;
        so.memory_limit_mb = a.memory_limit_mb;
        ps::write_svg(ss, res, sched, so);
        svg_text = ss.str();
    }
    const double peak = *std::max_element(res.peak_memory_mb.begin(), res.peak_memory_mb.end());
    const bool limited = a.memory_limit_mb < std::numeric_limits<double>::infinity();
    nlohmann::json j = ps::simulation_to_json(res, sched);
    if (limited) {
        j["memory_limit_mb"] = a.memory_limit_mb;
        j["within_memory_limit"] = peak <= a.memory_limit_mb + 1e-6;
    }
    if (a.search) {
        j["microbatch_order"] = order;
        j["inflight_limit"] = search.inflight_limit;
        j["search_evaluations"] = search.evaluations;
    }
    if (!a.trace_path.empty()) write_output_file(a.trace_path, trace_text);
    if (!a.svg_path.empty()) write_output_file(a.svg_path, svg_text);

    // With --trace - or --svg - (standard output) the summary goes to standard error.
    std::FILE* out = to_stdout ? stderr : stdout;
    if (a.json) {
        std::fprintf(out, "%s\n", j.dump(2).c_str());
        return;
    }
    std::fprintf(out, "schedule %s on %zu devices (%zu micro-batches)\n", sched.name.c_str(), sched.placement.devices(),
                base.microbatches);
    std::fprintf(out, "makespan %.3f ms, lower bound %.3f ms (x%.3f)\n", res.makespan_ms, res.lower_bound_ms,
                res.makespan_over_lower_bound);
    for (std::size_t d = 0; d < res.peak_memory_mb.size(); ++d)
        std::fprintf(out, "device %zu: peak memory %.1f MB, bubble %.1f %%\n", d, res.peak_memory_mb[d],
                    100.0 * res.bubble_fraction[d]);
    if (limited)
        std::fprintf(out, "memory limit %.1f MB: %s\n", a.memory_limit_mb,
                    peak <= a.memory_limit_mb + 1e-6 ? "met" : "EXCEEDED");
}

}  // namespace

void register_simulate(CLI::App& app) {
    auto args = std::make_shared<simulate_args>();
    CLI::App* sub = app.add_subcommand("simulate", "Simulate a pipeline schedule on a scenario (JSON) file");
    sub->add_option("--scenario", args->scenario_path, "Scenario JSON file (docs/formats.md)")->required();
    sub->add_option("--schedule", args->schedule,
                    "gpipe|1f1b|interleaved|adaptive|zb-h1|merak-early|merak-last|merak-critical")
        ->required();
    sub->add_option("--chunks", args->chunks, "Model chunks per device for interleaved (default 2)")
        ->check(integer_in<std::size_t>(1, max_chunks));
    sub->add_option("--memory-limit-mb", args->memory_limit_mb,
                    "Per-device memory limit (MB): adaptive and zb-h1 plan under it, --search-order keeps to it")
        ->check(number_in(0, max_memory_mb, true));
    sub->add_flag("--search-order", args->search, "Search the micro-batch order (and adaptive's in-flight limit)");
    sub->add_option("--seed", args->seed, "Seed of --search-order (default 1)")
        ->check(integer_in<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
    sub->add_option("--trace", args->trace_path,
                    "Write a Chrome/Perfetto trace (JSON) here (- = standard output; the summary then goes to "
                    "standard error)");
    sub->add_option("--svg", args->svg_path,
                    "Write an SVG Gantt chart with the memory curve here (- = standard output, as --trace)");
    sub->add_flag("--json", args->json, "Print the result as JSON");
    sub->callback([args, sub] { run_simulate(*args, given_flags(*sub)); });
}

}  // namespace pipeplan::cli
