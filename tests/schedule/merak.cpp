// Merak's recomputation-aware schedules (schedule/merak.hpp): the orders derived from the rules
// of Merak's schedules (docs/schedules.md) for S in 2..8, M in S..16 (uniform and unequal micro-batches), the S = 4, M = 6
// golden strings, makespans against an independent replay (reference.hpp), the stage-aware
// checkpoint ratio and its memory / time formulas.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "reference.hpp"

using namespace pipeplan::schedule;
using namespace pipeplan::test;

namespace {


constexpr merak_variant variants[3] = {merak_variant::early_recompute, merak_variant::last_stage_no_recompute,
                                       merak_variant::shifted_critical_path};

/// Merak's placement rules (docs/schedules.md), written out per (variant, S, M, stage): which micro-batches get an
/// explicit R, and how many forwards precede each backward.
std::set<std::uint32_t> expected_r(merak_variant v, std::size_t S, std::size_t M, std::size_t s) {
    std::set<std::uint32_t> cool;  // C(s): the last S-1-s micro-batches
    for (std::size_t j = M - (S - 1 - s); j < M; ++j) cool.insert(static_cast<std::uint32_t>(j));
    if (v == merak_variant::early_recompute) return cool;
    if (s == S - 1) return {};
    if (v == merak_variant::last_stage_no_recompute) return s == S - 2 ? std::set<std::uint32_t>{0} : cool;
    if (s == S - 2) return {0, 1};
    if (s + 3 == S) cool.insert(0);
    return cool;
}
std::size_t forwards_before_backward(merak_variant v, std::size_t S, std::size_t M, std::size_t s, std::size_t i) {
    if (v == merak_variant::shifted_critical_path && s + 2 == S) return i == 0 ? 3 : std::min(M, i + 2);
    return std::min(M, i + S - s);  // DeepSpeed's 1F1B: S - s - 1 warm-up forwards
}

/// Checks stage s's order against the rules; `ckpt` = the stage checkpoints.
void check_rules(const std::vector<op>& o, merak_variant v, std::size_t S, std::size_t M, std::size_t s, bool ckpt) {
    const auto rs = ckpt ? expected_r(v, S, M, s) : std::set<std::uint32_t>{};
    std::size_t forwards = 0, backwards = 0, recomputes = 0;
    for (std::size_t p = 0; p < o.size(); ++p) {
        const op x = o[p];
        CHECK(x.stage == s);
        if (is_forward(x.kind)) {
            CHECK(x.microbatch == forwards);
            CHECK(x.kind == (ckpt ? op_kind::F_checkpoint : op_kind::F));
            ++forwards;
        } else if (x.kind == op_kind::R) {
            CHECK(rs.count(x.microbatch) == 1);
            REQUIRE(p + 1 < o.size());
            CHECK(o[p + 1] == op{op_kind::B, x.microbatch, x.stage});  // right before its B
            ++recomputes;
        } else {
            REQUIRE(x.kind == op_kind::B);
            CHECK(x.microbatch == backwards);
            CHECK(forwards == forwards_before_backward(v, S, M, s, backwards));
            const bool after_r = p > 0 && o[p - 1].kind == op_kind::R;
            CHECK(after_r == (rs.count(x.microbatch) == 1));
            ++backwards;
        }
    }
    CHECK(forwards == M);
    CHECK(backwards == M);
    CHECK(recomputes == rs.size());
}

/// 1F1B with full activation checkpointing everywhere: every forward f, inline recomputation.
pipeline_schedule one_f_one_b_checkpointed(const scenario& sc) {
    pipeline_schedule s = one_f_one_b{}(sc);
    s.name = "1f1b-checkpointed";
    for (auto& dev : s.orders)
        for (op& x : dev)
            if (x.kind == op_kind::F) x.kind = op_kind::F_checkpoint;
    return s;
}

}  // namespace

