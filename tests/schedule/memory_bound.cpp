// Tests of pipeplan/schedule/memory_bound.hpp: the memory lower bound holds for every schedule
// that fits the limit, and its closed form on a pipeline where one micro-batch fits at a time.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/memory_bound.hpp"

using namespace pipeplan::schedule;
using pipeplan::test::random_scenario;
using pipeplan::test::uniform_scenario;

TEST_CASE("memory bound: closed form where one micro-batch fits in flight") {
    // Two stages, M equal micro-batches: F 1 ms, B 2 ms, stored 10 MB, peak 20 MB, model state
    // 100 MB. Device 0 holds (j, 0)'s 10 MB from F(j, 0) to B(j, 0), across F0 + F1 + B1 + B0 =
    // 6 ms; device 1 across F1 + B1 = 3 ms. Under 120 MB (10 MB held, 20 MB for the next F: one
    // micro-batch at a time) makespan >= M · 10 · 6 / 20 = 3 M ms; the schedules take 6 M.
    const std::size_t M = 5;
    const scenario sc = uniform_scenario(2, M);
    const auto linear = stage_placement::linear(2);
    CHECK(memory_bound_ms(sc, linear, 120.0) == doctest::Approx(3.0 * M));
    CHECK(memory_bound_ms(sc, linear, 130.0) == doctest::Approx(2.0 * M));
    CHECK(memory_bound_ms(sc, linear, std::numeric_limits<double>::infinity()) == 0.0);
    CHECK(memory_bound_ms(sc, linear, 100.0) == 0.0);  // the model state alone fills it
    // With half of each backward split off as W, the span is F0 + F1 + B1/2 + B0/2 = 4 ms.
    CHECK(memory_bound_ms(sc, linear, 120.0, 0.5) == doctest::Approx(2.0 * M));
    for (const double limit_mb : {120.0, 130.0, 150.0}) {
        named_schedule_options o;
        o.memory_limit_mb = limit_mb;
        const simulation_result r = simulate(sc, make_generator(schedule_name::adaptive, o));
        const double peak_mb = *std::max_element(r.peak_memory_mb.begin(), r.peak_memory_mb.end());
        CHECK(peak_mb <= limit_mb);
        CHECK(r.makespan_ms >= memory_bound_ms(sc, linear, limit_mb));
        if (limit_mb == 120.0) CHECK(r.makespan_ms == doctest::Approx(6.0 * M));
    }
}

TEST_CASE("memory bound: one micro-batch at a time, the bound is the makespan") {
    // Equal stored = peak = 10 MB, model state 100 MB, limit 110 MB: a micro-batch in flight
    // leaves no room for the next forward, so every schedule runs one micro-batch's whole path
    // after another, and device 0's span sum is that path sum: the bound is exact.
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        const std::size_t S = 2 + seed % 4, M = 2 + seed % 7;
        pipeplan::splitmix64 rng(seed);
        std::vector<std::vector<double>> f(M), b(M), held(M, std::vector<double>(S, 10.0));
        double path_ms = 0.0;
        for (std::size_t j = 0; j < M; ++j)
            for (std::size_t v = 0; v < S; ++v) {
                f[j].push_back(0.5 + static_cast<double>(rng() % 100) / 40.0);
                b[j].push_back(2.0 * f[j].back());
                path_ms += f[j].back() + b[j].back();
            }
        const scenario sc = make_scenario(f, b, held, held, std::vector<double>(S, 100.0), std::vector<double>(M, 0.0));
        named_schedule_options o;
        o.memory_limit_mb = 110.0;
        const simulation_result r = simulate(sc, make_generator(schedule_name::adaptive, o));
        const double bound_ms = memory_bound_ms(sc, stage_placement::linear(S), 110.0);
        CHECK(bound_ms == doctest::Approx(path_ms));
        CHECK(r.makespan_ms == doctest::Approx(bound_ms));
    }
}

TEST_CASE("memory bound: schedules that checkpoint count the checkpoint") {
    scenario sc = uniform_scenario(2, 3);
    const auto linear = stage_placement::linear(2);
    sc.activation_mb.assign(3, 4.0);  // an f keeps (1 − 1)·10 + 4 = 4 MB of the 10 stored
    CHECK(memory_bound_ms(sc, linear, 120.0) == doctest::Approx(3 * 10.0 * 6.0 / 20.0));
    CHECK(memory_bound_ms(sc, linear, 120.0, 0.0, true) == doctest::Approx(3 * 4.0 * 6.0 / 20.0));
    sc.checkpoint_ratio.assign(2, 0.5);  // 0.5·10 + 4 = 9 MB
    CHECK(memory_bound_ms(sc, linear, 120.0, 0.0, true) == doctest::Approx(3 * 9.0 * 6.0 / 20.0));
    sc.activation_mb.assign(3, 25.0);  // a checkpoint above the forward's 20 MB peak: no bound
    CHECK(memory_bound_ms(sc, linear, 120.0, 0.0, true) == 0.0);
    CHECK(memory_bound_ms(sc, linear, 120.0) == doctest::Approx(3 * 10.0 * 6.0 / 20.0));
}

TEST_CASE("memory bound: every built-in schedule within a limit runs at least the bound") {
    std::size_t runs = 0, tight = 0;
    for (const auto& row : builtin_schedules())
        for (std::uint64_t seed = 1; seed <= 12; ++seed)
            for (int net = 0; net < 2; ++net)
                for (const double limit_mb : {std::numeric_limits<double>::infinity(), 1250.0, 1500.0, 2350.0, 2600.0}) {
                    const std::size_t S = 2 + seed % 3 * 2, M = 3 + (seed * 5) % 13;
                    const schedule_traits& t = schedules().at(row.name);
                    named_schedule_options o;
                    o.memory_limit_mb = limit_mb;
                    scenario base = random_scenario(S, M, seed, net != 0);
                    if (seed % 3 == 0) base.checkpoint_ratio.assign(S, 0.6);  // f keeps 0.4 · stored + act
                    scenario sc;
                    pipeline_schedule sched;
                    try {
                        sc = prepare_scenario(t, base, o);
                        sched = make_generator(t, o)(sc);
                    } catch (const pipeplan::invalid_argument&) {
                        continue;  // the kind does not run on this shape, or the limit is too tight
                    } catch (const pipeplan::limit_exceeded&) {
                        continue;
                    }
                    const simulation_result r = simulate(sc, sched);
                    const double peak_mb = *std::max_element(r.peak_memory_mb.begin(), r.peak_memory_mb.end());
                    // The schedule fits its own peak (and every limit above it): the bound holds there.
                    const bool checkpoints = t.checkpoint_rule.has_value();
                    if (!checkpoints)  // what the bound assumes of the rows without a checkpoint rule
                        for (const auto& device : r.timeline)
                            for (const auto& e : device) REQUIRE(e.o.kind != op_kind::F_checkpoint);
                    const double bound_ms = memory_bound_ms(sc, sched.placement, peak_mb, sched.w_share, checkpoints);
                    CHECK_MESSAGE(r.makespan_ms >= bound_ms * (1.0 - 1e-12),
                                  row.name << " S " << S << " M " << M << " seed " << seed << ": makespan " << r.makespan_ms
                                           << " ms, memory bound " << bound_ms << " ms");
                    ++runs;
                    if (bound_ms >= 0.3 * r.makespan_ms) ++tight;
                }
    CHECK(runs > 1000);
    // Not vacuous: under the tight limits the bound reaches 30 % of the makespan or more.
    CHECK(tight > runs / 5);
}
