// Tests of pipeplan/schedule/order_search.hpp: starts, local search, the memo, errors.
#include <doctest/doctest.h>

#include <cstring>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

using namespace pipeplan::schedule;
using pipeplan::test::check_schedule;
using pipeplan::test::random_scenario;
using pipeplan::test::two_stage;

TEST_CASE("order search: deterministic, within the limit, better than random permutations") {
    const scenario sc = random_scenario(4, 25, 2024);
    const double limit = 1000.0 + 5.0 * 2.0 * 100.0 * 2.0;
    order_search_options opt;
    opt.memory_limit_mb = limit;
    opt.seed = 7;
    opt.search_inflight_limit = true;
    auto factory = [](std::size_t l) {
        adaptive a;
        a.memory_limit_mb = 1000.0 + 5.0 * 2.0 * 100.0 * 2.0;
        a.inflight_limit = l;
        a.search_preferences = false;
        return a;
    };
    const auto a = search_order_with(sc, factory, opt);
    const auto b = search_order_with(sc, factory, opt);
    REQUIRE(a.feasible);
    CHECK(a.order == b.order);
    CHECK(a.makespan_ms == b.makespan_ms);
    CHECK(a.inflight_limit == b.inflight_limit);
    CHECK(a.peak_memory_mb <= limit + 1e-6);
    // The reported makespan and peak are what the chosen order and limit give (the search took
    // the makespan from adaptive's replay_facts and simulated the winner for its peak).
    auto gen = factory(a.inflight_limit);
    const scenario r = reorder(sc, a.order);
    const simulation_result chosen = simulate(r, gen);
    CHECK(chosen.makespan_ms == a.makespan_ms);
    CHECK(*std::max_element(chosen.peak_memory_mb.begin(), chosen.peak_memory_mb.end()) == a.peak_memory_mb);
    order_search_options no_peak = opt;  // the same search without simulating its winner
    no_peak.simulate_winner = false;
    const auto c = search_order_with(sc, factory, no_peak);
    CHECK(c.order == a.order);
    CHECK(c.makespan_ms == a.makespan_ms);
    CHECK(std::isnan(c.peak_memory_mb));
    // Not worse than the given order.
    CHECK(a.makespan_ms <= simulate(sc, factory(0)).makespan_ms + 1e-9);
    // Better than the best of as many random permutations (same evaluation budget).
    splitmix64 rng(99);
    double best_random = std::numeric_limits<double>::infinity();
    std::vector<std::uint32_t> perm(25);
    for (std::uint32_t i = 0; i < 25; ++i) perm[i] = i;
    for (std::size_t k = 0; k < a.evaluations; ++k) {
        for (std::size_t i = 24; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
        best_random = std::min(best_random, evaluate_order(sc, factory(0), perm, limit).first);
    }
    CHECK(a.makespan_ms <= best_random);
    // Fixed generators: 1F1B under the same limit.
    const auto f = search_order(sc, one_f_one_b{}, opt);
    CHECK(f.makespan_ms <= simulate(sc, one_f_one_b{}).makespan_ms + 1e-9);
}

TEST_CASE("order search: the light-ends starts (lightest first and last) are among its starts") {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const scenario sc = random_scenario(4, 9, seed);
        const std::size_t M = sc.microbatches;
        std::vector<std::uint32_t> desc(M);
        for (std::uint32_t j = 0; j < M; ++j) desc[j] = j;
        std::stable_sort(desc.begin(), desc.end(), [&](auto a, auto b) { return sc.work_ms(a) > sc.work_ms(b); });
        const std::uint32_t light = desc[M - 1], second = desc[M - 2];
        std::vector<std::uint32_t> ends{light};
        ends.insert(ends.end(), desc.begin(), desc.end() - 2);
        ends.push_back(second);
        std::vector<std::uint32_t> mirrored(ends.rbegin(), ends.rend());  // second first, light last, ascending
        order_search_options opt;
        opt.max_evaluations = order_search_starts;  // the starts alone
        const auto r = search_order(sc, one_f_one_b{}, opt);
        CHECK(r.evaluations == order_search_starts);
        for (const auto& o : {ends, mirrored})
            CHECK(r.makespan_ms <= evaluate_order(sc, one_f_one_b{}, o, std::numeric_limits<double>::infinity()).first);
        // Fewer than 4 micro-batches: no light-ends starts; the budget goes to the local search.
        const scenario small = random_scenario(3, 3, seed);
        CHECK(search_order(small, one_f_one_b{}, opt).evaluations == order_search_starts);
    }
}

