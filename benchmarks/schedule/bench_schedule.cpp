// Schedule tier benchmarks (targets):
//   BM_Simulate1F1B/64/4096      simulate 1F1B, S = 64, M = 4096 (~524k ops)       <= 10.5 ms (50 M ops/s)
//   BM_Simulate1F1B_Reused/64/4096  the same, scratch and result reused            <= 5.2 ms (100 M ops/s)
//   BM_Adaptive/8/64             adaptive schedule incl. order discovery, S = 8,
//                                M = 64 variable micro-batches                     <= 1 ms
//   BM_OrderSearch/4/25          order search, S = 4, 25 micro-batches, memory limit <= 5 ms
// Adaptive at scale (order discovery in O(ops · log)), single thread,
// with the memory limit above (few micro-batches in flight) and without one (BM_AdaptiveNoLimit:
// every micro-batch in flight on the first stage, the case linear scans make M^2):
//   BM_Adaptive{,NoLimit}/4/200000    <= 5 s (518 s with linear scans)
//   BM_Adaptive{,NoLimit}/64/4096     <= 1 s
//   BM_Adaptive{,NoLimit}/1024/2048   (126 s with linear scans)
//   BM_Adaptive{,NoLimit}/4/{25k..200k}  time grows ~linearly with M
//   BM_Adaptive{,NoLimit}/{256,512,1024}/65  one discovery of a deep pipeline: ~linear in S
//   BM_Simulate1F1B_Reused/{256,512,1024}/65  the replay of a deep pipeline: linear in S
// Run: build/benchmarks/bench_schedule --benchmark_filter='BM_Adaptive.*/(4/|64|1024)'
// The planner's case (the schedule phase of a 65k-token plan runs hundreds of small
// discoveries): S = 4, 25 unequal micro-batches, messages over 100 Gbit/s, a memory limit that
// binds (BM_DiscoverySmall/0: adaptive, its 9 preference candidates; /1: adaptive as the order
// search evaluates it, 3 uniform candidates; /2: zb-h1, one discovery):
// Run: build/benchmarks/bench_schedule --benchmark_filter=BM_DiscoverySmall
//   BM_ZbV/8/64                  ZB-V incl. order discovery, S = 8, M = 64            <= 2 ms
//   BM_VHalfMin/{0,1}            V-Half / V-Min incl. discovery and building block, S 8, M 64
//                                (the reordered block kept per thread after the first run)
//   BM_VBlockOrders/{0,1}/S/M    V-Half / V-Min building block reordered anew (what a new
//                                (block, M) costs: the first plan of a process pays it)
// Run: build/benchmarks/bench_schedule --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "pipeplan/schedule.hpp"

