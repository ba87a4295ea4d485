// `pipeplan partition`: PipeDream's hierarchical optimizer on a layer graph (graph.txt).
//
//   pipeplan partition --graph FILE -n N [N ...] [-b B [B ...]] [--straight]
//                      [--activation-compression R] [--memory-mb M] [--out FILE] [--json]
//
// Levels are given lowest first, as PipeDream's -n / -b; -b defaults to 1e9 B/s per level.
// --out writes the graph with a stage_id on every layer (atomically).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/partition/json.hpp"
#include "pipeplan/partition/pipedream.hpp"

namespace pipeplan::cli {

namespace {

namespace pp = pipeplan::partition;

constexpr int max_workers_per_level = 4096;           ///< -n: workers of one level
constexpr std::size_t max_levels = 16;                ///< levels of -n
constexpr double max_bandwidth_bytes_per_s = 1e15;    ///< -b (8 Pbit/s)
constexpr double max_compression = 1e6;               ///< --activation-compression

struct partition_args {
    std::string graph_path;
    std::vector<int> workers;
    std::vector<double> bandwidths;
    bool straight = false;
    double compression = 1.0;
    std::optional<double> memory_mb;
    std::string out_path;
    bool json = false;
};

void print_text(const pp::pipedream_result& r) {
    std::printf("antichain states: %zu\n", r.states);
    for (std::size_t l = r.levels.size(); l-- > 0;) {  // top level first, as PipeDream prints
        const auto& lv = r.levels[l];
        std::printf("level %d: %d workers at %.3g B/s\n", lv.level, lv.workers, lv.bandwidth_bytes_per_s);
        std::printf("  (start, end) replicas  compute_s  comm_s  transfer_s\n");
        for (const auto& s : lv.stages)
            std::printf("  (%zu, %zu) x%d  %.6f  %.6f  %.6f\n", s.start, s.end, s.replicas, s.compute_ms / 1e3,
                        s.comm_ms / 1e3, s.transfer_ms / 1e3);
        std::printf("  bottleneck stage %.6f s\n", lv.bottleneck_stage_ms / 1e3);
    }
    std::printf("time per minibatch %.9g s; data parallelism %.9g s; speedup over data parallelism %.4fx\n",
                r.time_per_minibatch_ms / 1e3, r.data_parallel_ms / 1e3, r.speedup_over_dp());
}

void run_partition(const partition_args& a) {
    pp::pipedream_options opt;
    if (a.workers.size() > max_levels)
        throw invalid_argument("-n gives " + std::to_string(a.workers.size()) + " levels; at most " +
                               std::to_string(max_levels) + " are supported");
    if (!a.bandwidths.empty() && a.bandwidths.size() != a.workers.size())
        throw invalid_argument("-b needs one bandwidth per level of -n (" + std::to_string(a.workers.size()) +
                               "), got " + std::to_string(a.bandwidths.size()));
    for (std::size_t l = 0; l < a.workers.size(); ++l)
        opt.levels.push_back({a.workers[l], a.bandwidths.empty() ? 1e9 : a.bandwidths[l]});
    opt.straight_pipeline = a.straight;
    opt.activation_compression = a.compression;
    if (a.memory_mb) opt.memory_limit_bytes = *a.memory_mb * 1e6;  // range-checked by the flag
    opt.validate();
    auto g = pp::read_layer_graph(a.graph_path);
    const auto dag = pp::build_antichain_dag(g);
    const auto r = pp::optimize_pipedream(dag, opt);
    if (!a.out_path.empty()) {
        pp::assign_stages(g, dag, r);
        pp::write_layer_graph(a.out_path, g);
    }
    if (a.json) {
        std::printf("%s\n", nlohmann::json(r).dump(2).c_str());
        return;
    }
    print_text(r);
}

}  // namespace

void register_partition(CLI::App& app) {
    auto args = std::make_shared<partition_args>();
    CLI::App* sub = app.add_subcommand("partition", "Partition a layer graph (PipeDream graph.txt) into pipeline stages");
    sub->add_option("--graph", args->graph_path, "Layer graph in PipeDream's graph.txt format")->required();
    sub->add_option("-n,--workers", args->workers, "Workers per level, lowest level first")
        ->required()
        ->check(integer_in(1, max_workers_per_level));
    sub->add_option("-b,--bandwidth", args->bandwidths, "Bandwidth per level in bytes/s (default 1e9 each)")
        ->check(number_in(0, max_bandwidth_bytes_per_s, true));
    sub->add_flag("--straight", args->straight, "Straight pipeline: no stage replication");
    sub->add_option("--activation-compression", args->compression, "Activation compression ratio (default 1)")
        ->check(number_in(0, max_compression, true));
    sub->add_option("--memory-mb", args->memory_mb, "Memory per worker (MB) that stashed data must fit")
        ->check(number_in(0, max_memory_mb, true));
    sub->add_option("--out", args->out_path, "Write the graph with stage_id annotations here");
    sub->add_flag("--json", args->json, "Print the result as JSON");
    sub->callback([args] { run_partition(*args); });
}

}  // namespace pipeplan::cli
