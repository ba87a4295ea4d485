// The golden makespans of docs/schedules.md, checked as exact values. Each value is derived
// twice: by the library and by the independent replay of reference.hpp (a different algorithm
// written from the documented rules), on the order the library's generator produced; closed
// forms are written next to the checks where they exist.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "reference.hpp"

using namespace pipeplan::schedule;
using namespace pipeplan::test;

namespace {

/// The golden scenario of docs/schedules.md: S = 4, forward 4, 4, 2, 2 ms × m, backward 2× forward,
/// 4000 MB model state, stored 8000·m MB, peak 16000·m MB, no communication.
scenario golden_scenario() {
    return scaled_scenario({4, 4, 2, 2}, {1, .8, 1.2, .9, 1.1, .7, 1.4, .6}, 2.0, 4000, 8000, 16000);
}

/// Checks makespan and stage-0 peak of `s` on `sc`: the library's simulation, the reference
/// replay and the documented values agree exactly (to rounding).
void golden(const scenario& sc, const pipeline_schedule& s, double makespan_ms, double peak0_mb) {
    CAPTURE(s.name);
    const simulation_result r = check_schedule(sc, s);
    const reference_result ref = reference_replay(sc, s);
    REQUIRE_FALSE(ref.deadlock);
    CHECK(r.makespan_ms == doctest::Approx(makespan_ms).epsilon(1e-12));
    CHECK(ref.makespan_ms == doctest::Approx(makespan_ms).epsilon(1e-12));
    CHECK(r.peak_memory_mb[0] == doctest::Approx(peak0_mb).epsilon(1e-12));
    CHECK(ref.peak_mb[0] == doctest::Approx(peak0_mb).epsilon(1e-12));
}

}  // namespace

TEST_CASE("golden: the makespan and peak-memory table of docs/schedules.md") {
    const scenario sc = golden_scenario();
    // 1F1B: stage 0 (F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 ...) peaks while F6 (m = 1.4) runs with
    // micro-batches 3, 4, 5 stored: 4000 + 8000·(.9 + 1.1 + .7) + 16000·1.4 = 48000 MB.
    golden(sc, one_f_one_b{}(sc), 120.4, 48000.0);
    // GPipe: stage 0 peaks while B0 runs with the other seven stored:
    // 4000 + 8000·(7.7 − 1) + 16000·1 = 73600 MB.
    golden(sc, gpipe{}(sc), 121.6, 73600.0);
    golden(sc, adaptive{}(sc), 108.4, 73600.0);
    adaptive held;
    held.memory_limit_mb = 48000.0;
    golden(sc, held(sc), 116.0, 48000.0);
    // --search-order's result under 48000 MB: order 5 1 2 6 7 3 4 0, in-flight limit 4.
    const scenario searched = reorder(sc, {5, 1, 2, 6, 7, 3, 4, 0});
    held.inflight_limit = 4;
    golden(searched, held(searched), 108.4, 48000.0);
    const pipeline_schedule zb = zb_h1{}(sc);
    const simulation_result rz = check_schedule(sc, zb);
    CHECK(rz.makespan_ms == doctest::Approx(104.4).epsilon(1e-12));
    CHECK(reference_replay(sc, zb).makespan_ms == doctest::Approx(104.4).epsilon(1e-12));
    CHECK(rz.peak_memory_mb[0] == doctest::Approx(44400.0).epsilon(1e-12));
    // 1F1B + order search under 48000 MB (seed 1, as `pipeplan simulate --search-order`).
    order_search_options so;
    so.memory_limit_mb = 48000.0;
    const auto best = search_order(sc, one_f_one_b{}, so);
    REQUIRE(best.feasible);
    const scenario o = reorder(sc, best.order);
    golden(o, one_f_one_b{}(o), 111.6, best.peak_memory_mb);
    CHECK(best.makespan_ms == doctest::Approx(111.6).epsilon(1e-12));
    // Lower bound: stage 1: fill 4·0.6 + work 12·7.7 + drain 8·0.6 = 2.4 + 92.4 + 4.8 = 99.6.
    CHECK(lower_bound(sc, stage_placement::linear(4)).bound_ms == doctest::Approx(99.6).epsilon(1e-12));
}

TEST_CASE("golden: Merak's variants on uniform S = 4, M = 8 (docs/schedules.md)") {
    // Forward f = 1, backward b = 2 per stage; stored 10, peak 20, model 100 MB; activation 0.
    const scenario sc = uniform_scenario(4, 8);
    // 1F1B: (M + S - 1)(f + b) = 11 · 3 = 33 ms; stage 0 peaks at 100 + 3·10 + 20 = 150 MB
    // (F3 runs while F0..F2 are stored).
    golden(sc, one_f_one_b{}(sc), 33.0, 150.0);
    // 1F1B with full checkpointing everywhere: every B recomputes inline, so it is 1F1B with a
    // backward of b + f: (M + S - 1)(f + b + f) = 11 · 4 = 44 ms; an f keeps its input (0 MB
    // here), so the peak is 100 + 20 = 120 MB.
    pipeline_schedule ckpt = one_f_one_b{}(sc);
    for (auto& dev : ckpt.orders)
        for (op& x : dev)
            if (x.kind == op_kind::F) x.kind = op_kind::F_checkpoint;
    golden(sc, ckpt, 44.0, 120.0);
    // Merak: each explicit R moves a recomputation off the gradient path (early 41, last 39,
    // critical 38 ms; also replayed by a separate script while writing the docs). Memory: an f
    // keeps its input (0 MB here) and an R's restored 10 MB is freed by the B right after it,
    // so every op runs next to nothing else stored: 100 + 20 = 120 MB.
    golden(sc, merak{merak_variant::early_recompute}(sc), 41.0, 120.0);
    golden(sc, merak{merak_variant::last_stage_no_recompute}(sc), 39.0, 120.0);
    golden(sc, merak{merak_variant::shifted_critical_path}(sc), 38.0, 120.0);
}
