// Order discovery (schedule/order_discovery.hpp) against the same policy with linear scans
// (order_discovery_reference.hpp, quadratic): identical orders, makespans and errors on random scenarios
// covering what discovery supports — placements with chunks, memory limits from none to ones
// that force waiting, in-flight limits, split backwards, per-device preferences, networks,
// and exact ties in times and memory. Plus the exact-sum rule of detail::reserved_memory.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "order_discovery_reference.hpp"
#include "pipeplan/schedule.hpp"

namespace {

namespace ps = pipeplan::schedule;

struct rng_t {
    ps::splitmix64 g;
    double uni(double lo, double hi) {
        return lo + (hi - lo) * static_cast<double>(g() >> 11) / static_cast<double>(1ull << 53);
    }
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(g() % n); }
};

// A random scenario of V stages: `coarse` values are small integers (many exact ties in
// times and memory), else arbitrary doubles.
ps::scenario random_discovery_scenario(rng_t& r, std::size_t V, std::size_t M, bool coarse, bool network) {
    auto val = [&](double lo, double hi) { return coarse ? std::floor(r.uni(lo, hi + 1.0)) : r.uni(lo, hi); };
    std::vector<std::vector<double>> f(M), b(M), st(M), pk(M);
    std::vector<double> act(M), model(V);
    for (auto& m : model) m = val(0.0, 50.0);
    for (std::size_t j = 0; j < M; ++j) {
        act[j] = val(0.0, 20.0);
        for (std::size_t s = 0; s < V; ++s) {
            f[j].push_back(val(0.0, 4.0));  // zero-length ops too
            b[j].push_back(val(0.0, 8.0));
            st[j].push_back(val(0.0, 30.0));
            pk[j].push_back(st[j].back() + val(0.0, 20.0));
        }
    }
    ps::network_model nw;
    if (network) {
        nw.latency_ms = coarse ? 1.0 : r.uni(0.0, 1.0);
        nw.bandwidth_gbps = coarse ? 80.0 : r.uni(10.0, 200.0);
        nw.intra_node_latency_ms = coarse ? 0.0 : r.uni(0.0, 0.2);
        nw.devices_per_node = static_cast<std::uint32_t>(1 + r.below(3));
    }
    return ps::make_scenario(f, b, st, pk, model, act, nw);
}

// The smallest memory limit under which discovery can run (one micro-batch alone on its
// device), per device maximum.
double single_microbatch_mb(const ps::scenario& sc, const ps::stage_placement& pl) {
    const std::size_t D = pl.devices();
    double need = 0.0;
    for (std::size_t j = 0; j < sc.microbatches; ++j) {
        std::vector<double> model(D, 0.0), res(D, 0.0), gap(D, 0.0);
        for (std::size_t v = 0; v < sc.stages; ++v) {
            const std::size_t d = pl.device_of(v);
            model[d] += sc.model_state_mb[v];
            res[d] += sc.stored(j, v);
            gap[d] = std::max(gap[d], sc.peak(j, v) - sc.stored(j, v));
        }
        for (std::size_t d = 0; d < D; ++d) need = std::max(need, model[d] + res[d] + gap[d]);
    }
    return need;
}

struct outcome {
    std::optional<ps::discovery_result> result;
    std::string error;
};
template <class F>
outcome run(F&& f) {
    try {
        return {f(), {}};
    } catch (const pipeplan::limit_exceeded& e) {
        return {std::nullopt, e.what()};
    }
}

// The wait-free replay of the discovered orders (the simulator) reaches the discovery's makespan
// bit for bit and stays within its memory limit on every device: what pipeline_schedule::replay
// promises for the discovery-based generators (the order search skips their simulation).
void check_replay(const ps::scenario& sc, const ps::stage_placement& pl, const ps::discovery_policy& pol,
                  const ps::discovery_result& d) {
    const ps::pipeline_schedule s{"discovered", pl, d.orders, pol.w_share};
    const ps::simulation_result sim = ps::simulate(sc, s);
    CHECK(sim.makespan_ms == d.makespan_ms);  // bit-for-bit
    for (double p : sim.peak_memory_mb) CHECK(p <= pol.memory_limit_mb + 1e-6);
}

