// Tests of pipeplan/schedule/simulator.hpp: the event replay (links, memory model, malformed schedules, memory limits).
#include <doctest/doctest.h>

#include <cstring>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/links.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

using namespace pipeplan::schedule;
using pipeplan::test::check_schedule;
using pipeplan::test::random_scenario;
using pipeplan::test::two_stage;

namespace {
/// S = 3, M = 4 equal micro-batches (forward 1, backward 2 ms; model 100, stored 10, peak 20 MB).
scenario uniform_scenario_for_limits() { return pipeplan::test::uniform_scenario(3, 4); }
}  // namespace

TEST_CASE("simulator: latency and per-link bandwidth (messages queue on a link)") {
    network_model nw;
    nw.latency_ms = 0.5;
    nw.bandwidth_gbps = 8.0;  // 5 MB -> 5 ms on the wire
    const scenario sc = two_stage(5.0, nw);
    const auto r = check_schedule(sc, gpipe{}(sc));
    // F0 on s0 ends at 1, wire 1..6, arrives 6.5; F1 ends at 2, waits for the link until 6,
    // arrives 11.5.
    CHECK(r.timeline[1][0].start_ms == doctest::Approx(6.5));
    CHECK(r.timeline[1][1].start_ms == doctest::Approx(11.5));
    // Free network: pure dependencies.
    const scenario free = two_stage(5.0, {});
    const auto f = simulate(free, gpipe{});
    CHECK(f.timeline[1][0].start_ms == doctest::Approx(1.0));
    CHECK(f.makespan_ms == doctest::Approx(15.0));  // s1: F 1-5, B 5-13; s0: B1 13-15
    // Intra-node links use the intra-node figures.
    network_model node = nw;
    node.devices_per_node = 2;
    const auto n = simulate(two_stage(5.0, node), gpipe{});
    CHECK(n.timeline[1][0].start_ms == doctest::Approx(1.0));
}

TEST_CASE("simulator: memory model (stored, peak, checkpoints, W residual)") {
    const scenario sc = two_stage(5.0, {});
    const auto r = simulate(sc, gpipe{});
    // Stage 0: F0 (peak 20), holds 10; F1 holds 20 total, peak 10 + 20; B0: 10 + 20.
    CHECK(r.peak_memory_mb[0] == doctest::Approx(100 + 10 + 20));
    CHECK(r.memory_mb[0].front().memory_mb == doctest::Approx(100));
    CHECK(r.memory_mb[0].back().memory_mb == doctest::Approx(100));
    // A checkpointed forward keeps only activation_mb.
    pipeline_schedule s{"ck", stage_placement::linear(2),
                        {{{op_kind::F_checkpoint, 0, 0}, {op_kind::F_checkpoint, 1, 0}, {op_kind::R, 0, 0}, {op_kind::B, 0, 0}, {op_kind::B, 1, 0}},
                         {{op_kind::F, 0, 1}, {op_kind::B, 0, 1}, {op_kind::F, 1, 1}, {op_kind::B, 1, 1}}},
                        0.0};
    const auto c = check_schedule(sc, s);
    // After f0 f1: 100 + 5 + 5; R0 runs with 105 + 20 = 125 (f1's checkpoint + R0's peak).
    CHECK(c.peak_memory_mb[0] == doctest::Approx(125));
    // B1 recomputes inline: forward + backward time.
    const auto& last = c.timeline[0].back();
    CHECK(last.end_ms - last.start_ms == doctest::Approx(1 + 2));
}

