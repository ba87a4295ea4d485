// Execution plans: the whole planner on real batches and profiles, and lowering + validation
// alone (single thread).
//   build/benchmarks/bench_plan --benchmark_min_time=0.05
// BM_plan_*: one planner re-planning one batch; *_fresh: a new planner per iteration (one
// `pipeplan plan` run, cold shape-cost cache); *_new_batches: one planner, 8 seeded batches in turn.
// Targets (issue 9): GPT-6.7B 65,536 tokens (S 4, tp 2, L 8, 36 GB) <= 10 ms, T5-11B 65,536
// tokens (S 4, tp 4, L 6) <= 25 ms, 1,048,576 tokens <= 200 ms, lowering + validation S 8 M 64
// <= 1 ms, plans <= 64 KB per rank (counter max_rank_bytes). Counters: makespan / lower bound,
// worst arena / live set. Skips (with a message) when ../shared/data is absent.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "batching/real_batches.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"
#include "profile_models.hpp"

namespace {

namespace pp = pipeplan::plan;

struct setup {
    const char* model_name;
    const char* lengths_file;
    int tp, stages, layers, hidden;
};
constexpr setup gpt{"gpt_6.7b", "superni_gpt.csv", 2, 4, 8, 4096};
constexpr setup t5{"t5_11b", "superni_llama.csv", 4, 4, 6, 1024};

/// How the planner meets its batches: one planner re-planning the same batch (its shape-cost
/// cache warm after the first iteration), a fresh planner per iteration (what one `pipeplan
/// plan` run pays), or one planner cycling through 8 different seeded batches (a training run).
enum class reuse { same_batch, fresh_planner, new_batches };

void run_planner(benchmark::State& state, const setup& s, long long tokens, reuse mode = reuse::same_batch) {
    const auto* m = pipeplan::test::find_profile_model(s.model_name, pipeplan::interpolation_mode::recommended);
    if (!m) {
        state.SkipWithError("../shared/data is absent: no profiles or lengths to benchmark on");
        return;
    }
    std::vector<std::vector<pipeplan::batching::sample>> batches;
    for (std::uint64_t seed = 42; seed < (mode == reuse::new_batches ? 50u : 43u); ++seed)
        batches.push_back(pipeplan::test::draw_batch(s.lengths_file, tokens, seed));
    pp::planner_options o;
    o.config.stages = s.stages;
    o.config.layers_per_stage = s.layers;
    o.config.tp = s.tp;
    o.config.device_memory_mb = 36000;
    o.hidden_size = s.hidden;
    pp::planner<pipeplan::profile_cost_model> planner(*m, o);
    pp::plan_result r;
    std::size_t next = 0;
    for (auto _ : state) {
        if (mode == reuse::fresh_planner) {
            pp::planner<pipeplan::profile_cost_model> fresh(*m, o);
            r = fresh.plan(batches.front());
        } else {
            r = planner.plan(batches[next++ % batches.size()]);
        }
        benchmark::DoNotOptimize(r.plan.programs.data());
    }
    std::size_t max_bytes = 0;
    double worst_arena = 1.0;
    for (std::size_t k = 0; k < r.plan.programs.size(); ++k) {
        max_bytes = std::max(max_bytes, pp::to_binary(pp::share_of(r.plan, k)).size());
        worst_arena = std::max(worst_arena, r.arena_mb[k] / r.live_peak_mb[k]);
    }
    state.counters["microbatches"] = static_cast<double>(r.plan.header.microbatches.size());
    state.counters["makespan_over_lb"] = r.makespan_ms / r.lower_bound_ms;
    state.counters["arena_over_live"] = worst_arena;
    state.counters["max_rank_bytes"] = static_cast<double>(max_bytes);
    state.counters["split_ms"] = r.times.split_ms;
    state.counters["schedule_ms"] = r.times.schedule_ms;
    state.counters["lower_ms"] = r.times.lower_ms;
}

void BM_plan_gpt(benchmark::State& s) { run_planner(s, gpt, s.range(0)); }
void BM_plan_t5(benchmark::State& s) { run_planner(s, t5, s.range(0)); }
void BM_plan_gpt_fresh(benchmark::State& s) { run_planner(s, gpt, s.range(0), reuse::fresh_planner); }
void BM_plan_t5_fresh(benchmark::State& s) { run_planner(s, t5, s.range(0), reuse::fresh_planner); }
void BM_plan_gpt_new_batches(benchmark::State& s) { run_planner(s, gpt, s.range(0), reuse::new_batches); }
void BM_plan_t5_new_batches(benchmark::State& s) { run_planner(s, t5, s.range(0), reuse::new_batches); }

/// Lowering + validation alone: 1F1B, S stages, M micro-batches of seeded sizes.
void BM_lower_validate(benchmark::State& state) {
    const auto S = static_cast<std::size_t>(state.range(0)), M = static_cast<std::size_t>(state.range(1));
    pipeplan::splitmix64 rng(7);
    std::vector<double> mult, base(S, 1.0);
    for (std::size_t j = 0; j < M; ++j) mult.push_back(1.0 + static_cast<double>(rng.below(300)) / 100.0);
    auto sc = pipeplan::schedule::scaled_scenario(base, mult, 2.0, 100.0, 10.0, 12.0);
    sc.activation_mb = mult;
    const auto sched = pipeplan::schedule::one_f_one_b{}(sc);
    std::size_t instructions = 0;
    for (auto _ : state) {
        const pp::execution_plan p = pp::lower(sc, sched);
        const auto rep = pp::validate(p);
        if (!rep.ok()) state.SkipWithError("invalid plan");
        instructions = 0;
        for (const auto& prog : p.programs) instructions += prog.instructions.size();
        benchmark::DoNotOptimize(rep.violations.data());
    }
    state.counters["instructions"] = static_cast<double>(instructions);
}

}  // namespace

BENCHMARK(BM_plan_gpt)->Arg(65536)->Arg(1048576)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_gpt_fresh)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5_fresh)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_gpt_new_batches)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5_new_batches)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lower_validate)->Args({8, 64})->Args({4, 32})->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