void check_same(const ps::scenario& sc, const ps::stage_placement& pl, const ps::discovery_policy& pol) {
    const outcome fast = run([&] { return ps::discover_order(sc, pl, pol); });
    const outcome ref = run([&] { return pipeplan::test::reference_discover_order(sc, pl, pol); });
    REQUIRE(fast.result.has_value() == ref.result.has_value());
    CHECK(fast.error == ref.error);
    if (!fast.result) return;
    CHECK(fast.result->makespan_ms == ref.result->makespan_ms);  // bit-for-bit
    check_replay(sc, pl, pol, *fast.result);
    REQUIRE(fast.result->orders.size() == ref.result->orders.size());
    for (std::size_t d = 0; d < ref.result->orders.size(); ++d) {
        CAPTURE(d);
        CHECK(fast.result->orders[d] == ref.result->orders[d]);
    }
}

}  // namespace

TEST_CASE("order discovery: identical to the quadratic reference on random scenarios") {
    using pref = ps::discovery_policy::preference;
    rng_t r{ps::splitmix64(20261122)};
    std::size_t tight_runs = 0, throwing = 0;
    for (int iter = 0; iter < 600; ++iter) {
        CAPTURE(iter);
        const std::size_t D = 1 + r.below(5), chunks = 1 + r.below(3), M = 1 + r.below(30);
        const auto kind = chunks == 1 ? ps::placement_kind::linear
                                      : (r.below(2) ? ps::placement_kind::interleaved : ps::placement_kind::v_shape);
        const ps::stage_placement pl(kind, D, chunks);
        const ps::scenario sc = random_discovery_scenario(r, D * chunks, M, r.below(2) == 0, r.below(3) == 0);
        ps::discovery_policy pol;
        pol.prefer = static_cast<pref>(r.below(3));
        if (r.below(2)) {
            pol.prefer_on.resize(D);
            for (auto& p : pol.prefer_on) p = static_cast<pref>(r.below(3));
        }
        if (r.below(3) == 0) pol.w_share = r.below(2) ? 0.5 : r.uni(0.1, 0.9);
        switch (r.below(4)) {
            case 0: pol.inflight_limit = {1 + r.below(4)}; break;
            case 1:
                pol.inflight_limit.resize(D);
                for (auto& l : pol.inflight_limit) l = r.below(5);  // 0 means 1
                break;
            default: break;
        }
        // Memory: none, just enough for one micro-batch (forces waiting), a little more, a
        // little less (throws), or a few micro-batches' worth.
        const double one = single_microbatch_mb(sc, pl);
        switch (r.below(5)) {
            case 0: break;
            case 1: pol.memory_limit_mb = one; ++tight_runs; break;
            case 2: pol.memory_limit_mb = one * r.uni(1.0, 1.5); ++tight_runs; break;
            case 3: pol.memory_limit_mb = one * 0.9; break;
            default: pol.memory_limit_mb = one * r.uni(1.5, 4.0); break;
        }
        try {
            (void)pipeplan::test::reference_discover_order(sc, pl, pol);
        } catch (const pipeplan::limit_exceeded&) {
            ++throwing;
        }
        check_same(sc, pl, pol);
    }
    CHECK(tight_runs > 100);
    CHECK(throwing > 10);
}

TEST_CASE("order discovery: identical to the reference on larger cases (adaptive and zb-h1 policies)") {
    rng_t r{ps::splitmix64(7)};
    for (int iter = 0; iter < 6; ++iter) {
        CAPTURE(iter);
        const std::size_t D = 2 + r.below(6), M = 100 + r.below(200);
        const ps::stage_placement pl = ps::stage_placement::linear(D);
        const ps::scenario sc = random_discovery_scenario(r, D, M, iter % 2 == 0, iter % 3 == 0);
        ps::discovery_policy pol;
        pol.prefer = static_cast<ps::discovery_policy::preference>(iter % 3);
        pol.memory_limit_mb = single_microbatch_mb(sc, pl) * (1.0 + 0.5 * static_cast<double>(iter));
        check_same(sc, pl, pol);
        ps::discovery_policy zb;  // zb-h1's policy
        zb.w_share = 0.5;
        for (std::size_t d = 0; d < D; ++d) zb.inflight_limit.push_back(D - d);
        check_same(sc, pl, zb);
    }
}

