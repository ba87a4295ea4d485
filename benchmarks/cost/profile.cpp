// Profile cost model: nanoseconds per interpolation query on the real A100 profiles.
//   build/benchmarks/bench_cost --benchmark_filter=profile --benchmark_min_time=0.05
// Skips (with a message) when ../shared/data is absent.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/cost/profile.hpp"
#include "profile_models.hpp"

namespace {

using pipeplan::component;
using pipeplan::interpolation_mode;
using pipeplan::layer_query;
using pipeplan::profile_cost_model;

// 4096 seeded random queries whose forward time is inside the profiled range: random tp,
// recompute, component, mbs in [1, 2048], lengths log-uniform in [16, 8192].
std::vector<layer_query> queries(const profile_cost_model& m) {
    std::mt19937 rng(12345);
    const bool t5 = m.is_encoder_decoder();
    std::vector<component> comps{component::encoder, component::postprocess};
    if (t5) comps.push_back(component::decoder);
    std::uniform_int_distribution<std::size_t> tp_pick(0, m.tp_degrees().size() - 1), comp_pick(0, comps.size() - 1);
    std::uniform_int_distribution<int> rc_pick(0, 2), mbs_pick(1, 64);
    std::uniform_real_distribution<double> log2_len(4.0, 13.0);
    std::vector<layer_query> out;
    while (out.size() < 4096) {
        layer_query q;
        q.tp = m.tp_degrees()[tp_pick(rng)];
        q.recompute = static_cast<pipeplan::recompute_mode>(rc_pick(rng));
        q.comp = comps[comp_pick(rng)];
        q.mbs = mbs_pick(rng);
        q.seqlen_tokens = static_cast<int>(std::exp2(log2_len(rng)));
        q.dec_seqlen_tokens = t5 ? static_cast<int>(std::exp2(log2_len(rng))) : 0;
        if (m.evaluate(q).forward_ms.ok()) out.push_back(q);
    }
    return out;
}

// One full evaluate(): forward, backward, stored and peak (four interpolations).
void BM_profile_evaluate(benchmark::State& state, const std::string& name, interpolation_mode mode) {
    const profile_cost_model* m = pipeplan::test::find_profile_model(name, mode);
    if (!m) {
        state.SkipWithError("../shared/data/cost_models not found (set PIPEPLAN_DATA_DIR)");
        return;
    }
    const std::vector<layer_query> qs = queries(*m);
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(m->evaluate(qs[i]));
        i = (i + 1) & (qs.size() - 1);
    }
    state.SetItemsProcessed(state.iterations());
}

// One metric (forward time): a single grid interpolation.
void BM_profile_forward_only(benchmark::State& state, const std::string& name, interpolation_mode mode) {
    const profile_cost_model* m = pipeplan::test::find_profile_model(name, mode);
    if (!m) {
        state.SkipWithError("../shared/data/cost_models not found (set PIPEPLAN_DATA_DIR)");
        return;
    }
    const std::vector<layer_query> qs = queries(*m);
    const auto scheme = pipeplan::scheme_of(mode);
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(m->metric(qs[i], pipeplan::cost_metric::forward_ms, scheme));
        i = (i + 1) & (qs.size() - 1);
    }
    state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(BM_profile_evaluate, gpt_linear, std::string("gpt_6.7b"), interpolation_mode::linear);
BENCHMARK_CAPTURE(BM_profile_evaluate, gpt_default, std::string("gpt_6.7b"), interpolation_mode::recommended);
BENCHMARK_CAPTURE(BM_profile_evaluate, t5_linear, std::string("t5_11b"), interpolation_mode::linear);
BENCHMARK_CAPTURE(BM_profile_evaluate, t5_default, std::string("t5_11b"), interpolation_mode::recommended);
BENCHMARK_CAPTURE(BM_profile_forward_only, gpt_linear, std::string("gpt_6.7b"), interpolation_mode::linear);
BENCHMARK_CAPTURE(BM_profile_forward_only, gpt_default, std::string("gpt_6.7b"), interpolation_mode::recommended);
BENCHMARK_CAPTURE(BM_profile_forward_only, t5_linear, std::string("t5_11b"), interpolation_mode::linear);
BENCHMARK_CAPTURE(BM_profile_forward_only, t5_default, std::string("t5_11b"), interpolation_mode::recommended);

}  // namespace

// bench_cost's main (Debian's `benchmark` dependency does not bring benchmark_main). Other
// cost benchmark files must not define another one.
BENCHMARK_MAIN();