TEST_CASE("order search: a given start continues an earlier search; never worse than the start") {
    const scenario sc = random_scenario(4, 12, 31);
    order_search_options opt;
    opt.max_evaluations = 16;
    opt.seed = 3;
    const auto first = search_order(sc, one_f_one_b{}, opt);
    REQUIRE(first.feasible);
    order_search_options more = opt;
    more.start = first.order;
    more.max_evaluations = 40;
    const auto next = search_order(sc, one_f_one_b{}, more);
    REQUIRE(next.feasible);
    CHECK(next.evaluations == 40);  // the start once, then local moves (no structured starts)
    CHECK(next.makespan_ms <= first.makespan_ms);
    CHECK(simulate(reorder(sc, next.order), one_f_one_b{}).makespan_ms == doctest::Approx(next.makespan_ms));
    // A start of one evaluation is the start itself.
    more.max_evaluations = 1;
    const auto same = search_order(sc, one_f_one_b{}, more);
    CHECK(same.order == first.order);
    CHECK(same.makespan_ms == first.makespan_ms);
    // The start must be a permutation of the micro-batches.
    for (auto bad : {std::vector<std::uint32_t>{0, 1, 2}, std::vector<std::uint32_t>(12, 0u)}) {
        more.start = bad;
        CHECK_THROWS_WITH_AS((void)search_order(sc, one_f_one_b{}, more), doctest::Contains("not a permutation"),
                             pipeplan::invalid_argument);
    }
    more.start = first.order;
    more.start[0] = 12;
    CHECK_THROWS_AS((void)search_order(sc, one_f_one_b{}, more), pipeplan::invalid_argument);
}

TEST_CASE("order search: invalid or deadlocking schedules are errors; one workspace") {
    const scenario sc = random_scenario(3, 6, 11);
    // A generator whose device 0 runs its ops backwards (B before F): a deadlock.
    auto broken = [](const scenario& s) {
        pipeline_schedule p = one_f_one_b{}(s);
        std::reverse(p.orders[0].begin(), p.orders[0].end());
        return p;
    };
    CHECK_THROWS_AS((void)search_order(sc, broken), schedule_deadlock);
    auto missing = [](const scenario& s) {
        pipeline_schedule p = one_f_one_b{}(s);
        p.orders[1].pop_back();
        return p;
    };
    CHECK_THROWS_WITH_AS((void)search_order(sc, missing), doctest::Contains("has no B op"), pipeplan::invalid_argument);
    // A generator that cannot meet the limit makes the order infeasible, not an error.
    adaptive tight;
    tight.memory_limit_mb = 1.0;
    order_search_options so;
    so.memory_limit_mb = 1.0;
    so.max_evaluations = 8;
    const auto none = search_order(sc, tight, so);
    CHECK_FALSE(none.feasible);
    // One evaluator, many orders: the same figures as fresh simulations. makespan() takes the
    // discovery-based generators' replay_facts (no simulation, NaN peak) and simulates the others.
    order_evaluator ev(sc);
    adaptive held;
    held.memory_limit_mb = 1e9;
    zb_h1 zb;
    zb.memory_limit_mb = 1e9;
    constexpr double no_limit = std::numeric_limits<double>::infinity();
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        std::vector<std::uint32_t> order{0, 1, 2, 3, 4, 5};
        pipeplan::splitmix64 rng(seed);
        for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
        const auto [ms, peak] = ev(one_f_one_b{}, order, no_limit);
        const simulation_result fresh = simulate(reorder(sc, order), one_f_one_b{});
        CHECK(ms == fresh.makespan_ms);
        CHECK(peak == *std::max_element(fresh.peak_memory_mb.begin(), fresh.peak_memory_mb.end()));
        CHECK(ev.makespan(one_f_one_b{}, order, no_limit) == std::pair{ms, peak});
        for (const auto& gen : {any_generator(held), any_generator(zb)}) {
            const pipeline_schedule s = gen(reorder(sc, order));
            REQUIRE(s.replay.has_value());
            const simulation_result replay = simulate(reorder(sc, order), s);
            CHECK(s.replay->makespan_ms == replay.makespan_ms);
            const auto [quick_ms, quick_peak] = ev.makespan(gen, order, 1e9);
            CHECK(quick_ms == replay.makespan_ms);
            CHECK(std::isnan(quick_peak));
            CHECK(ev(gen, order, 1e9).first == replay.makespan_ms);
            // A search limit below the generator's: the replay_facts do not settle it; simulated.
            CHECK(ev.makespan(gen, order, 1e8) == ev(gen, order, 1e8));
        }
    }
}