TEST_CASE("order discovery: reserved_memory decides like re-adding the members in order") {
    // Random admissions and releases; every fits() answer must equal the test on the sum
    // re-added in admission order (the rule), also at limits placed exactly on that sum and
    // one ulp either side (near ties: the exact path must run).
    rng_t r{ps::splitmix64(99)};
    constexpr std::uint32_t N = 4000;
    ps::detail::reserved_memory mem;
    mem.reset(N);
    std::vector<std::uint32_t> live;
    std::vector<double> value(N);
    std::vector<char> gone(N, 0);
    auto released = [&](std::uint32_t id) { return gone[id] != 0; };
    std::size_t checks = 0, releases = 0;
    for (std::uint32_t id = 0; id < N; ++id) {
        value[id] = r.below(4) == 0 ? std::floor(r.uni(0.0, 100.0)) : r.uni(0.0, 1e4) * (r.below(10) ? 1.0 : 1e-9);
        mem.add(id, value[id]);
        live.push_back(id);
        while (!live.empty() && r.below(3) == 0) {  // release a random member
            const std::size_t i = r.below(live.size());
            mem.remove(value[live[i]]);
            gone[live[i]] = 1;
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
            ++releases;
        }
        double ordered = 0.0;
        for (auto m : live) ordered += value[m];
        const double model = r.uni(0.0, 1e3), extra = r.uni(0.0, 50.0);
        auto f = [&](double reserved) { return model + reserved + extra; };
        const double at = f(ordered);
        for (double limit : {at, std::nextafter(at, 0.0), std::nextafter(at, 1e300), at * (1 + 1e-12), at * 0.999,
                             std::numeric_limits<double>::infinity()}) {
            CHECK(mem.fits(f, limit, released) == (f(ordered) <= limit));
            ++checks;
        }
    }
    CHECK(checks == 6 * N);
    // Near ties took the exact path, at most once per release (the exact sum is kept until the
    // next release).
    CHECK(mem.exact_sums() > 0);
    CHECK(mem.exact_sums() <= releases);
}

TEST_CASE("order discovery: identical to the reference with many devices (the event heap beyond tournament_devices)") {
    using pref = ps::discovery_policy::preference;
    rng_t r{ps::splitmix64(4242)};
    for (int iter = 0; iter < 40; ++iter) {
        CAPTURE(iter);
        const std::size_t D = ps::detail::event_queue::tournament_devices + 1 + r.below(24), chunks = 1 + r.below(2);
        const ps::stage_placement pl(chunks == 1 ? ps::placement_kind::linear : ps::placement_kind::interleaved, D,
                                     chunks);
        const ps::scenario sc = random_discovery_scenario(r, D * chunks, 1 + r.below(12), r.below(2) == 0, r.below(3) == 0);
        ps::discovery_policy pol;
        pol.prefer = static_cast<pref>(r.below(3));
        if (r.below(3) == 0) pol.w_share = 0.5;
        if (r.below(2)) pol.inflight_limit = {1 + r.below(3)};
        if (r.below(2)) pol.memory_limit_mb = single_microbatch_mb(sc, pl) * r.uni(1.0, 2.0);
        check_same(sc, pl, pol);
    }
}

TEST_CASE("order discovery: one engine reused across scenarios and policies, after errors too") {
    // What adaptive does: prepare() once per scenario, run() per policy; a run that threw
    // (limit_exceeded) leaves the engine in any state, and the next run must not see it.
    using pref = ps::discovery_policy::preference;
    rng_t r{ps::splitmix64(515)};
    ps::detail::order_discovery engine;
    std::size_t throwing = 0;
    for (int iter = 0; iter < 60; ++iter) {
        CAPTURE(iter);
        const std::size_t D = 1 + r.below(5), M = 1 + r.below(25);
        const ps::stage_placement pl = ps::stage_placement::linear(D);
        const ps::scenario sc = random_discovery_scenario(r, D, M, r.below(2) == 0, r.below(2) == 0);
        const double w_share = r.below(3) == 0 ? 0.5 : 0.0;
        engine.prepare(sc, pl, w_share);
        const double one = single_microbatch_mb(sc, pl);
        for (int k = 0; k < 4; ++k) {
            CAPTURE(k);
            ps::discovery_policy pol;
            pol.w_share = w_share;
            pol.prefer = static_cast<pref>(k % 3);
            pol.memory_limit_mb = k == 3 ? one * 0.9 : one * r.uni(1.0, 3.0);  // k == 3 throws
            const outcome ref = run([&] { return pipeplan::test::reference_discover_order(sc, pl, pol); });
            const outcome got = run([&] { return ps::discovery_result(engine.run(pol)); });
            REQUIRE(got.result.has_value() == ref.result.has_value());
            CHECK(got.error == ref.error);
            if (!got.result) {
                ++throwing;
                continue;
            }
            CHECK(got.result->makespan_ms == ref.result->makespan_ms);  // bit-for-bit
            CHECK(got.result->orders == ref.result->orders);
        }
    }
    CHECK(throwing > 10);
    ps::discovery_policy other;
    other.w_share = 0.25;  // not the prepared split
    CHECK_THROWS_AS((void)engine.run(other), pipeplan::invalid_argument);
}