namespace {

namespace ps = pipeplan::schedule;

ps::scenario variable(std::size_t S, std::size_t M, std::uint64_t seed) {
    ps::splitmix64 rng(seed);
    std::vector<double> base(S), mult(M);
    for (auto& b : base) b = 1.0 + static_cast<double>(rng() % 1000) / 500.0;
    for (auto& m : mult) m = 0.3 + static_cast<double>(rng() % 1000) / 600.0;
    return ps::scaled_scenario(base, mult, 2.0, 4000, 800, 1600);
}

/// variable() with S = range(0) stages and M = range(1) micro-batches.
ps::scenario variable_of(const benchmark::State& st, std::uint64_t seed) {
    return variable(static_cast<std::size_t>(st.range(0)), static_cast<std::size_t>(st.range(1)), seed);
}

/// Runs the generator `g` on `sc` in every iteration.
template <class G>
void run_generator(benchmark::State& st, const G& g, const ps::scenario& sc) {
    for (auto _ : st) {
        auto s = g(sc);
        benchmark::DoNotOptimize(s.orders.data());
    }
}

void BM_Simulate1F1B(benchmark::State& st) {
    const ps::scenario sc = variable_of(st, 1);
    const ps::pipeline_schedule s = ps::one_f_one_b{}(sc);
    for (auto _ : st) {
        auto r = ps::simulate(sc, s);
        benchmark::DoNotOptimize(r.makespan_ms);
    }
    st.counters["ops"] = static_cast<double>(2 * sc.stages * sc.microbatches);
}
BENCHMARK(BM_Simulate1F1B)->Args({64, 4096})->Args({4, 200000})->Args({1024, 2048})->Unit(benchmark::kMillisecond);

// The same with a reused simulator (scratch memory and result kept between runs).
void BM_Simulate1F1B_Reused(benchmark::State& st) {
    const ps::scenario sc = variable_of(st, 1);
    const ps::pipeline_schedule s = ps::one_f_one_b{}(sc);
    ps::simulator sim;
    for (auto _ : st) {
        const auto& r = sim.run(sc, s);
        benchmark::DoNotOptimize(r.makespan_ms);
    }
}
BENCHMARK(BM_Simulate1F1B_Reused)->Args({64, 4096})->Unit(benchmark::kMillisecond);
// Deep pipelines at the micro-batch count of a 65,536-token GPT batch (65): time per op stays
// flat as S grows (the replay is O(ops + S·M)).
BENCHMARK(BM_Simulate1F1B_Reused)->Args({256, 65})->Args({512, 65})->Args({1024, 65})->Unit(benchmark::kMillisecond);

void BM_Adaptive(benchmark::State& st) {
    ps::adaptive a;
    a.memory_limit_mb = 4000 + 6 * 1600;
    run_generator(st, a, variable_of(st, 2));
}
BENCHMARK(BM_Adaptive)->Args({8, 64})->Unit(benchmark::kMicrosecond);
void adaptive_at_scale(benchmark::internal::Benchmark* b) {
    for (long m : {25000, 50000, 100000, 200000}) b->Args({4, m});
    b->Args({64, 4096})->Args({1024, 2048})->Unit(benchmark::kMillisecond);
    // Deep pipelines with 65 micro-batches (one 65,536-token GPT batch): one order discovery per
    // S, the unit the planner's schedule phase repeats at S = 256, 512, 1024.
    for (long S : {256, 512, 1024}) b->Args({S, 65});
}
BENCHMARK(BM_Adaptive)->Apply(adaptive_at_scale);

void BM_AdaptiveNoLimit(benchmark::State& st) { run_generator(st, ps::adaptive{}, variable_of(st, 2)); }
BENCHMARK(BM_AdaptiveNoLimit)->Apply(adaptive_at_scale);

// variable() with the communication of a real plan: each micro-batch's activation is sent
// over 100 Gbit/s links.
ps::scenario small_with_network(std::size_t S, std::size_t M, std::uint64_t seed) {
    ps::scenario sc = variable(S, M, seed);
    sc.activation_mb.resize(M);
    for (std::size_t j = 0; j < M; ++j) sc.activation_mb[j] = 25.0 * sc.fwd(j, 0);
    sc.network.bandwidth_gbps = 100.0;
    return sc;
}

void BM_DiscoverySmall(benchmark::State& st) {
    constexpr std::size_t S = 4, M = 25;
    const ps::scenario sc = small_with_network(S, M, 5);
    const double limit_mb = 4000 + 4 * 1600;  // binds: adaptive 456 ms, 277 ms without a limit
    ps::adaptive a;
    a.memory_limit_mb = limit_mb;
    a.search_preferences = st.range(0) == 0;
    ps::zb_h1 z;
    z.memory_limit_mb = limit_mb;
    std::size_t ops = 0;
    for (auto _ : st) {
        const ps::pipeline_schedule s = st.range(0) == 2 ? z(sc) : a(sc);
        ops = 0;
        for (const auto& o : s.orders) ops += o.size();
        benchmark::DoNotOptimize(s.orders.data());
    }
    st.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_DiscoverySmall)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// ZB-V on S = 8 devices (16 chunks placed as a V), M = 64 variable micro-batches, under the
// memory limit of BM_Adaptive: three discoveries in stage-memory mode, plus the simulation of
// ZB-V's table. Target <= 2 ms. Run: build/benchmarks/bench_schedule --benchmark_filter=BM_ZbV
void BM_ZbV(benchmark::State& st) {
    ps::zb_v z;
    z.memory_limit_mb = 4000 + 6 * 1600;
    run_generator(st, z, ps::split_into_v_chunks(variable_of(st, 2)));
}
BENCHMARK(BM_ZbV)->Args({8, 64})->Unit(benchmark::kMicrosecond);

// V-Half (/0) and V-Min (/1) on the scenario of BM_ZbV: three discoveries in stage-memory mode
// under the activation share, plus the building block's order and its simulation.
// Run: build/benchmarks/bench_schedule --benchmark_filter=BM_VHalfMin
void BM_VHalfMin(benchmark::State& st) {
    const ps::scenario sc = ps::split_into_v_chunks(variable(8, 64, 2));
    ps::zb_v z;
    z.name = st.range(0) == 0 ? "v-half" : "v-min";
    z.activation_share = st.range(0) == 0 ? 0.5 : 1.0 / 3.0;
    z.memory_limit_mb = 4000 + 6 * 1600;
    double makespan_ms = 0.0;
    for (auto _ : st) {
        auto s = z(sc);
        makespan_ms = s.replay->makespan_ms;
        benchmark::DoNotOptimize(s.orders.data());
    }
    st.counters["makespan_ms"] = makespan_ms;
}
BENCHMARK(BM_VHalfMin)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The device orders of V-Half's (/0) or V-Min's (/1) building block for S devices and M
// micro-batches, filled, reordered and squeezed anew each time (v_block_orders() keeps the last
// few per thread). Run: build/benchmarks/bench_schedule --benchmark_filter=BM_VBlockOrders
void BM_VBlockOrders(benchmark::State& st) {
    const auto S = static_cast<std::size_t>(st.range(1)), M = static_cast<std::size_t>(st.range(2));
    const std::vector<ps::v_block_slots> block = st.range(0) == 0 ? ps::v_half_block(S) : ps::v_min_block(S);
    for (auto _ : st) {
        ps::detail::v_block_builder b(block, M);
        b.fill_and_reorder();
        const ps::device_orders o = b.orders();
        benchmark::DoNotOptimize(o.data());
    }
}
BENCHMARK(BM_VBlockOrders)->Args({0, 8, 64})->Args({1, 8, 64})->Args({0, 16, 65})->Args({1, 16, 65})->Unit(benchmark::kMicrosecond);

void BM_OrderSearch(benchmark::State& st) {
    const ps::scenario sc = variable_of(st, 3);
    const double limit = 4000 + 4 * 1600;
    ps::order_search_options opt;
    opt.memory_limit_mb = limit;
    opt.search_inflight_limit = true;
    std::size_t evals = 0;
    for (auto _ : st) {
        auto r = ps::search_order_with(
            sc,
            [&](std::size_t l) {
                ps::adaptive a;
                a.memory_limit_mb = limit;
                a.inflight_limit = l;
                a.search_preferences = false;  // quick inner evaluations
                return a;
            },
            opt);
        evals = r.evaluations;
        benchmark::DoNotOptimize(r.makespan_ms);
    }
    st.counters["evaluations"] = static_cast<double>(evals);
}
BENCHMARK(BM_OrderSearch)->Args({4, 25})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