TEST_CASE("merak: the S = 4, M = 6 orders of docs/schedules.md") {
    const scenario sc = uniform_scenario(4, 6);
    const auto e = merak{merak_variant::early_recompute}(sc);
    CHECK(e.name == "merak-early");
    CHECK(joined(e.orders[0]) == "f0 f1 f2 f3 B0 f4 B1 f5 B2 R3 B3 R4 B4 R5 B5");
    CHECK(joined(e.orders[1]) == "f0 f1 f2 B0 f3 B1 f4 B2 f5 B3 R4 B4 R5 B5");
    CHECK(joined(e.orders[2]) == "f0 f1 B0 f2 B1 f3 B2 f4 B3 f5 B4 R5 B5");
    CHECK(joined(e.orders[3]) == "f0 B0 f1 B1 f2 B2 f3 B3 f4 B4 f5 B5");
    const auto l = merak{merak_variant::last_stage_no_recompute}(sc);
    CHECK(l.orders[0] == e.orders[0]);
    CHECK(l.orders[1] == e.orders[1]);
    CHECK(joined(l.orders[2]) == "f0 f1 R0 B0 f2 B1 f3 B2 f4 B3 f5 B4 B5");
    CHECK(joined(l.orders[3]) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
    const auto c = merak{merak_variant::shifted_critical_path}(sc);
    CHECK(c.orders[0] == e.orders[0]);
    CHECK(joined(c.orders[1]) == "f0 f1 f2 R0 B0 f3 B1 f4 B2 f5 B3 R4 B4 R5 B5");
    CHECK(joined(c.orders[2]) == "f0 f1 f2 R0 B0 R1 B1 f3 B2 f4 B3 f5 B4 B5");
    CHECK(c.orders[3] == l.orders[3]);
}

TEST_CASE("merak: orders follow the rules for S in 2..8, M in S..16; deadlock-free") {
    for (std::size_t S = 2; S <= 8; ++S)
        for (std::size_t M = S; M <= 16; ++M)
            for (const bool unequal : {false, true}) {
                const scenario sc = unequal ? random_scenario(S, M, 31 * S + M) : uniform_scenario(S, M);
                for (merak_variant v : variants) {
                    if (v == merak_variant::shifted_critical_path && M < 4) continue;
                    CAPTURE(S);
                    CAPTURE(M);
                    CAPTURE(unequal);
                    CAPTURE(pipeplan::name_of(v));
                    const pipeline_schedule s = merak{v}(sc);
                    REQUIRE(s.orders.size() == S);
                    for (std::size_t d = 0; d < S; ++d) {
                        const bool ckpt = v == merak_variant::early_recompute || d + 1 < S;
                        check_rules(s.orders[d], v, S, M, d, ckpt);
                    }
                    const simulation_result r = check_schedule(sc, s);  // throws on a deadlock
                    const auto ref = reference_replay(sc, s);
                    CHECK_FALSE(ref.deadlock);
                    CHECK(r.makespan_ms == doctest::Approx(ref.makespan_ms).epsilon(1e-12));
                    for (std::size_t d = 0; d < S; ++d)
                        CHECK(r.peak_memory_mb[d] == doctest::Approx(ref.peak_mb[d]).epsilon(1e-12));
                }
            }
}

TEST_CASE("merak: critical <= last <= 1F1B with inline recomputation on uniform micro-batches") {
    for (std::size_t S = 2; S <= 8; ++S)
        for (std::size_t M = std::max<std::size_t>(S, 4); M <= 16; ++M) {
            CAPTURE(S);
            CAPTURE(M);
            const scenario sc = uniform_scenario(S, M);
            const double full = simulate(sc, one_f_one_b_checkpointed(sc)).makespan_ms;
            const double last = simulate(sc, merak{merak_variant::last_stage_no_recompute}).makespan_ms;
            const double crit = simulate(sc, merak{merak_variant::shifted_critical_path}).makespan_ms;
            CHECK(crit <= last + 1e-9);
            CHECK(last <= full + 1e-9);
        }
}

TEST_CASE("merak: M < S and (shifted critical path) M < 4 are errors") {
    CHECK_THROWS_WITH_AS((void)merak{merak_variant::early_recompute}(uniform_scenario(4, 3)),
                         doctest::Contains("M = 3 < S = 4"), pipeplan::invalid_argument);
    CHECK_THROWS_WITH_AS((void)merak{merak_variant::last_stage_no_recompute}(uniform_scenario(5, 2)),
                         doctest::Contains("at least as many micro-batches as stages"), pipeplan::invalid_argument);
    CHECK_THROWS_WITH_AS((void)merak{merak_variant::shifted_critical_path}(uniform_scenario(2, 3)),
                         doctest::Contains("M >= 4"), pipeplan::invalid_argument);
    CHECK_NOTHROW((void)merak{merak_variant::shifted_critical_path}(uniform_scenario(2, 4)));
    CHECK_NOTHROW((void)merak{merak_variant::early_recompute}(uniform_scenario(3, 3)));
}

TEST_CASE("merak: stage-aware checkpoint ratios (Merak's activation_checkpoint_ratio)") {
    // r_s = 1 - (1 - r)(S-1)/(S-1-s), clamped at 0; the last stage 0.
    const auto e = merak_checkpoint_ratios(4, 0.5, merak_variant::early_recompute);
    REQUIRE(e.size() == 4);
    CHECK(e[0] == 0.5);                         // 1 - 0.5·3/3
    CHECK(e[1] == doctest::Approx(0.25));       // 1 - 0.5·3/2
    CHECK(e[2] == 0.0);                         // 1 - 0.5·3/1 = -0.5 -> 0
    CHECK(e[3] == 0.0);
    const auto c = merak_checkpoint_ratios(4, 0.5, merak_variant::shifted_critical_path);
    CHECK(c[2] == doctest::Approx(0.25));  // stage S-2 takes stage S-3's ratio
    const auto full = merak_checkpoint_ratios(5, 1.0, merak_variant::last_stage_no_recompute);
    CHECK(full == std::vector<double>{1.0, 1.0, 1.0, 1.0, 0.0});
    CHECK_THROWS_AS((void)merak_checkpoint_ratios(4, 1.5, merak_variant::early_recompute), pipeplan::invalid_argument);

    // A stage with ratio 0 runs F and drops its explicit Rs.
    scenario sc = uniform_scenario(4, 6);
    sc.checkpoint_ratio = e;
    const auto s = merak{merak_variant::early_recompute}(sc);
    CHECK(joined(s.orders[0]) == "f0 f1 f2 f3 B0 f4 B1 f5 B2 R3 B3 R4 B4 R5 B5");
    CHECK(joined(s.orders[2]) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
    CHECK(joined(s.orders[3]) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
    check_schedule(sc, s);
}

TEST_CASE("merak: partial checkpointing — memory and time formulas") {
    // One stage, one micro-batch: f0 B0 with inline recomputation. forward 2, backward 4,
    // stored 100, peak 150, input activation 10, model state 1000, r = 0.25:
    //   B0 = backward + r·forward = 4 + 0.5 -> makespan 2 + 4.5 = 6.5 ms; the final memory is
    //   the model state again.
    scenario sc = make_scenario({{2.0}}, {{4.0}}, {{100.0}}, {{150.0}}, {1000.0}, {10.0});
    sc.checkpoint_ratio = {0.25};
    const auto s = merak{merak_variant::early_recompute}(sc);
    CHECK(joined(s.orders[0]) == "f0 B0");
    const auto r = simulate(sc, s);
    CHECK(r.makespan_ms == 6.5);
    CHECK(r.peak_memory_mb[0] == 1150.0);
    CHECK(r.final_memory_mb[0] == 1000.0);
    // An explicit R re-runs the whole forward (2 ms) and restores the full 100 MB; its B is
    // then the plain backward. Two stages, two micro-batches, early: stage 0 runs
    // f0 f1 B0 R1 B1; stage 1 f0 B0 f1 B1 (uniform: forward 1, backward 2 per stage).
    scenario two = uniform_scenario(2, 2);
    two.checkpoint_ratio = {0.5, 0.5};
    const auto s2 = merak{merak_variant::early_recompute}(two);
    CHECK(joined(s2.orders[0]) == "f0 f1 B0 R1 B1");
    const auto r2 = simulate(two, s2);
    // Stage 1: f0 [1,2], B0 [2, 2+2+0.5], f1 [4.5, 5.5] (f1 of stage 0 ended at 2), B1 [5.5, 8].
    // Stage 0: f0 [0,1], f1 [1,2], B0 [4.5, 7] (inline: 2 + 0.5), R1 [7, 8], B1 [8, 10].
    CHECK(r2.makespan_ms == 10.0);
    CHECK(r2.timeline[0][3].o == op{op_kind::R, 1, 0});
    CHECK(r2.timeline[0][3].end_ms - r2.timeline[0][3].start_ms == 1.0);
    CHECK(r2.timeline[0][4].end_ms - r2.timeline[0][4].start_ms == 2.0);
    CHECK(reference_replay(two, s2).makespan_ms == 10.0);
    // Memory of stage 0 (model 100, stored 10, peak 20, no input activation, r = 0.5): f0 keeps
    // (1 - 0.5)·10 = 5; during f1 100 + 5 + 20 = 125; from the end of f1 (t = 2) until B0
    // starts (t = 4.5) it holds 100 + 5 + 5 = 110 MB; R1 restores 10 (during: 100 + 20).
    REQUIRE(r2.memory_mb[0].size() >= 5);
    CHECK(r2.memory_mb[0][3].time_ms == 2.0);
    CHECK(r2.memory_mb[0][3].memory_mb == 110.0);
    CHECK(r2.memory_mb[0][4].time_ms == 4.5);
    CHECK(r2.peak_memory_mb[0] == 125.0);
    CHECK(r2.peak_memory_op[0] == op{op_kind::F_checkpoint, 1, 0});
    CHECK(reference_replay(two, s2).peak_mb[0] == 125.0);
}
