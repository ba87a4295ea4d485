// Micro-batch splitting on real batches and real profiles (single thread, default mode).
//   build/benchmarks/bench_batching --benchmark_min_time=0.05
// Targets: GPT-6.7B 65,536 tokens <= 5 ms, T5-11B 65,536 tokens <= 20 ms,
// GPT-6.7B 1,048,576 tokens <= 1 s. Skips (with a message) when ../shared/data is absent.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "batching/real_batches.hpp"
#include "pipeplan/batching.hpp"
#include "pipeplan/cost/profile.hpp"
#include "profile_models.hpp"

namespace {

namespace pb = pipeplan::batching;
using pipeplan::interpolation_mode;
using pipeplan::profile_cost_model;

struct scenario {
    const char* model_name;
    const char* lengths_file;
    int tp, stages, layers;
};
constexpr scenario gpt{"gpt_6.7b", "superni_gpt.csv", 2, 4, 8};
constexpr scenario t5{"t5_11b", "superni_llama.csv", 4, 4, 6};

void run(benchmark::State& state, const scenario& sc, long long tokens, pb::accounting_mode accounting,
         pb::ordering_method order = pb::ordering_method::automatic, double long_share = 0) {
    const auto mode = pb::profile_mode_for(accounting, interpolation_mode::recommended);
    const profile_cost_model* m = pipeplan::test::find_profile_model(sc.model_name, mode);
    if (!m) {
        state.SkipWithError("../shared/data is absent: no profiles or lengths to benchmark on");
        return;
    }
    const auto batch = pipeplan::test::draw_mixed_batch(sc.lengths_file, tokens, 42, long_share);
    pb::pipeline_config cfg;
    cfg.stages = sc.stages;
    cfg.layers_per_stage = sc.layers;
    cfg.tp = sc.tp;
    cfg.device_memory_mb = 36000;
    pb::split_options opt;
    opt.accounting = accounting;
    opt.order = order;
    pb::split_result r;
    pb::exact_split_stats stats;
    for (auto _ : state) {
        stats = {};
        r = pb::exact_split(*m, batch, cfg, opt, &stats);
        benchmark::DoNotOptimize(r.microbatches.data());
    }
    state.counters["samples"] = static_cast<double>(batch.size());
    state.counters["microbatches"] = static_cast<double>(r.microbatches.size());
    state.counters["objective_ms"] = r.objective_ms;
    state.counters["dp_solves"] = stats.capped_solves;
    state.counters["ranges"] = static_cast<double>(stats.range_entries);
    state.counters["orders"] = stats.orders;
}

void BM_split_gpt(benchmark::State& s) { run(s, gpt, s.range(0), pb::accounting_mode::pipeplan); }
void BM_split_t5(benchmark::State& s) { run(s, t5, s.range(0), pb::accounting_mode::pipeplan); }
void BM_split_gpt_dynapipe(benchmark::State& s) { run(s, gpt, s.range(0), pb::accounting_mode::dynapipe); }
void BM_split_t5_dynapipe(benchmark::State& s) { run(s, t5, s.range(0), pb::accounting_mode::dynapipe); }
void BM_split_t5_lexicographic(benchmark::State& s) {
    run(s, t5, s.range(0), pb::accounting_mode::pipeplan, pb::ordering_method::lexicographic);
}
void BM_split_t5_tour(benchmark::State& s) {
    run(s, t5, s.range(0), pb::accounting_mode::pipeplan, pb::ordering_method::tour);
}
// T5 on SuperNI with range(1) % synthetic long-target samples (draw_mixed_batch), both accountings.
void BM_split_t5_mixed(benchmark::State& s) {
    run(s, t5, s.range(0), pb::accounting_mode::pipeplan, pb::ordering_method::automatic, s.range(1) / 100.0);
}
void BM_split_t5_mixed_dynapipe(benchmark::State& s) {
    run(s, t5, s.range(0), pb::accounting_mode::dynapipe, pb::ordering_method::automatic, s.range(1) / 100.0);
}

// The ordering study (docs/batching.md): over 10 seeded T5 batches, the exact split objective on the
// lexicographic order, on each tour, and the default (best of the three), as counters: the
// relative change of the summed objective vs lexicographic (%, negative = better) and how many
// batches the default improves.
void BM_t5_ordering_study(benchmark::State& state) {
    const auto accounting = static_cast<pb::accounting_mode>(state.range(1));
    const auto mode = pb::profile_mode_for(accounting, interpolation_mode::recommended);
    const profile_cost_model* m = pipeplan::test::find_profile_model(t5.model_name, mode);
    if (!m) {
        state.SkipWithError("../shared/data is absent: no profiles or lengths to benchmark on");
        return;
    }
    pb::pipeline_config cfg;
    cfg.stages = t5.stages;
    cfg.layers_per_stage = t5.layers;
    cfg.tp = t5.tp;
    cfg.device_memory_mb = 36000;
    double lex = 0, tour1 = 0, tour4 = 0, best = 0, max_gain = 0;
    int improved = 0;
    for (auto _ : state) {
        lex = tour1 = tour4 = best = max_gain = 0;
        improved = 0;
        for (std::uint64_t seed = 1; seed <= 10; ++seed) {
            const auto batch = pipeplan::test::draw_batch(t5.lengths_file, state.range(0), seed);
            pb::split_options opt;
            opt.accounting = accounting;
            const double a = pb::exact_split(*m, batch, cfg, opt).objective_ms;
            opt.order = pb::ordering_method::lexicographic;
            const double l = pb::exact_split(*m, batch, cfg, opt).objective_ms;
            const pb::split_context<profile_cost_model> ctx(*m, batch, cfg, opt);
            for (const auto& rung : ctx.ladder()) {
                if (!ctx.singletons_fit(rung)) continue;
                tour4 += pb::exact_split_ordered(ctx, pb::order_samples(ctx.shapes(), true, pb::ordering_method::tour, 4), rung)
                             .objective_ms;
                tour1 += pb::exact_split_ordered(ctx, pb::order_samples(ctx.shapes(), true, pb::ordering_method::tour, 1), rung)
                             .objective_ms;
                break;
            }
            lex += l;
            best += a;
            improved += a < l ? 1 : 0;
            max_gain = std::max(max_gain, 100 * (l - a) / l);
        }
    }
    state.counters["tour_w1_vs_lex_pct"] = 100 * (tour4 - lex) / lex;
    state.counters["tour_w025_vs_lex_pct"] = 100 * (tour1 - lex) / lex;
    state.counters["default_vs_lex_pct"] = 100 * (best - lex) / lex;
    state.counters["default_max_gain_pct"] = max_gain;
    state.counters["batches_improved"] = improved;
}

}  // namespace

// Targets and the growth series in N (tokens per global batch).
BENCHMARK(BM_split_gpt)->Arg(65536)->Arg(131072)->Arg(262144)->Arg(524288)->Arg(1048576)->Unit(benchmark::kMillisecond);
// A large batch: 146,800,640 tokens, 115,541 samples of superni_gpt.csv (seed 42); one split per run.
BENCHMARK(BM_split_gpt)->Arg(146800640)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_split_t5)->Arg(65536)->Arg(131072)->Arg(262144)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_split_gpt_dynapipe)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_split_t5_dynapipe)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_split_t5_lexicographic)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_split_t5_tour)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_split_t5_mixed)->Args({65536, 25})->Args({65536, 50})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_split_t5_mixed_dynapipe)->Args({65536, 25})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_t5_ordering_study)
    ->Args({65536, 0})
    ->Args({65536, 1})
    ->Args({262144, 0})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