TEST_CASE("order discovery: a thread's engine keeps small scenarios' scratch, gives a large one's back") {
    rng_t r{ps::splitmix64(616)};
    const ps::stage_placement pl = ps::stage_placement::linear(4);
    const ps::scenario small = random_discovery_scenario(r, 4, 20, false, false);
    const std::size_t big_m = ps::detail::engine_kept_pairs / 4 + 1;  // just above what is kept
    const ps::scenario big = random_discovery_scenario(r, 4, big_m, true, false);
    const auto& engine = ps::detail::discovery_engine();
    const ps::discovery_policy pol;
    (void)ps::discover_order(small, pl, pol);
    CHECK(engine.pairs() == 4 * 20);
    const ps::discovery_result b = ps::discover_order(big, pl, pol);
    CHECK(engine.pairs() == 0);  // released; the result was copied out first
    CHECK(b.orders[0].size() == 2 * big_m);
    CHECK(b.makespan_ms == ps::simulate(big, ps::pipeline_schedule{"b", pl, b.orders, 0.0}).makespan_ms);
    ps::adaptive a;
    (void)a(big);
    CHECK(engine.pairs() == 0);
    (void)a(small);
    CHECK(engine.pairs() == 4 * 20);
}

TEST_CASE("order discovery: same_decisions() is sound (a run it calls a repeat gives the same orders)") {
    // For random scenarios and every pair of adaptive's 9 (first device, others) preference
    // candidates: when the choice masks of the first run say the second makes every decision
    // the same way, the second run's orders and makespan are the first's, bit for bit.
    using pref = ps::discovery_policy::preference;
    constexpr pref all[3] = {pref::backward_first, pref::forward_first, pref::alternate};
    rng_t r{ps::splitmix64(777)};
    std::size_t repeats = 0, distinct = 0;
    for (int iter = 0; iter < 80; ++iter) {
        CAPTURE(iter);
        const std::size_t D = 1 + r.below(5), chunks = 1 + r.below(2);
        const ps::stage_placement pl(chunks == 1 ? ps::placement_kind::linear : ps::placement_kind::interleaved, D,
                                     chunks);
        const ps::scenario sc =
            random_discovery_scenario(r, D * chunks, 1 + r.below(20), r.below(2) == 0, r.below(3) == 0);
        ps::discovery_policy pol;
        if (r.below(3) == 0) pol.w_share = 0.5;
        if (r.below(2)) pol.inflight_limit = {1 + r.below(4)};
        if (r.below(3)) pol.memory_limit_mb = single_microbatch_mb(sc, pl) * r.uni(1.0, 2.5);
        std::vector<std::vector<pref>> prefs;
        std::vector<ps::discovery_result> results;
        std::vector<std::vector<std::uint8_t>> masks;
        ps::detail::order_discovery engine;
        engine.prepare(sc, pl, pol.w_share);
        for (pref p0 : all)
            for (pref p1 : all) {
                pol.prefer_on.assign(D, p1);
                pol.prefer_on[0] = p0;
                prefs.push_back(pol.prefer_on);
                results.push_back(engine.run(pol));
                masks.push_back(engine.choice_masks());
            }
        for (std::size_t a = 0; a < prefs.size(); ++a)
            for (std::size_t b = 0; b < prefs.size(); ++b) {
                if (a == b) continue;
                const bool same = results[a].makespan_ms == results[b].makespan_ms && results[a].orders == results[b].orders;
                if (ps::detail::same_decisions(prefs[a], masks[a], prefs[b])) {
                    CHECK(same);
                    ++repeats;
                } else {
                    distinct += same ? 0 : 1;
                }
            }
    }
    CHECK(repeats > 100);   // the shortcut applies ...
    CHECK(distinct > 100);  // ... and the candidates also differ
}

