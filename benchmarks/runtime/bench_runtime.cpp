// Runtime tier benchmarks (targets):
//   BM_Dispatch/N              executor: checks + dispatch of N instructions to
//                              registered handlers, per instruction (items)         <= 1 us
//   BM_CpuIteration            CPU backend, tiny model, S = 4, M = 32, 1F1B: one
//                              training iteration from a plan (items = iterations)
//   BM_PrefetcherReadiness/k   a trainer consuming plans from plan_prefetcher (k
//                              ahead, 2 planner threads, real tiny-model planning)
//                              while training is emulated by a sleep of 4x the
//                              measured planning time (planning faster than
//                              training, without competing for cores): counters
//                              min_ready / mean_ready = plans ready when the trainer
//                              asked for the next one, plan_ms, train_ms             min_ready >= k
// Run: build/benchmarks/bench_runtime --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
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
    p.header.predicted_peak_memory_mb = {0.0};  // one per rank (the header rules)
    p.program.rank = 0;
    plan::instruction user;
    user.kind = static_cast<plan::instr_kind>(200);
    p.program.instructions.assign(n, user);
    std::uint64_t calls = 0;
    handler_registry h;
    h.on(user.kind, [&calls](const plan::instruction& in, step_context&) { calls += in.microbatch + 1; });
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

/// Median wall time of planning one iteration of `job`, in ms.
double median_plan_ms(const tiny_job& job) {
    std::vector<double> ms;
    for (std::uint64_t it = 0; it < 5; ++it) {
        const auto t0 = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(job.make_plan(it).programs.size());
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

void BM_PrefetcherReadiness(benchmark::State& st) {
    const tiny_job job;
    const auto k = static_cast<std::size_t>(st.range(0));
    constexpr std::uint64_t count = 20;
    const double plan_ms = median_plan_ms(job);
    const auto train = std::chrono::duration<double, std::milli>(std::max(5.0, 4.0 * plan_ms));
    std::size_t min_ready = k, samples = 0;
    double sum_ready = 0;
    for (auto _ : st) {
        plan_prefetcher<plan::execution_plan> ahead([&](std::uint64_t it) { return job.make_plan(it); },
                                                   prefetch_options{2, k, 0, count});
        for (std::uint64_t it = 0; it < count; ++it) {
            // In steady state: after the first k training steps filled the window, and while k
            // iterations remain to plan ahead.
            if (it >= k && it + k <= count) {
                const std::size_t r = ahead.ready();
                min_ready = std::min(min_ready, r);
                sum_ready += static_cast<double>(r);
                ++samples;
            }
            const auto p = ahead.next();
            benchmark::DoNotOptimize(p->programs.size());
            std::this_thread::sleep_for(train);  // the training step
        }
    }
    st.counters["k"] = static_cast<double>(k);
    st.counters["min_ready"] = static_cast<double>(min_ready);
    st.counters["mean_ready"] = samples ? sum_ready / static_cast<double>(samples) : 0.0;
    st.counters["plan_ms"] = plan_ms;
    st.counters["train_ms"] = train.count();
}
BENCHMARK(BM_PrefetcherReadiness)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
