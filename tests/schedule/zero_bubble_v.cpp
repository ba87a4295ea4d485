// The V schedules (zero_bubble_v.hpp): ZB-V's closed form, the activation shares of ZB-V,
// V-Half and V-Min, and the discovered orders on unequal micro-batches, each makespan checked by
// the independent replay of reference.hpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "reference.hpp"

namespace pipeplan::test {
namespace {

// S stages of M equal micro-batches: per stage forward 2 ms, backward 4 ms, stored 10 MB, peak
// 20 MB (transient 10 MB), model state 100 MB. Split into a V, a chunk has forward 1 ms, B 1 ms
// and W 1 ms (w_share 0.5): F = B = W = u = 1 ms; stored 5 MB, transient 5 MB, model 50 MB.
ps::scenario uniform_stages(std::size_t S, std::size_t M) {
    return ps::scaled_scenario(std::vector<double>(S, 2.0), std::vector<double>(M, 1.0), 2.0, 100, 10, 20);
}

// The largest activation memory (stored activations held; model state and the running op's
// transient taken off) of any device, from the reference replay's peaks.
double peak_activation_mb(const reference_result& r, double model_mb, double transient_mb) {
    return *std::max_element(r.peak_mb.begin(), r.peak_mb.end()) - model_mb - transient_mb;
}

ps::pipeline_schedule run_named(const char* name, const ps::scenario& base, ps::scenario& prepared,
                                ps::named_schedule_options o = {}) {
    const ps::schedule_traits& t = ps::schedules().at(name);
    prepared = ps::prepare_scenario(t, base, o);
    return ps::make_generator(t, o)(prepared);
}

}  // namespace

// ZB-V's closed form with F = B = W = u per chunk and M >= 2S - 1: T = (6M + S - 1)·u.
// Derivation: device S - 1 runs 2M chunk ops of each kind, 6M·u of work; its first op, the
// forward of micro-batch 0 on stage S - 1, needs the forwards of stages 0..S-2 first, so it
// starts at (S - 1)·u at the earliest: T >= (6M + S - 1)·u on that device alone. ZB-V's table
// reaches this bound: device S - 1 never idles once started (zero bubble in the steady state)
// and no device ends after it. 1F1B on the same stages takes (M + S - 1)(2u + 4u) = 6(M + S - 1)u.
// Memory: device d holds at most 2(S - d) - 1 + d first-chunk activations plus one second-chunk
// one, 2S chunks of 5 MB = S stages of 10 MB: 1F1B's first device holds S micro-batches' 10 MB.
TEST_CASE("zb-v: uniform F = B = W: the closed form (6M + S - 1)·u and 1F1B's activation memory") {
    for (const auto& [S, M] : std::vector<std::pair<std::size_t, std::size_t>>{{2, 4}, {3, 5}, {4, 8}, {4, 16}, {8, 15}, {8, 32}}) {
        INFO("S = " << S << ", M = " << M);
        const ps::scenario base = uniform_stages(S, M);
        ps::scenario sc;
        const ps::pipeline_schedule s = run_named("zb-v", base, sc);
        REQUIRE(s.placement.kind() == ps::placement_kind::v_shape);
        const double closed_ms = 6.0 * static_cast<double>(M) + static_cast<double>(S) - 1.0;
        const reference_result ref = reference_replay(sc, s);
        REQUIRE_FALSE(ref.deadlock);
        CHECK(ref.makespan_ms == doctest::Approx(closed_ms));
        const ps::simulation_result sim = check_schedule(sc, s);
        CHECK(sim.makespan_ms == doctest::Approx(closed_ms));
        REQUIRE(s.replay.has_value());
        CHECK(s.replay->makespan_ms == sim.makespan_ms);
        // Device S - 1: idle exactly (S - 1)·u (before its first op).
        double busy_ms = 0.0;
        for (const auto& t : sim.timeline[S - 1]) busy_ms += t.end_ms - t.start_ms;
        CHECK(sim.makespan_ms - busy_ms == doctest::Approx(static_cast<double>(S) - 1.0));
        // Peak activation memory: 1F1B's (S stages' worth of one micro-batch: 10·S MB).
        const ps::pipeline_schedule one = ps::one_f_one_b{}(base);
        const reference_result ref_one = reference_replay(base, one);
        CHECK(ref_one.makespan_ms == doctest::Approx(6.0 * static_cast<double>(M + S - 1)));
        CHECK(peak_activation_mb(ref, 100.0, 5.0) == doctest::Approx(peak_activation_mb(ref_one, 100.0, 10.0)));
        CHECK(peak_activation_mb(ref, 100.0, 5.0) == doctest::Approx(10.0 * static_cast<double>(S)));
    }
}

TEST_CASE("v-half and v-min: within 1/2 and 1/3 of 1F1B's activation memory plus one micro-batch") {
    for (const auto& [S, M] : std::vector<std::pair<std::size_t, std::size_t>>{{4, 8}, {6, 12}, {8, 16}}) {
        const ps::scenario base = uniform_stages(S, M);
        const double one_f_one_b_mb = 10.0 * static_cast<double>(S);
        for (const auto& [name, share] : std::vector<std::pair<const char*, double>>{{"v-half", 0.5}, {"v-min", 1.0 / 3.0}}) {
            INFO(name << ", S = " << S << ", M = " << M);
            ps::scenario sc;
            const ps::pipeline_schedule s = run_named(name, base, sc);
            CHECK(s.name == name);
            const reference_result ref = reference_replay(sc, s);
            REQUIRE_FALSE(ref.deadlock);
            CHECK(peak_activation_mb(ref, 100.0, 5.0) <= share * one_f_one_b_mb + 10.0 + 1e-9);
            const ps::simulation_result sim = check_schedule(sc, s);
            CHECK(sim.makespan_ms == doctest::Approx(ref.makespan_ms));
            CHECK(s.replay->makespan_ms == sim.makespan_ms);
            CHECK(sim.makespan_ms >= 6.0 * static_cast<double>(M) + static_cast<double>(S) - 1.0);
        }
    }
}

TEST_CASE("zb-v, v-half, v-min: unequal micro-batches under a memory limit, with and without a W bound") {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const ps::scenario base = random_scenario(4, 12, seed);
        for (const char* name : {"zb-v", "v-half", "v-min"})
            for (const std::size_t pending : {std::size_t{0}, std::size_t{2}})
                for (const double limit : {1e9, 1700.0}) {
                    INFO(name << ", seed " << seed << ", max pending W " << pending << ", limit " << limit);
                    ps::named_schedule_options o;
                    o.memory_limit_mb = limit;
                    o.max_pending_w = pending;
                    ps::scenario sc;
                    ps::pipeline_schedule s;
                    try {
                        s = run_named(name, base, sc, o);
                    } catch (const pipeplan::limit_exceeded&) {
                        CHECK(limit < 1e9);  // a micro-batch alone does not fit: only under the limit
                        continue;
                    }
                    const ps::simulation_result sim = check_schedule(sc, s);
                    CHECK(s.replay->makespan_ms == sim.makespan_ms);
                    CHECK(*std::max_element(sim.peak_memory_mb.begin(), sim.peak_memory_mb.end()) <= limit + 1e-6);
                    const reference_result ref = reference_replay(sc, s);
                    CHECK(ref.makespan_ms == doctest::Approx(sim.makespan_ms));
                }
    }
}

