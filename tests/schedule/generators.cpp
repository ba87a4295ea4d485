// Schedule generators: invariants for every schedule, closed forms, golden cases, the exact
// 1F1B orders of the golden scenario (docs/schedules.md; Merak's variants: merak.cpp).
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include "check.hpp"
#include "pipeplan/schedule.hpp"

using namespace pipeplan::schedule;
using pipeplan::test::check_schedule;
using pipeplan::test::joined;
using pipeplan::test::peak_inflight;
using pipeplan::test::random_scenario;

namespace {

/// The golden scenario of docs/schedules.md: S = 4, forward 4, 4, 2, 2 ms x m, backward 2x forward,
/// 4000 MB model state, stored 8000 m MB, peak 16000 m MB, no communication.
scenario golden() {
    return scaled_scenario({4, 4, 2, 2}, {1, .8, 1.2, .9, 1.1, .7, 1.4, .6}, 2.0, 4000, 8000, 16000);
}

scenario uniform(std::size_t S, std::size_t M, double f = 1.0, double b = 2.0) {
    return pipeplan::test::uniform_scenario(S, M, f, b);
}

std::vector<std::pair<std::string, any_generator>> all_generators(double memory_limit_mb) {
    adaptive lim;
    lim.memory_limit_mb = memory_limit_mb;
    zb_h1 zb;
    zb.memory_limit_mb = memory_limit_mb;
    zb_h1 zb_lo;
    zb_lo.w_share = 0.3;
    adaptive capped;
    capped.inflight_limit = 2;
    return {{"gpipe", gpipe{}},
            {"1f1b", one_f_one_b{}},
            {"adaptive", adaptive{}},
            {"adaptive-limit", lim},
            {"adaptive-cap2", capped},
            {"zb-h1", zb},
            {"zb-h1-w0.3", zb_lo},
            {"merak-early", merak{merak_variant::early_recompute}},
            {"merak-last", merak{merak_variant::last_stage_no_recompute}},
            {"merak-critical", merak{merak_variant::shifted_critical_path}}};
}

}  // namespace

// The generators model the concept (checked at compile time).
static_assert(schedule_generator<gpipe>);
static_assert(schedule_generator<one_f_one_b>);
static_assert(schedule_generator<interleaved_1f1b>);
static_assert(schedule_generator<adaptive>);
static_assert(schedule_generator<zb_h1>);
static_assert(schedule_generator<merak>);
static_assert(schedule_generator<any_generator>);
static_assert(!schedule_generator<int>);

TEST_CASE("schedule: invariants of every schedule on random scenarios") {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        const std::size_t S = 1 + seed % 5, M = 1 + (seed * 7) % 11;
        for (bool net : {false, true}) {
            const scenario sc = random_scenario(S, M, seed, net);
            // A limit that forces the memory-aware schedules to hold back.
            double one = 0.0;
            for (std::size_t j = 0; j < M; ++j)
                for (std::size_t v = 0; v < S; ++v) one = std::max(one, sc.peak(j, v));
            const double limit = 1000.0 + 2.5 * one;
            for (auto& [name, gen] : all_generators(limit)) {
                CAPTURE(name);
                CAPTURE(seed);
                CAPTURE(net);
                // Merak requires M >= S (and M >= 4 for the shifted critical path; tests/schedule/merak.cpp).
                if (name.rfind("merak", 0) == 0 && (M < S || (name == "merak-critical" && M < 4))) continue;
                const pipeline_schedule s = gen(sc);
                const simulation_result r = check_schedule(sc, s);
                if (name == "adaptive-limit" || name == "zb-h1")
                    for (double p : r.peak_memory_mb) CHECK(p <= limit + 1e-6);
            }
            for (std::size_t C : {2u, 3u}) {
                CAPTURE(C);
                if (S * C > 12) continue;
                const scenario vs = split_into_chunks(sc, C);
                check_schedule(vs, interleaved_1f1b{C}(vs));
                adaptive inter;
                inter.placement = placement_kind::interleaved;
                inter.chunks = C;
                check_schedule(vs, inter(vs));
                adaptive vshape;
                vshape.placement = placement_kind::v_shape;
                vshape.chunks = C;
                vshape.memory_limit_mb = 1000.0 * C + 3.0 * one;
                const auto r = check_schedule(vs, vshape(vs));
                for (double p : r.peak_memory_mb) CHECK(p <= vshape.memory_limit_mb + 1e-6);
            }
        }
    }
}

TEST_CASE("schedule: 1F1B keeps min(S - s, M) micro-batches in flight on stage s") {
    for (std::size_t S : {1u, 2u, 4u, 7u})
        for (std::size_t M : {1u, 3u, 4u, 9u, 16u}) {
            CAPTURE(S);
            CAPTURE(M);
            const scenario sc = random_scenario(S, M, S * 100 + M);
            const auto r = check_schedule(sc, one_f_one_b{}(sc));
            const auto inflight = peak_inflight(r);
            for (std::size_t s = 0; s < S; ++s) CHECK(inflight[s] == std::min(S - s, M));
            // GPipe holds all of them.
            const auto g = peak_inflight(check_schedule(sc, gpipe{}(sc)));
            for (std::size_t s = 0; s < S; ++s) CHECK(g[s] == M);
        }
}

