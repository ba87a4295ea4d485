// Runtime tier benchmarks (targets from issue 10):
//   BM_Dispatch/N              executor: checks + dispatch of N instructions to
//                              registered handlers, per instruction (items)         <= 1 us
//   BM_CpuIteration            CPU backend, tiny model, S = 4, M = 32, 1F1B: one
//                              training iteration from a plan (items = iterations)
//   BM_PrefetcherReadiness     a trainer consuming plans from plan_prefetcher
//                              (k = 2 ahead, real tiny-model planning, real CPU
//                              training): counter min_ready = fewest plans ready
//                              when the trainer asked for the next one              >= k
// Run: build/benchmarks/bench_runtime --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pipeplan/runtime/cpu/plans.hpp"
#include "pipeplan/runtime/cpu/trainer.hpp"
#include "pipeplan/runtime/prefetcher.hpp"

namespace {

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace pipeplan::runtime::cpu;

void BM_Dispatch(benchmark::State& st) {
    const auto n = static_cast<std::size_t>(st.range(0));
    plan::rank_plan p;
    p.header.devices = 1;
    p.program.rank = 0;
    plan::instruction user;
    user.kind = static_cast<plan::instr_kind>(200);
    p.program.instructions.assign(n, user);
    std::uint64_t calls = 0;
    handler_registry h;
    h.on(user.kind, [&calls](const plan::instruction& in, step_context&) { calls += in.mb + 1; });
    thread_hub hub(1);
    auto t = hub.endpoint(0);
    executor<thread_transport> ex(t, h, {timeout_ms(1000), false});
    for (auto _ : st) ex.run(p);
    benchmark::DoNotOptimize(calls);
    st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * n));
}
BENCHMARK(BM_Dispatch)->Arg(1000)->Arg(100000);

struct tiny_job {
    model_config c;
    std::vector<std::size_t> lengths;
    replica_split split{1};
    tiny_job() {
        c.blocks = 8;
        for (std::uint32_t j = 0; j < 32; ++j) {  // 32 micro-batches of 2 samples, 4-19 tokens
            lengths.push_back(4 + (j * 7) % 16);
            lengths.push_back(4 + (j * 11) % 16);
            split[0].push_back({2 * j, 2 * j + 1});
        }
    }
    [[nodiscard]] plan::execution_plan make_plan(std::uint64_t it) const {
        return plan_tiny(c, split, lengths, tiny_plan_options{schedule::schedule_name::one_f_one_b, 4, 1, it});
    }
};

void BM_CpuIteration(benchmark::State& st) {
    const tiny_job job;
    const auto plans = rank_plans(job.make_plan(0));
    cpu_cluster cluster(job.c, 4, sgd{0.01});
    for (auto _ : st) benchmark::DoNotOptimize(cluster.run(plans, job.lengths).loss);
    st.SetItemsProcessed(st.iterations());
}
BENCHMARK(BM_CpuIteration)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PrefetcherReadiness(benchmark::State& st) {
    const tiny_job job;
    constexpr std::size_t k = 2;
    cpu_cluster cluster(job.c, 4, sgd{0.01});
    std::size_t min_ready = k;
    double plans = 0;
    for (auto _ : st) {
        plan_prefetcher<plan::execution_plan> ahead([&](std::uint64_t it) { return job.make_plan(it); },
                                                   prefetch_options{2, k, 0, 12});
        for (std::uint64_t it = 0; it < 12; ++it) {
            if (it >= 2) min_ready = std::min(min_ready, ahead.ready());  // after the pipeline filled
            const auto p = ahead.next();
            benchmark::DoNotOptimize(cluster.run(rank_plans(*p), job.lengths).loss);
            plans += 1;
        }
    }
    st.counters["min_ready"] = static_cast<double>(min_ready);
    st.counters["k"] = static_cast<double>(k);
    st.SetItemsProcessed(static_cast<std::int64_t>(plans));
}
BENCHMARK(BM_PrefetcherReadiness)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
