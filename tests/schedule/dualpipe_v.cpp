// DualPipeV and the overlapped forward/backward pair (dualpipe_v.hpp, timing.hpp): the pair's
// price and memory, its errors, the table's makespan against DualPipe's published bubble, and
// the lower bound under overlap, each replay checked by the independent replay of reference.hpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "reference.hpp"

namespace pipeplan::test {
namespace {

// S stages of M equal micro-batches split into a V: per chunk F = B = W = 1 ms (w_share 0.5),
// stored 5 MB, peak 10 MB, model state 50 MB.
ps::scenario v_uniform(std::size_t S, std::size_t M) {
    return ps::split_into_v_chunks(
        ps::scaled_scenario(std::vector<double>(S, 2.0), std::vector<double>(M, 1.0), 2.0, 100, 10, 20));
}

ps::pipeline_schedule table_schedule(std::size_t S, std::size_t M, double factor) {
    ps::pipeline_schedule s;
    s.name = "dualpipe-v";
    s.placement = ps::stage_placement::v_shape(S, 2);
    s.w_share = 0.5;
    s.overlap_factor = factor;
    s.orders = ps::dualpipe_v_table(S, M);
    return s;
}

}  // namespace

TEST_CASE("overlapped_ms: F + B at factor 1, max(F, B) at 0, never below max(F, B)") {
    CHECK(ps::overlapped_ms(2.0, 3.0, 1.0) == 5.0);
    CHECK(ps::overlapped_ms(2.0, 3.0, 0.0) == 3.0);
    CHECK(ps::overlapped_ms(3.0, 2.0, 0.5) == 4.0);
    for (double f = 0.0; f <= 1.0; f += 0.125) CHECK(ps::overlapped_ms(1.5, 4.0, f) >= 4.0);
}

// Two devices, two stages (linear), F 1 and 2 ms, B 2 and 4 ms, stored 10 MB, peak 20 MB.
// Device 0 runs F0 F1, then (F0 of mb 1 is done) — the pair is F1 overlapping B0 on stage 0
// after F0: order F0, F1(overlaps) B0, B1. B0 of stage 0 waits for B0 of stage 1 (ends at
// 1 + 2 + 4 = 7); F1 is ready at 1, so the pair starts at 7 and takes max(1, 2) + f·min = 2 + f.
TEST_CASE("an overlapped pair starts when both parts' inputs are there; the forward allocates, the backward frees") {
    const ps::scenario sc = two_stage(0.0, {});
    for (const double f : {1.0, 0.5, 0.0}) {
        ps::pipeline_schedule s;
        s.name = "pair";
        s.placement = ps::stage_placement::linear(2);
        s.overlap_factor = f;
        s.orders = {{{ps::op_kind::F, 0, 0}, {ps::op_kind::F, 1, 0, true}, {ps::op_kind::B, 0, 0}, {ps::op_kind::B, 1, 0}},
                    {{ps::op_kind::F, 0, 1}, {ps::op_kind::B, 0, 1}, {ps::op_kind::F, 1, 1}, {ps::op_kind::B, 1, 1}}};
        const ps::simulation_result r = ps::simulate(sc, s);
        REQUIRE(r.timeline[0].size() == 4);
        CHECK(r.timeline[0][1].start_ms == 7.0);
        CHECK(r.timeline[0][2].start_ms == 7.0);
        CHECK(r.timeline[0][1].end_ms == 9.0 + f);
        CHECK(r.timeline[0][2].end_ms == 9.0 + f);
        CHECK(r.busy_ms[0] == doctest::Approx(1.0 + 2.0 + f + 2.0));
        // During the pair device 0 holds model 100 + mb 0's and mb 1's peaks (20 + 20) = 140.
        CHECK(r.peak_memory_mb[0] == doctest::Approx(140.0));
        const reference_result ref = reference_replay(sc, s);
        REQUIRE_FALSE(ref.deadlock);
        CHECK(ref.makespan_ms == doctest::Approx(r.makespan_ms));
        CHECK(ref.peak_mb[0] == doctest::Approx(r.peak_memory_mb[0]));
    }
}

TEST_CASE("overlapped pairs: a pair must be a forward and the B of another micro-batch; the factor in [0, 1]") {
    const ps::scenario sc = two_stage(0.0, {});
    ps::pipeline_schedule s = ps::one_f_one_b{}(sc);
    ps::pipeline_schedule bad = s;
    bad.orders[1][0].overlaps_next = true;  // F0 then B0 of the same micro-batch
    CHECK_THROWS_WITH_AS((void)ps::simulate(sc, bad), doctest::Contains("must be the B of another micro-batch"),
                         invalid_argument);
    bad = s;
    bad.orders[0].back().overlaps_next = true;  // a B, last in its order
    CHECK_THROWS_AS((void)ps::simulate(sc, bad), invalid_argument);
    bad = s;
    bad.orders[0][1].overlaps_next = true;  // F1 then B0 on stage 0: a valid pair
    CHECK(ps::simulate(sc, bad).makespan_ms > 0.0);
    CHECK_THROWS_WITH_AS((void)ps::make_op_graph(sc, bad), doctest::Contains("not modelled"), invalid_argument);
    bad = s;
    bad.overlap_factor = 1.5;
    CHECK_THROWS_WITH_AS((void)ps::simulate(sc, bad), doctest::Contains("overlap_factor"), invalid_argument);
}

// DualPipe's README: DualPipeV's bubble is (PP/2 − 1)(F&B + B − 3W) for PP = 2S pipeline stages
// (chunks), F a chunk's forward, B its full backward, W its weight part, F&B an overlapped forward
// and full backward. Here F = 1, a full backward B + W = 2, W = 1, and pipeplan's F&B is the pair
// (F, B) then W: overlapped_ms(1, 1, f) + 1 = 2 + f.
// Derivation of the table's makespan by hand: device S − 1 (stages S − 1 and S) cannot start
// before the forwards of stages 0..S−2 of micro-batch 0, (S − 1)·F = S − 1; from then on it never
// waits (its order alternates chunks whose inputs its own previous op produced, or that arrived
// earlier) and it ends last. Its work: 2M forwards and 2M full backwards, 6M, less (1 − f)·1 per
// pair; its pairs: 2 per steady round, M − S rounds, the first round's first pair not overlapped:
// 2(M − S) − 1. So T = S − 1 + 6M − (1 − f)(2(M − S) − 1), and its idle time is S − 1 for every f.
// At f = 0 (full overlap: F&B = 2) the published bubble (S − 1)(2 + 2 − 3) = S − 1 is exactly that;
// for f > 0 the published form (S − 1)(1 + f) exceeds the replay's S − 1 (the replay starts every
// op when its inputs are there instead of in lock step).
TEST_CASE("dualpipe-v: the table's makespan derived by hand, and DualPipe's published bubble at full overlap") {
    for (const auto& [S, M] : std::vector<std::pair<std::size_t, std::size_t>>{{2, 4}, {3, 6}, {4, 8}, {4, 20}, {8, 16}, {8, 40}}) {
        for (const double f : {1.0, 0.5, 0.0}) {
            INFO("S = " << S << ", M = " << M << ", f = " << f);
            const ps::scenario sc = v_uniform(S, M);
            const ps::pipeline_schedule s = table_schedule(S, M, f);
            const double Sd = static_cast<double>(S), Md = static_cast<double>(M);
            const double pairs = 2.0 * (Md - Sd) - 1.0;
            const double hand_ms = Sd - 1.0 + 6.0 * Md - (1.0 - f) * pairs;
            const ps::simulation_result r = check_schedule(sc, s);
            CHECK(r.makespan_ms == doctest::Approx(hand_ms));
            const reference_result ref = reference_replay(sc, s);
            REQUIRE_FALSE(ref.deadlock);
            CHECK(ref.makespan_ms == doctest::Approx(hand_ms));
            CHECK(r.makespan_ms - r.busy_ms[S - 1] == doctest::Approx(Sd - 1.0));
            const double fb = ps::overlapped_ms(1.0, 1.0, f) + 1.0, full_b = 2.0, w = 1.0;
            const double published = (2.0 * Sd / 2.0 - 1.0) * (fb + full_b - 3.0 * w);
            if (f == 0.0) CHECK(r.makespan_ms - r.busy_ms[S - 1] == doctest::Approx(published));
            else CHECK(r.makespan_ms - r.busy_ms[S - 1] < published);
            CHECK(r.lower_bound_ms <= r.makespan_ms + 1e-9);
            if (f == 1.0) CHECK(r.makespan_ms == doctest::Approx(r.lower_bound_ms));  // optimal without overlap
            // Every W of the table ran (the deferred ones at the end), each op exactly once.
            for (const auto& o : s.orders) CHECK(o.size() == 3 * 2 * M);
        }
    }
}

TEST_CASE("dualpipe-v: by name, uniform micro-batches take the table when it is shorter") {
    ps::named_schedule_options o;
    o.overlap_factor = 0.5;
    const ps::schedule_traits& t = ps::schedules().at("dualpipe-v");
    CHECK(t.splits_backward);
    CHECK(t.plans_under_memory_limit);
    const ps::scenario base = ps::scaled_scenario(std::vector<double>(4, 2.0), std::vector<double>(12, 1.0), 2.0, 100, 10, 20);
    const ps::scenario sc = ps::prepare_scenario(t, base, o);
    const ps::pipeline_schedule s = ps::make_generator(t, o)(sc);
    const ps::simulation_result r = check_schedule(sc, s);
    CHECK(r.makespan_ms <= ps::simulate(sc, table_schedule(4, 12, 0.5)).makespan_ms + 1e-9);
    REQUIRE(s.replay.has_value());
    CHECK(s.replay->makespan_ms == r.makespan_ms);
    CHECK(s.overlap_factor == 0.5);
}

// Random unequal micro-batches, factors and memory limits: the schedule runs (no deadlock), the
// independent replay agrees, it keeps to the memory limit, it is never slower than zb-v on the
// same scenario, and the lower bound with overlap stays below the simulated makespan.
TEST_CASE("dualpipe-v: unequal micro-batches under a memory limit; the lower bound holds with overlap") {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        const std::size_t S = 2 + seed % 4, M = 2 * S + seed % 7;
        const ps::scenario sc = ps::split_into_v_chunks(random_scenario(S, M, seed));
        for (const double f : {1.0, 0.6, 0.0}) {
            INFO("seed = " << seed << ", f = " << f);
            ps::dualpipe_v g;
            g.overlap_factor = f;
            ps::zb_v z;
            const double limit_mb = 1000.0 + 150.0 * static_cast<double>(S * (1 + seed % 3));
            g.memory_limit_mb = z.memory_limit_mb = limit_mb;
            const ps::pipeline_schedule s = g(sc);
            const ps::simulation_result r = check_schedule(sc, s);
            const reference_result ref = reference_replay(sc, s);
            REQUIRE_FALSE(ref.deadlock);
            CHECK(ref.makespan_ms == doctest::Approx(r.makespan_ms));
            const ps::simulation_result rz = ps::simulate(sc, z(sc));
            CHECK(r.makespan_ms <= rz.makespan_ms + 1e-9);
            CHECK(r.lower_bound_ms <= r.makespan_ms + 1e-9);
            const double peak = *std::max_element(r.peak_memory_mb.begin(), r.peak_memory_mb.end());
            const double zb_peak = *std::max_element(rz.peak_memory_mb.begin(), rz.peak_memory_mb.end());
            if (zb_peak <= limit_mb) CHECK(peak <= limit_mb + 1e-6);
        }
    }
}

TEST_CASE("SVG: the two parts of an overlapped pair share the row, forward above, backward below") {
    const ps::scenario sc = v_uniform(2, 4);
    const ps::pipeline_schedule s = table_schedule(2, 4, 0.5);
    std::ostringstream v;
    ps::write_svg(v, ps::simulate(sc, s), s);
    const std::string svg = v.str();
    std::size_t pairs = 0;
    for (const auto& o : s.orders)
        for (const auto& x : o) pairs += x.overlaps_next;
    REQUIRE(pairs > 0);
    // Half-height boxes (row 26 px: 13 − 2 = 11 px high), two per pair.
    std::size_t half = 0;
    for (std::size_t at = svg.find("height=\"11.0\""); at != std::string::npos; at = svg.find("height=\"11.0\"", at + 1)) ++half;
    CHECK(half == 2 * pairs);
}

}  // namespace pipeplan::test