TEST_CASE("simulator: malformed schedules are rejected") {
    const scenario sc = two_stage(0.0, {});
    pipeline_schedule s = one_f_one_b{}(sc);
    auto bad = s;
    std::swap(bad.orders[1][0], bad.orders[1][1]);  // B0 before F0 on the last stage
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("deadlocks"), pipeplan::invalid_argument);
    bad = s;
    bad.orders[0].pop_back();
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("has no B op"), pipeplan::invalid_argument);
    bad = s;
    bad.orders[0].push_back(bad.orders[0].front());
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("twice"), pipeplan::invalid_argument);
    bad = s;
    bad.orders[0].front().stage = 1;
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("device 1"), pipeplan::invalid_argument);
    bad = s;
    bad.orders[0].push_back({op_kind::W, 0, 0});
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("W op in a schedule without a B/W split"),
                         pipeplan::invalid_argument);
    // Recomputation: an R after an F (not an f), or after its own B (which waits for it).
    bad = s;
    bad.orders[0].insert(bad.orders[0].begin() + 1, op{op_kind::R, 0, 0});
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("whose forward was not checkpointed"),
                         pipeplan::invalid_argument);
    bad = s;
    bad.orders[0].front().kind = op_kind::F_checkpoint;
    bad.orders[0].push_back({op_kind::R, 0, 0});
    CHECK_THROWS_WITH_AS((void)simulate(sc, bad), doctest::Contains("deadlocks"), pipeplan::invalid_argument);
    // A workspace that saw these runs the schedule as a fresh one does.
    simulation_workspace ws;
    simulation_result reused;
    for (int round = 0; round < 2; ++round) {
        CHECK_THROWS_AS(simulate_into(reused, sc, bad, {}, ws), pipeplan::invalid_argument);
        simulate_into(reused, sc, s, {}, ws);
        CHECK(reused.makespan_ms == simulate(sc, s).makespan_ms);
    }
}

TEST_CASE("memory limits: fixed orders fail naming device, op, peak and limit") {
    const scenario sc = uniform_scenario_for_limits();
    const pipeline_schedule s = one_f_one_b{}(sc);
    const simulation_result r = simulate(sc, s);
    // Stage 0 of 1F1B, S = 3, M = 4: F0 F1 F2 B0 F3 B1 B2 B3; peak while F2 runs with F0, F1
    // stored: 100 + 2·10 + 20 = 140 MB.
    CHECK(r.peak_memory_mb[0] == 140.0);
    CHECK(r.peak_memory_op[0] == op{op_kind::F, 2, 0});
    CHECK_NOTHROW(check_memory_limit(r, s, 140.0));
    CHECK_THROWS_WITH_AS(check_memory_limit(r, s, 130.0),
                         doctest::Contains("exceeds the memory limit on device 0: peak 140.000000 MB during op F2 "
                                           "(stage 0), limit 130.000000 MB"),
                         pipeplan::limit_exceeded);
}

namespace {
/// Every field of two results equal, bit for bit (timelines and memory curves included).
void check_identical(const simulation_result& a, const simulation_result& b) {
    CHECK(a.makespan_ms == b.makespan_ms);
    CHECK(a.lower_bound_ms == b.lower_bound_ms);
    CHECK(a.busy_ms == b.busy_ms);
    CHECK(a.bubble_fraction == b.bubble_fraction);
    CHECK(a.peak_memory_mb == b.peak_memory_mb);
    CHECK(a.peak_memory_op == b.peak_memory_op);
    CHECK(a.final_memory_mb == b.final_memory_mb);
    REQUIRE(a.timeline.size() == b.timeline.size());
    for (std::size_t d = 0; d < a.timeline.size(); ++d) {
        REQUIRE(a.timeline[d].size() == b.timeline[d].size());
        for (std::size_t i = 0; i < a.timeline[d].size(); ++i) {
            const op_timing &x = a.timeline[d][i], &y = b.timeline[d][i];
            CHECK((x.o == y.o && x.start_ms == y.start_ms && x.end_ms == y.end_ms));
        }
    }
    REQUIRE(a.memory_mb.size() == b.memory_mb.size());
    for (std::size_t d = 0; d < a.memory_mb.size(); ++d) {
        REQUIRE(a.memory_mb[d].size() == b.memory_mb[d].size());
        for (std::size_t i = 0; i < a.memory_mb[d].size(); ++i)
            CHECK((a.memory_mb[d][i].time_ms == b.memory_mb[d][i].time_ms &&
                   a.memory_mb[d][i].memory_mb == b.memory_mb[d][i].memory_mb));
    }
}
}  // namespace

