// Benchmarks of the energy tier: the Perseus frontier (Phillips–Dessouky min cuts) of 1F1B and
// adaptive schedules on seeded variable-size micro-batches with the A100 DVFS profile, and its
// growth with the number of computations and of frequencies.
//   build/benchmarks/bench_energy --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <cstddef>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/energy/frontier.hpp"
#include "pipeplan/schedule.hpp"

namespace {

namespace ps = pipeplan::schedule;
namespace pe = pipeplan::energy;

/// S stages, M micro-batches of seeded sizes (0.3x..2x), backward twice the forward.
ps::scenario make_scenario(std::size_t S, std::size_t M, std::uint64_t seed = 1) {
    pipeplan::splitmix64 rng(seed);
    std::vector<double> mult(M);
    for (auto& m : mult) m = 0.3 + 1.7 * static_cast<double>(rng() >> 11) / static_cast<double>(1ull << 53);
    return ps::scaled_scenario(std::vector<double>(S, 2.0), mult, 2.0, 1000.0, 100.0, 200.0);
}

ps::pipeline_schedule make_schedule(const ps::scenario& sc, bool adaptive) {
    return adaptive ? ps::pipeline_schedule(ps::adaptive{}(sc)) : ps::pipeline_schedule(ps::one_f_one_b{}(sc));
}

void run_frontier(benchmark::State& st, const ps::scenario& sc, const ps::pipeline_schedule& s,
                  const pe::energy_profile& prof) {
    std::size_t points = 0, iterations = 0, ops = 0;
    for (auto _ : st) {
        const pe::energy_problem p = pe::make_energy_problem(sc, s, prof);
        const pe::frontier_result r = pe::compute_frontier(p);
        benchmark::DoNotOptimize(r.frontier.data());
        points = r.frontier.size();
        iterations = r.iterations;
        ops = p.size();
    }
    st.counters["ops"] = static_cast<double>(ops);
    st.counters["frontier_points"] = static_cast<double>(points);
    st.counters["pd_steps"] = static_cast<double>(iterations);
}

/// Frontier of 1F1B (arg 0) or adaptive (arg 1) with S = range(1), M = range(2).
void BM_frontier(benchmark::State& st) {
    const ps::scenario sc = make_scenario(static_cast<std::size_t>(st.range(1)), static_cast<std::size_t>(st.range(2)));
    const ps::pipeline_schedule s = make_schedule(sc, st.range(0) == 1);
    run_frontier(st, sc, s, pe::a100_profile());
}
BENCHMARK(BM_frontier)
    ->ArgNames({"adaptive", "S", "M"})
    ->Args({0, 4, 16})
    ->Args({1, 4, 16})
    ->Args({0, 8, 64})
    ->Args({1, 8, 64})
    ->Args({0, 4, 8})
    ->Args({0, 4, 32})
    ->Args({0, 8, 32})
    ->Args({0, 8, 128})
    ->Unit(benchmark::kMillisecond);

/// Growth with the number of frequencies: S = 4, M = 16, 1F1B, the A100 model with a clock
/// step giving range(0) frequencies between 210 and 1410 MHz.
void BM_frontier_frequencies(benchmark::State& st) {
    const ps::scenario sc = make_scenario(4, 16);
    const ps::pipeline_schedule s = make_schedule(sc, false);
    pe::dvfs_model m;
    m.step_mhz = (m.max_mhz - m.min_mhz) / static_cast<double>(st.range(0) - 1);
    run_frontier(st, sc, s, pe::profile_from_model(m));
    st.counters["frequencies"] = static_cast<double>(m.frequencies_mhz().size());
}
BENCHMARK(BM_frontier_frequencies)->Arg(11)->Arg(21)->Arg(41)->Arg(81)->Arg(161)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
