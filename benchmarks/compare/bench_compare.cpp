// `pipeplan compare`'s acceptance run: GPT-6.7B (S 4, tp 2, 8 layers per stage) and T5-11B
// (S 4, tp 4, 6 layers per stage) profiles, 36,000 MB per device, the SuperNI mixture
// (superni_gpt.csv / superni_llama.csv), 65,536-token global batches, max sequence lengths
// 512..8192, 10 iterations each, every method with its default knob grid, one thread.
//   build/benchmarks/bench_compare --benchmark_min_time=0.01
// Target: the whole run (both models) <= 60 s wall. Counters: pipeplan's and dynapipe's speedup
// over the best baseline per max sequence length (s<len>_pipeplan, s<len>_dynapipe) and the
// number of settings where pipeplan < the best baseline or dynapipe > pipeplan (must be 0).
// Measured: 12.4 s wall, 2.8 s CPU for both models (2-core machine at load average 25).
// Skips (with a message) when ../shared/data is absent.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "pipeplan/batching/draw.hpp"
#include "pipeplan/compare/sweep.hpp"
#include "profile_models.hpp"

namespace {

namespace pc = pipeplan::compare;

struct bench_setup {
    const char* tag;  ///< counter prefix
    const char* model;
    const char* lengths;
    int tp, stages, layers_per_stage, hidden;
};
constexpr bench_setup gpt{"gpt", "gpt_6.7b", "superni_gpt.csv", 2, 4, 8, 4096};
constexpr bench_setup t5{"t5", "t5_11b", "superni_llama.csv", 4, 4, 6, 1024};

pc::compare_options acceptance_options(const bench_setup& s) {
    pc::compare_options o;
    o.planner.config.stages = s.stages;
    o.planner.config.layers_per_stage = s.layers_per_stage;
    o.planner.config.tp = s.tp;
    o.planner.config.device_memory_mb = 36000;
    o.planner.hidden_size = s.hidden;
    o.settings.clear();
    for (int len : {512, 1024, 2048, 4096, 8192}) o.settings.push_back({len, 65536});
    o.iterations = 10;
    o.draw.seed = 1;
    return o;
}

/// Runs one model's sweep; adds its speedups and property violations to the counters.
void run_one(benchmark::State& state, const bench_setup& s, const pipeplan::profile_cost_model& m) {
    const auto dir = pipeplan::test::shared_data_dir();
    const auto pool = pipeplan::batching::read_length_pool({*dir / "lengths" / s.lengths});
    const pc::compare_report rep = pc::run_compare(m, pool, acceptance_options(s));
    double violations = 0;
    for (const auto& st : rep.settings) {
        const auto& pp = st.methods[static_cast<std::size_t>(pc::method::pipeplan)];
        const auto& dyn = st.methods[static_cast<std::size_t>(pc::method::dynapipe)];
        const std::string key = std::string(s.tag) + "_s" + std::to_string(st.point.max_seqlen_tokens);
        state.counters[key + "_pipeplan"] = pp.speedup_over_best_baseline;
        state.counters[key + "_dynapipe"] = dyn.speedup_over_best_baseline;
        if (pp.feasible && pp.speedup_over_best_baseline < 1.0 - 1e-12) ++violations;
        if (dyn.feasible && (!pp.feasible || dyn.tokens_per_s > pp.tokens_per_s * (1 + 1e-12))) ++violations;
    }
    state.counters["violations"] = state.counters["violations"] + violations;
}

void BM_compare_acceptance(benchmark::State& state) {
    const auto* g = pipeplan::test::find_profile_model(gpt.model, pipeplan::interpolation_mode::recommended);
    const auto* t = pipeplan::test::find_profile_model(t5.model, pipeplan::interpolation_mode::recommended);
    if (!g || !t || !pipeplan::test::shared_data_dir()) {
        state.SkipWithError("../shared/data is absent: no profiles or lengths to compare on");
        return;
    }
    for (auto _ : state) {
        state.counters["violations"] = 0;
        run_one(state, gpt, *g);
        run_one(state, t5, *t);
    }
}
BENCHMARK(BM_compare_acceptance)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