TEST_CASE("zb-v: the table is deadlock-free for short runs too; V preparation errors are clear") {
    for (std::size_t S = 1; S <= 5; ++S)
        for (std::size_t M = 1; M <= 2 * S + 1; ++M) {
            INFO("S = " << S << ", M = " << M);
            ps::pipeline_schedule s;
            s.placement = ps::stage_placement::v_shape(S, 2);
            s.w_share = 0.5;
            s.orders = ps::zb_v_table(S, M);
            const ps::scenario sc = ps::split_into_v_chunks(uniform_stages(S, M));
            CHECK_FALSE(reference_replay(sc, s).deadlock);
            (void)check_schedule(sc, s);
        }
    ps::named_schedule_options o;
    o.chunks = 3;
    CHECK_THROWS_WITH_AS((void)ps::prepare_scenario(ps::schedules().at("zb-v"), uniform_stages(4, 8), o),
                         doctest::Contains("two chunks per device"), pipeplan::invalid_argument);
    ps::named_schedule_options p;
    const ps::scenario interleaved = ps::split_into_chunks(uniform_stages(4, 8), 2);
    CHECK_THROWS_WITH_AS((void)ps::prepare_scenario(ps::schedules().at("zb-v"), interleaved, p),
                         doctest::Contains("v-shape placement"), pipeplan::invalid_argument);
}

}  // namespace pipeplan::test
