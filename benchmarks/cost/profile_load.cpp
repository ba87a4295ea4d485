// Profile loading: parse + grouping time of a generated 5 MB profile with
// thousands of distinct tp degrees (once quadratic in them), and of the real profiles.
//   build/benchmarks/bench_cost --benchmark_filter=profile_load --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <string>

#include "pipeplan/cost/profile.hpp"
#include "support.hpp"

namespace {

struct profile_text {
    std::string timing = "tp,recompute,component,phase,enc_seqlen,dec_seqlen,mbs,time_ms\n";
    std::string activation = "tp,recompute,component,kind,enc_seqlen,dec_seqlen,mbs,memory_mb\n";
    std::string state = "tp,recompute,component,memory_mb\n";
};

// `tps` distinct tp degrees, each with a 2 x 4 grid (mbs x enc_seqlen) of both phases and kinds:
// 16 rows of about 40 bytes per tp, so 8,000 tps make a 5 MB timing + activation profile.
profile_text many_tp_profile(int tps) {
    profile_text p;
    for (int tp = 1; tp <= tps; ++tp) {
        const std::string t = std::to_string(tp);
        for (int mbs : {1, 2})
            for (int s : {128, 256, 512, 1024}) {
                const std::string at = "," + std::to_string(s) + ",0," + std::to_string(mbs) + ",";
                const std::string v = std::to_string(0.001 * s * mbs);
                p.timing += t + ",none,encoder,forward" + at + v + "\n" + t + ",none,encoder,backward" + at + v + "\n";
                p.activation += t + ",none,encoder,stored" + at + v + "\n" + t + ",none,encoder,peak" + at + v + "\n";
            }
        p.state += t + ",none,encoder,100\n" + t + ",none,embedding,50\n";
    }
    return p;
}

void BM_profile_load_many_tp(benchmark::State& state) {
    const profile_text p = many_tp_profile(static_cast<int>(state.range(0)));
    for (auto _ : state)
        benchmark::DoNotOptimize(pipeplan::profile_cost_model::parse(p.timing, p.activation, p.state));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(p.timing.size() + p.activation.size() + p.state.size()));
}
BENCHMARK(BM_profile_load_many_tp)->Arg(1000)->Arg(8000)->Unit(benchmark::kMillisecond);

void BM_profile_load_real(benchmark::State& state, const std::string& name) {
    const auto dir = pipeplan::test::shared_data_dir();
    if (!dir) {
        state.SkipWithError("../shared/data/cost_models not found (set PIPEPLAN_DATA_DIR)");
        return;
    }
    for (auto _ : state) benchmark::DoNotOptimize(pipeplan::profile_cost_model::load(*dir / "cost_models", name));
}
BENCHMARK_CAPTURE(BM_profile_load_real, gpt, std::string("gpt_6.7b"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_profile_load_real, t5, std::string("t5_11b"))->Unit(benchmark::kMillisecond);

}  // namespace