TEST_CASE("adaptive: skipping repeated preference candidates keeps the schedule of running all nine") {
    // adaptive's result against its definition: every (first device, others) candidate run with
    // discover_order, the smallest makespan kept (first on ties within 1e-9).
    using pref = ps::discovery_policy::preference;
    constexpr pref all[3] = {pref::backward_first, pref::forward_first, pref::alternate};
    rng_t r{ps::splitmix64(31337)};
    for (int iter = 0; iter < 60; ++iter) {
        CAPTURE(iter);
        const std::size_t D = 2 + r.below(4), M = 1 + r.below(24);
        const ps::scenario sc = random_discovery_scenario(r, D, M, r.below(2) == 0, r.below(3) == 0);
        const ps::stage_placement pl = ps::stage_placement::linear(D);
        ps::adaptive a;
        if (r.below(3)) a.memory_limit_mb = single_microbatch_mb(sc, pl) * r.uni(1.0, 2.5);
        if (r.below(3) == 0) a.inflight_limit = 1 + r.below(4);
        a.search_preferences = r.below(3) != 0;
        const ps::pipeline_schedule got = a(sc);
        ps::discovery_policy pol;
        pol.memory_limit_mb = a.memory_limit_mb;
        if (a.inflight_limit > 0) pol.inflight_limit = {a.inflight_limit};
        ps::discovery_result best;
        best.makespan_ms = std::numeric_limits<double>::infinity();
        for (pref p0 : all)
            for (pref p1 : all) {
                if (p0 != p1 && !a.search_preferences) continue;
                pol.prefer_on.assign(D, p1);
                pol.prefer_on[0] = p0;
                ps::discovery_result res = ps::discover_order(sc, pl, pol);
                if (res.makespan_ms < best.makespan_ms - 1e-9) best = std::move(res);
            }
        REQUIRE(got.replay.has_value());
        CHECK(got.replay->makespan_ms == best.makespan_ms);
        CHECK(got.orders == best.orders);
    }
}

TEST_CASE("order discovery: a per-micro-batch run that surely_gives_up() gives up (and does not throw)") {
    // Random scenarios, linear, interleaved and V placements, in-flight limits 1-4, cuts from
    // 0.3x to 1.1x the full run's makespan: whenever the bound says the run need not be run,
    // the run with that cut gives up; the bound must also say so for some of them.
    rng_t r{ps::splitmix64(4242)};
    std::size_t sure = 0;
    for (int iter = 0; iter < 200; ++iter) {
        CAPTURE(iter);
        const std::size_t D = 1 + r.below(5), chunks = 1 + r.below(2);
        const bool v = chunks == 2 && r.below(2) == 0;
        const ps::stage_placement pl = v ? ps::stage_placement::v_shape(D, 2)
                                         : ps::stage_placement(chunks == 1 ? ps::placement_kind::linear
                                                                           : ps::placement_kind::interleaved,
                                                               D, chunks);
        const ps::scenario sc =
            random_discovery_scenario(r, D * chunks, 1 + r.below(20), r.below(2) == 0, r.below(3) == 0);
        ps::discovery_policy pol;
        if (r.below(2) == 0) pol.w_share = 0.5;
        pol.inflight_limit = {1 + r.below(4)};
        if (r.below(3)) pol.memory_limit_mb = single_microbatch_mb(sc, pl) * r.uni(0.9, 2.5);
        ps::detail::order_discovery engine;
        engine.prepare(sc, pl, pol.w_share);
        double full_ms = 0.0;
        try {
            full_ms = engine.run(pol).makespan_ms;
        } catch (const pipeplan::limit_exceeded&) {
            pol.give_up_above_ms = 1.0;
            CHECK_FALSE(engine.surely_gives_up(pol));  // a run that may throw must run
            continue;
        }
        for (const double cut : {0.3, 0.5, 0.8, 0.99, 1.0, 1.1}) {
            CAPTURE(cut);
            pol.give_up_above_ms = cut * full_ms;
            if (!engine.surely_gives_up(pol)) continue;
            ++sure;
            CHECK(engine.run(pol).gave_up);
        }
    }
    CHECK(sure > 20);
}