TEST_CASE("schedule: ZB-H1 keeps 1F1B's in-flight bound until W ran") {
    for (std::size_t S : {2u, 4u, 6u})
        for (std::size_t M : {3u, 8u, 13u}) {
            const scenario sc = random_scenario(S, M, S + 31 * M);
            const auto s = zb_h1{}(sc);
            const auto r = check_schedule(sc, s);
            for (std::size_t d = 0; d < S; ++d) {
                long cur = 0, best = 0;
                for (const auto& t : r.timeline[d]) {  // in order: count F .. W
                    if (t.o.kind == op_kind::F) best = std::max(best, ++cur);
                    if (t.o.kind == op_kind::W) --cur;
                }
                CHECK(static_cast<std::size_t>(best) <= std::min(S - d, M));
            }
            CHECK(r.makespan_ms <= simulate(sc, one_f_one_b{}(sc)).makespan_ms + 1e-9);
        }
}

TEST_CASE("schedule: closed forms on uniform micro-batches") {
    for (std::size_t S : {1u, 2u, 3u, 4u, 8u})
        for (std::size_t M : {1u, 2u, 5u, 8u, 16u}) {
            CAPTURE(S);
            CAPTURE(M);
            const scenario sc = uniform(S, M, 1.0, 2.0);
            const double expect = static_cast<double>(M + S - 1) * 3.0;
            CHECK(simulate(sc, one_f_one_b{}).makespan_ms == doctest::Approx(expect));
            CHECK(simulate(sc, gpipe{}).makespan_ms == doctest::Approx(expect));
            CHECK(simulate(sc, one_f_one_b{}).lower_bound_ms <= expect + 1e-9);
        }
    // Interleaved: M·C·(f+b)_chunk + (S-1)(f+b)_chunk when M is a multiple of S.
    for (std::size_t S : {2u, 4u})
        for (std::size_t C : {2u, 3u, 4u})
            for (std::size_t k : {1u, 2u, 3u}) {
                const std::size_t M = k * S;
                CAPTURE(S);
                CAPTURE(C);
                CAPTURE(M);
                const scenario vs = split_into_chunks(uniform(S, M, 1.0, 2.0), C);
                const double chunk = 3.0 / static_cast<double>(C);
                const auto r = check_schedule(vs, interleaved_1f1b{C}(vs));
                CHECK(r.makespan_ms == doctest::Approx(static_cast<double>(M * C) * chunk + static_cast<double>(S - 1) * chunk));
            }
}

TEST_CASE("schedule: interleaved works when M is not a multiple of S") {
    for (std::size_t S : {2u, 3u, 4u, 5u})
        for (std::size_t C : {2u, 3u})
            for (std::size_t M : {1u, 3u, 5u, 7u, 10u, 11u}) {
                CAPTURE(S);
                CAPTURE(C);
                CAPTURE(M);
                const scenario vs = split_into_chunks(random_scenario(S, M, S * C + M), C);
                const auto r = check_schedule(vs, interleaved_1f1b{C}(vs));
                CHECK(r.makespan_ms > 0.0);
            }
}

TEST_CASE("schedule: exact per-stage orders for S = 4, M = 6 (the golden scenario)") {
    const scenario sc = uniform(4, 6);
    const auto f = one_f_one_b{}(sc);
    CHECK(joined(f.orders[0]) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
    CHECK(joined(f.orders[1]) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
    CHECK(joined(f.orders[2]) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
    CHECK(joined(f.orders[3]) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
    check_schedule(sc, f);
    // Merak's variants: tests/schedule/merak.cpp.
}

TEST_CASE("schedule: the golden case (1F1B and adaptive)") {
    const scenario sc = golden();
    const auto f = simulate(sc, one_f_one_b{});
    CHECK(f.makespan_ms == doctest::Approx(120.4).epsilon(1e-12));
    CHECK(f.peak_memory_mb[0] == doctest::Approx(48000.0).epsilon(1e-12));
    const auto a = check_schedule(sc, adaptive{}(sc));
    CHECK(a.makespan_ms <= 108.4 + 1e-9);
    adaptive held;
    held.memory_limit_mb = 48000.0;
    const auto h = check_schedule(sc, held(sc));
    CHECK(h.makespan_ms < 120.4 - 1e-6);
    for (double p : h.peak_memory_mb) CHECK(p <= 48000.0 + 1e-6);
    // The discovered order's makespan is what the wait-free replay reaches.
    discovery_policy pol;
    pol.prefer = discovery_policy::preference::alternate;
    const auto disc = discover_order(sc, stage_placement::linear(4), pol);
    pipeline_schedule s{"x", stage_placement::linear(4), disc.orders, 0.0};
    CHECK(simulate(sc, s).makespan_ms == doctest::Approx(disc.makespan_ms));
    // GPipe needs more memory than 1F1B on the first stage; ZB-H1 is faster than 1F1B.
    CHECK(simulate(sc, gpipe{}).peak_memory_mb[0] > 48000.0);
    CHECK(simulate(sc, zb_h1{}).makespan_ms < 120.4);
}

TEST_CASE("schedule: adaptive rejects a limit below one micro-batch") {
    adaptive a;
    a.memory_limit_mb = 10000.0;
    CHECK_THROWS_AS((void)a(golden()), pipeplan::limit_exceeded);
}

TEST_CASE("schedule: generators are deterministic") {
    const scenario sc = random_scenario(5, 17, 99, true);
    for (auto& [name, gen] : all_generators(5000.0)) {
        CAPTURE(name);
        const auto a = gen(sc), b = gen(sc);
        CHECK(a.orders == b.orders);
        const auto ra = simulate(sc, a), rb = simulate(sc, b);
        CHECK(ra.makespan_ms == rb.makespan_ms);
        CHECK(ra.peak_memory_mb == rb.peak_memory_mb);
    }
}