TEST_CASE("order search: generators that give up above the makespan to beat change nothing") {
    for (std::uint64_t seed = 1; seed <= 4; ++seed)
        for (const char* name : {"zb-v", "v-half", "v-min", "adaptive"})
            for (const double limit : {1e9, 1700.0}) {
                INFO(name << ", seed " << seed << ", limit " << limit);
                const schedule_traits& t = schedules().at(name);
                named_schedule_options o;
                o.memory_limit_mb = limit;
                const scenario sc = prepare_scenario(t, random_scenario(4, 12, seed), o);
                order_search_options so;
                so.memory_limit_mb = limit;
                so.seed = seed;
                so.max_evaluations = 40;
                const order_search_result cut = search_named_order(t, sc, o, so);  // may give up
                so.search_inflight_limit = t.searches_inflight_limit;
                const order_search_result full = search_order_with(
                    sc,
                    [&](std::size_t inflight) {
                        named_schedule_options q = o;
                        q.inflight_limit = inflight;
                        q.quick = true;
                        return make_generator(t, q);
                    },
                    so);
                CHECK(cut.order == full.order);
                CHECK(cut.inflight_limit == full.inflight_limit);
                CHECK(cut.feasible == full.feasible);
                CHECK((cut.makespan_ms == full.makespan_ms || !full.feasible));
                CHECK(cut.evaluations == full.evaluations);
            }
}

TEST_CASE("order search: beat_ms keeps only orders faster than it (the planner's screen)") {
    for (std::uint64_t seed = 1; seed <= 4; ++seed)
        for (const char* name : {"zb-v", "v-half", "adaptive"}) {
            INFO(name << ", seed " << seed);
            const schedule_traits& t = schedules().at(name);
            named_schedule_options o;
            o.memory_limit_mb = 1700.0;
            const scenario sc = prepare_scenario(t, random_scenario(4, 12, seed), o);
            order_search_options so;
            so.memory_limit_mb = o.memory_limit_mb;
            so.max_evaluations = order_search_starts;  // the starts alone, as the screen
            const order_search_result free = search_named_order(t, sc, o, so);
            REQUIRE(free.feasible);
            so.beat_ms = free.makespan_ms;  // nothing is faster than the best start
            const order_search_result tied = search_named_order(t, sc, o, so);
            CHECK_FALSE(tied.feasible);
            so.beat_ms = free.makespan_ms * (1.0 + 1e-6);  // the best start beats it
            const order_search_result above = search_named_order(t, sc, o, so);
            CHECK(above.feasible);
            CHECK(above.makespan_ms == free.makespan_ms);
            CHECK(above.order == free.order);
        }
}

TEST_CASE("order search: the evaluation memo finds exactly the (order, limit) pairs added") {
    pipeplan::schedule::detail::evaluation_memo memo;
    const std::vector<std::uint32_t> a{0, 1, 2, 3}, b{1, 0, 2, 3}, c{0, 1, 3, 2};
    CHECK(memo.find(a, 0) == nullptr);
    memo.add(a, 0, {10.0, 5.0});
    memo.add(a, 2, {9.0, 6.0});
    memo.add(b, 0, {std::numeric_limits<double>::infinity(), 7.0});
    REQUIRE(memo.find(a, 0) != nullptr);
    CHECK(*memo.find(a, 0) == std::pair{10.0, 5.0});
    CHECK(*memo.find(a, 2) == std::pair{9.0, 6.0});
    CHECK(memo.find(b, 0)->first == std::numeric_limits<double>::infinity());
    CHECK(memo.find(a, 1) == nullptr);
    CHECK(memo.find(b, 2) == nullptr);
    CHECK(memo.find(c, 0) == nullptr);
    // Many orders: every one found with its own value.
    std::vector<std::vector<std::uint32_t>> orders;
    std::vector<std::uint32_t> o{0, 1, 2, 3, 4, 5};
    do orders.push_back(o);
    while (std::next_permutation(o.begin(), o.end()));
    for (std::size_t k = 0; k < orders.size(); ++k) memo.add(orders[k], k % 3, {static_cast<double>(k), 0.0});
    for (std::size_t k = 0; k < orders.size(); ++k) {
        const auto* v = memo.find(orders[k], k % 3);
        REQUIRE(v != nullptr);
        CHECK(v->first == static_cast<double>(k));
        CHECK(memo.find(orders[k], k % 3 + 1) == nullptr);
    }
}