// On a free network simulate() replays in one pass over the orders (order_sweep), the indexed
// sweep replays what it leaves (overlapped pairs, given durations), and the event replay
// (completions in time order, what links need) is the general method. All must give the same
// result bit for bit, on variable micro-batches and every kind of op (f/R checkpoints, split B/W,
// interleaved chunks), reusing one workspace and one result.
TEST_CASE("simulator: the one-pass replay, the free-network sweep and the event replay agree bit for bit") {
    using detail::replay_method;
    simulation_workspace ws;
    simulation_result orders, sweep, events;
    std::size_t compared = 0;
    for (std::uint64_t seed = 1; seed <= 12; ++seed)
        for (std::size_t S : {2u, 3u, 5u, 8u}) {
            const std::size_t M = 1 + (seed * 7 + S) % 23;
            CAPTURE(seed);
            CAPTURE(S);
            CAPTURE(M);
            const scenario sc = random_scenario(S, M, seed);
            adaptive limited;
            limited.memory_limit_mb = 4.0 * 200.0 * static_cast<double>(S);
            zb_h1 zb;
            zb.w_share = 0.3;
            std::vector<std::pair<scenario, pipeline_schedule>> runs{
                {sc, gpipe{}(sc)}, {sc, one_f_one_b{}(sc)}, {sc, limited(sc)}, {sc, zb(sc)}};
            if (M >= S) runs.emplace_back(sc, merak{merak_variant::early_recompute}(sc));
            const scenario vs = split_into_chunks(sc, 2);
            runs.emplace_back(vs, interleaved_1f1b{2}(vs));
            for (const auto& [s, sched] : runs) {
                CAPTURE(sched.name);
                CHECK(detail::order_sweep(ws, s, sched).run(orders, {}));  // handled by the one-pass replay
                detail::simulate_into_by(orders, s, sched, {}, ws, replay_method::orders);
                detail::simulate_into_by(sweep, s, sched, {}, ws, replay_method::sweep);
                detail::simulate_into_by(events, s, sched, {}, ws, replay_method::events);
                check_identical(orders, events);
                check_identical(sweep, events);
                ++compared;
            }
        }
    CHECK(compared >= 12 * 4 * 5);
}

// The one-pass replay's memory: the devices' curves back to back in the result (rows of at most
// 2 points per op and 1 more, no gaps), and tables of exactly the four op classes' slots (no
// slot for the input that does not exist, which would spill the F and B tables into another
// page where they fill whole pages).
TEST_CASE("simulator: the one-pass replay writes the curves back to back and keeps no extra table slot") {
    simulation_workspace ws;
    simulation_result r;
    zb_h1 zb;
    zb.w_share = 0.3;
    for (std::uint64_t seed = 1; seed <= 18; ++seed) {  // S 2, 4, 8; M 4-22
        const std::size_t S = std::size_t{2} << seed % 3, M = 4 + (seed * 5 + S) % 19;
        CAPTURE(seed);
        const scenario sc = random_scenario(S, M, seed);
        for (const pipeline_schedule& sched : {one_f_one_b{}(sc), gpipe{}(sc), zb(sc)}) {
            CAPTURE(sched.name);
            REQUIRE(detail::order_sweep(ws, sc, sched).run(r, {}));
            CHECK(ws.structure_tables.done.size() == 4 * S * M);
            REQUIRE(r.memory_mb.size() == S);
            std::size_t points = 0;
            for (std::size_t d = 0; d < S; ++d) {
                CHECK(r.memory_mb[d].size() <= 2 * sched.orders[d].size() + 1);
                if (d > 0) CHECK(r.memory_mb[d].data() == r.memory_mb[d - 1].data() + r.memory_mb[d - 1].size());
                points += r.memory_mb[d].size();
            }
            CHECK(r.memory_mb.used() == points);
            const simulation_result fresh = simulate(sc, sched);  // and the same curves as a fresh run
            for (std::size_t d = 0; d < S; ++d)
                CHECK(std::equal(r.memory_mb[d].begin(), r.memory_mb[d].end(), fresh.memory_mb[d].begin(),
                                 fresh.memory_mb[d].end(), [](const memory_point& a, const memory_point& b) {
                                     return std::memcmp(&a, &b, sizeof a) == 0;
                                 }));
        }
    }
}

// The first-sight run checks each op of an order once, before it first tries it (a device that
// waited runs on from the op it waited at, checked then): an op out of range, overlapped or of
// another device is refused at any position of any order, and the general replay gives what the
// event replay gives (the same error, or for an overlapped pair the same result).
TEST_CASE("simulator: the first-sight run refuses a bad op at any position, after a wait too") {
    const scenario sc = random_scenario(3, 5, 7);
    const pipeline_schedule s = one_f_one_b{}(sc);
    simulation_workspace ws;
    simulation_result r, events;
    auto outcome = [&](const pipeline_schedule& sched, detail::replay_method method, simulation_result& out) {
        try {
            detail::simulate_into_by(out, sc, sched, {}, ws, method);
        } catch (const pipeplan::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    std::size_t refused = 0;
    for (std::size_t d = 0; d < s.orders.size(); ++d)
        for (std::size_t p = 0; p < s.orders[d].size(); ++p)
            for (int how = 0; how < 4; ++how) {
                CAPTURE(d);
                CAPTURE(p);
                CAPTURE(how);
                pipeline_schedule bad = s;
                op& o = bad.orders[d][p];
                if (how == 0) o.microbatch = 5;
                if (how == 1) o.stage = 3;
                if (how == 2) o.overlaps_next = true;
                if (how == 3) o.stage = static_cast<std::uint32_t>((d + 1) % 3);  // another device's
                refused += detail::order_sweep(ws, sc, bad).run(r, {}) ? 0 : 1;
                const std::string error = outcome(bad, detail::replay_method::orders, r);
                CHECK(error == outcome(bad, detail::replay_method::events, events));
                if (error.empty()) check_identical(r, events);
            }
    CHECK(refused == 4 * 2 * 3 * 5);
}

// simulation_options::give_up_above_ms: the event replay (links) stops only when the makespan
// is sure to exceed the cut, and otherwise gives the full replay's result bit for bit.
TEST_CASE("simulator: the replay with links gives up only above give_up_above_ms") {
    simulation_workspace ws;
    simulation_result full, cut_run;
    std::size_t gave_up = 0, compared = 0;
    for (std::uint64_t seed = 1; seed <= 12; ++seed)
        for (std::size_t S : {2u, 3u, 5u}) {
            const std::size_t M = 1 + (seed * 7 + S) % 17;
            CAPTURE(seed);
            CAPTURE(S);
            CAPTURE(M);
            const scenario sc = random_scenario(S, M, seed, true);
            zb_h1 zb;
            zb.w_share = 0.3;
            std::vector<std::pair<scenario, pipeline_schedule>> runs{{sc, gpipe{}(sc)}, {sc, one_f_one_b{}(sc)}, {sc, zb(sc)}};
            const scenario vs = split_into_chunks(sc, 2);
            runs.emplace_back(vs, interleaved_1f1b{2}(vs));
            for (const auto& [s, sched] : runs) {
                CAPTURE(sched.name);
                simulation_options opt;
                opt.compute_lower_bound = false;
                simulate_into(full, s, sched, opt, ws);
                for (const double f : {0.0, 0.5, 0.97, 0.999, 1.0, 1.03}) {
                    CAPTURE(f);
                    opt.give_up_above_ms = f * full.makespan_ms;
                    simulate_into(cut_run, s, sched, opt, ws);
                    if (std::isinf(cut_run.makespan_ms)) {
                        CHECK(full.makespan_ms > opt.give_up_above_ms);
                        ++gave_up;
                    } else {
                        check_identical(cut_run, full);
                        ++compared;
                    }
                }
            }
        }
    CHECK(gave_up > 12 * 3 * 4);
    CHECK(compared > 12 * 3 * 4);
}

// Every built-in schedule of the registry on random unequal
// micro-batches, with and without a memory limit that binds: the one-pass replay equals the
// event replay bit for bit, with the timeline and curve and without them.
TEST_CASE("simulator: every registered schedule replays in one pass as the event replay does") {
    using detail::replay_method;
    simulation_workspace ws;
    simulation_result orders, events;
    std::size_t compared = 0, one_pass = 0;
    const std::vector<schedule_traits> rows = builtin_schedules();
    for (const schedule_traits& row : rows)
        for (std::uint64_t seed = 1; seed <= 6; ++seed)
            for (const double limit_mb : {std::numeric_limits<double>::infinity(), 1000.0 + 900.0 * static_cast<double>(seed)}) {
                CAPTURE(row.name);
                CAPTURE(seed);
                CAPTURE(limit_mb);
                const std::size_t S = 2 + seed % 4 * 2, M = 3 + (seed * 5) % 17;
                const schedule_traits& t = schedules().at(row.name);
                named_schedule_options o;
                o.memory_limit_mb = limit_mb;
                const scenario sc = prepare_scenario(t, random_scenario(S, M, seed), o);
                pipeline_schedule sched;
                try {
                    sched = make_generator(t, o)(sc);
                } catch (const pipeplan::limit_exceeded&) {
                    continue;  // no order of this schedule fits the limit
                }
                const bool pairs = std::any_of(sched.orders.begin(), sched.orders.end(), [](const auto& d) {
                    return std::any_of(d.begin(), d.end(), [](const op& x) { return x.overlaps_next; });
                });
                const bool handled = detail::order_sweep(ws, sc, sched).run(orders, {});
                CHECK(handled != pairs);  // it leaves exactly the overlapped pairs to the indexed sweep
                one_pass += handled ? 1 : 0;
                for (const bool record : {true, false}) {
                    simulation_options opt;
                    opt.record_timeline = opt.record_memory_curve = record;
                    detail::simulate_into_by(orders, sc, sched, opt, ws, replay_method::orders);
                    detail::simulate_into_by(events, sc, sched, opt, ws, replay_method::events);
                    check_identical(orders, events);
                    ++compared;
                }
            }
    CHECK(compared >= 2 * 6 * rows.size());
    CHECK(one_pass * 2 >= compared / 2);
}

namespace kept_workspace {
// `sched` with two neighbouring ops swapped on one device (picked by `seed`).
pipeline_schedule with_neighbours_swapped(pipeline_schedule sched, std::uint64_t seed) {
    std::vector<op>& order = sched.orders[seed % sched.orders.size()];
    const std::size_t at = seed % (order.size() - 1);
    std::swap(order[at], order[at + 1]);
    return sched;
}
// Replays schedules with one kept workspace (by `method`) and each with a fresh one (the event
// replay): the same result, or the same error. Counts the comparisons and the errors.
struct kept_against_fresh {
    detail::replay_method method;
    simulation_workspace reused;
    std::size_t compared = 0, errors = 0;
    explicit kept_against_fresh(detail::replay_method m) : method(m) {}
    void operator()(const scenario& s, const pipeline_schedule& sched) {
        simulation_result a, b;
        std::string error_a, error_b;
        try {
            detail::simulate_into_by(a, s, sched, {}, reused, method);
        } catch (const pipeplan::invalid_argument& e) {
            error_a = e.what();
        }
        try {
            simulation_workspace fresh;
            detail::simulate_into_by(b, s, sched, {}, fresh, detail::replay_method::events);
        } catch (const pipeplan::invalid_argument& e) {
            error_b = e.what();
        }
        CHECK(error_a == error_b);
        if (error_a.empty() && error_b.empty()) check_identical(a, b);
        errors += error_a.empty() ? 0 : 1;
        ++compared;
    }
};
}  // namespace kept_workspace
using kept_workspace::kept_against_fresh;
using kept_workspace::with_neighbours_swapped;

// A kept workspace keeps the replay order (the steps) of the last schedule's orders and times
// the next schedule with orders of the same shape and ends from them, checking every op: the same
// schedule on another scenario of the same shape (other durations and memory), and a schedule
// whose orders differ in one place (two ops swapped on one device, which may deadlock or be
// refused; in the middle of the order, where the first and last ops are the kept ones, only the
// check of every op finds it) must give what a fresh workspace and the event replay give, or the
// same error.
TEST_CASE("simulator: a reused workspace keeps the structure of the orders and notices any change") {
    using detail::replay_method;
    kept_against_fresh check(replay_method::orders);
    simulation_workspace& reused = check.reused;
    std::size_t schedules = 0, kept = 0, checked = 0;
    auto replay = [&](const scenario& s, const pipeline_schedule& sched) { check(s, sched); };
    for (std::uint64_t seed = 1; seed <= 8; ++seed)
        for (std::size_t S : {2u, 4u, 6u}) {
            const std::size_t M = 2 + (seed * 5 + S) % 13;
            CAPTURE(seed);
            CAPTURE(S);
            const scenario sc = random_scenario(S, M, seed);
            scenario other = random_scenario(S, M, seed + 100);  // same shape, other values
            zb_h1 zb;
            zb.w_share = 0.4;
            const scenario vs = split_into_chunks(sc, 2);
            std::vector<std::pair<scenario, pipeline_schedule>> runs{
                {sc, gpipe{}(sc)}, {sc, one_f_one_b{}(sc)}, {sc, zb(sc)}, {vs, interleaved_1f1b{2}(vs)}};
            if (M >= S) runs.emplace_back(sc, merak{merak_variant::early_recompute}(sc));
            for (const auto& [s, sched] : runs) {
                CAPTURE(sched.name);
                replay(s, sched);
                ++schedules;
                kept += reused.structure.may_match(s, sched) ? 1 : 0;  // its steps kept for the next run
                scenario o = s.placement.empty() ? other : split_into_chunks(other, 2);
                replay(o, sched);  // timed from the steps, on other durations and memory
                CHECK(reused.structure.has_steps);
                replay(s, sched);
                replay(o, sched);
                replay(s, with_neighbours_swapped(sched, seed));
                replay(s, sched);  // and back
                pipeline_schedule middle = sched;  // the same first and last ops, another middle
                std::vector<op>& inner = middle.orders[(seed + 1) % middle.orders.size()];
                if (inner.size() >= 4 && !(inner[inner.size() / 2] == inner[inner.size() / 2 - 1])) {
                    std::swap(inner[inner.size() / 2 - 1], inner[inner.size() / 2]);
                    checked += reused.structure.may_match(s, middle) ? 1 : 0;  // the steps are tried, the check finds it
                    replay(s, middle);
                    replay(s, sched);
                }
            }
        }
    CHECK(kept == schedules);  // every schedule's steps were kept
    CHECK(checked > 0);
    CHECK(check.errors > 0);  // some swaps deadlock or are refused
    CHECK(check.errors * 2 < check.compared);
}

// The event replay keeps the op index of the last orders (op_index::build_if_changed) while the
// shape and the orders stay: a kept workspace replaying one schedule on scenarios of the same shape,
// a schedule with two ops swapped (which may deadlock or be refused), the schedule again, one of
// another micro-batch count and one on other chunks must give what a fresh workspace gives, or
// the same error.
TEST_CASE("simulator: the event replay reuses the op index only for the same orders and shape") {
    using detail::replay_method;
    kept_against_fresh check(replay_method::events);
    std::size_t kept = 0;
    auto replay = [&](const scenario& s, const pipeline_schedule& sched) {
        kept += check.reused.idx.holds(s, sched) ? 1 : 0;
        check(s, sched);
    };
    for (std::uint64_t seed = 1; seed <= 6; ++seed)
        for (std::size_t S : {2u, 4u}) {
            const std::size_t M = 2 + (seed * 5 + S) % 11;
            CAPTURE(seed);
            CAPTURE(S);
            const scenario sc = random_scenario(S, M, seed, true);
            const scenario other = random_scenario(S, M, seed + 100, true);  // same shape, other values
            const scenario fewer = random_scenario(S, M - 1, seed, true);
            zb_h1 zb;
            zb.w_share = 0.4;
            const zb_v v;
            const scenario vs = split_into_v_chunks(sc), vo = split_into_v_chunks(other);
            for (const auto& [s, o, sched] : {std::tuple{sc, other, one_f_one_b{}(sc)}, std::tuple{sc, other, zb(sc)},
                                              std::tuple{vs, vo, v(vs)}}) {
                CAPTURE(sched.name);
                replay(s, sched);
                replay(o, sched);  // the index kept, other durations
                replay(s, sched);
                replay(s, with_neighbours_swapped(sched, seed));
                replay(s, sched);  // and back
                pipeline_schedule unsplit = sched;  // the same orders without a B/W split
                unsplit.w_share = 0.0;
                if (sched.w_share > 0.0) replay(s, unsplit);  // refused: W ops without a split
                replay(fewer, one_f_one_b{}(fewer));
                replay(s, sched);
            }
        }
    CHECK(kept >= 3 * 12 * 2);  // the replays on `other` and the second on `sc`
    CHECK(check.errors > 0);
    CHECK(check.errors * 2 < check.compared);
}

TEST_CASE("link_channels: per-link queues equal a map of links, dense and listed, across resets") {
    network_model nw;
    nw.latency_ms = 0.25;
    nw.bandwidth_gbps = 8.0;  // 1 MB = 1 ms on the wire
    nw.intra_node_latency_ms = 0.125;
    nw.intra_node_bandwidth_gbps = 16.0;
    nw.devices_per_node = 4;
    link_channels links;
    pipeplan::splitmix64 rng(11);
    for (const std::size_t devices : {1100u, 8u, 300u, 256u, 1100u, 257u}) {
        CAPTURE(devices);
        links.reset(devices, nw);
        std::map<std::pair<std::size_t, std::size_t>, double> free_ms;  // the reference: every link its own entry
        for (int k = 0; k < 4000; ++k) {
            const std::size_t from = rng.below(devices);
            // mostly the pipeline's neighbours, sometimes any device (a long list)
            const std::size_t to = rng.below(4) != 0 ? (from + 1 + rng.below(2)) % devices : rng.below(devices);
            const double t = static_cast<double>(rng.below(2000)) / 4.0, size_mb = static_cast<double>(rng.below(9)) / 2.0;
            double want = t;
            if (from != to) {
                double& f = free_ms[{from, to}];
                const double depart = std::max(t, f);
                f = depart + nw.wire_ms(size_mb, from, to);
                want = f + nw.latency(from, to);
            }
            REQUIRE(links.arrival(t, from, to, size_mb) == want);
        }
    }
    network_model free_net;
    links.reset(1100, free_net);
    CHECK(links.is_free());
    CHECK(links.arrival(3.0, 0, 1, 100.0) == 3.0);
}

TEST_CASE("simulator: the recording pass's branch-free comparison of times is operator== on doubles") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const std::vector<double> values{0.0, -0.0, 1.5, 1.5 + 1e-15, 4000.0, inf, nan};
    for (const double a : values)
        for (const double b : values) CHECK(detail::equal_as_one(a, b) == (a == b ? 1 : 0));
}
