// plan/deadlock.hpp and plan/send_rule.hpp: the three send rules on a hand-made ring, the
// order covers() claims between them on mutated plans, and the validator's "deadlock" rule
// agreeing with find_deadlock under the rule the header records.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/plan/deadlock.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/validate.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

namespace {

/// Three ranks in a ring: each sends one message to the next and receives one from the
/// previous, send first; `together[r]` puts rank r's two starts back to back (one group), else
/// the send's wait separates them. Every pair of ranks exchanges one message, so the pair rule
/// holds; a cycle of ranks each waiting on the next is the only way to deadlock.
execution_plan ring(const std::vector<bool>& together) {
    execution_plan p;
    p.header.devices = 3;
    for (std::int32_t r = 0; r < 3; ++r) {
        rank_program prog;
        prog.rank = static_cast<std::uint32_t>(r);
        const std::int32_t next = (r + 1) % 3, prev = (r + 2) % 3;
        auto& in = prog.instructions;
        in.push_back(test::instr(instr_kind::forward));
        in.push_back(test::instr(instr_kind::send_activation_start, next));
        if (!together[static_cast<std::size_t>(r)]) in.push_back(test::instr(instr_kind::send_activation_wait, next));
        in.push_back(test::instr(instr_kind::recv_activation_start, prev));
        if (together[static_cast<std::size_t>(r)]) in.push_back(test::instr(instr_kind::send_activation_wait, next));
        in.push_back(test::instr(instr_kind::recv_activation_wait, prev));
        in.push_back(test::instr(instr_kind::backward));
        p.programs.push_back(prog);
    }
    return p;
}

/// Moves a random message start or wait to a random place that keeps the start before its
/// wait; false when nothing moved.
bool move_a_message(execution_plan& p, splitmix64& rng) {
    auto& ins = p.programs[rng.below(p.programs.size())].instructions;
    const std::size_t i = rng.below(ins.size());
    if (!is_message(ins[i].kind)) return false;
    const auto same = [&](std::size_t k) {
        return wait_of(ins[k].kind) == wait_of(ins[i].kind) && ins[k].microbatch == ins[i].microbatch && ins[k].stage == ins[i].stage;
    };
    std::size_t lo = 0, hi = ins.size() - 1;  // where it may go (after removal)
    if (is_message_start(ins[i].kind)) {
        const std::size_t w = test::wait_of_start(ins, i);
        if (w == ins.size()) return false;
        hi = w - 1;
    } else {
        std::size_t s = i;
        while (s > 0 && !same(s - 1)) --s;
        if (s == 0) return false;
        lo = s;
    }
    const std::size_t to = lo + rng.below(hi - lo + 1);
    const instruction x = ins[i];
    ins.erase(ins.begin() + static_cast<std::ptrdiff_t>(i));
    ins.insert(ins.begin() + static_cast<std::ptrdiff_t>(to), x);
    return to != i;
}

}  // namespace

TEST_CASE("deadlock: a ring of sends under each send rule") {
    const std::vector<blocked_rank> all_at_send = {{0, 1}, {1, 1}, {2, 1}};
    for (unsigned mask = 0; mask < 8; ++mask) {
        CAPTURE(mask);
        const execution_plan p = ring({(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0});
        // Buffered: starts never block, but each send's wait needs the peer's receive posted,
        // which sits behind the peer's own send wait unless some rank posts both first.
        if (mask != 0) CHECK(find_deadlock(p, send_rule::buffered).empty());
        else CHECK(find_deadlock(p, send_rule::buffered) == std::vector<blocked_rank>{{0, 2}, {1, 2}, {2, 2}});
        // Blocking starts: each send waits for a receive its peer posts after its own send.
        CHECK(find_deadlock(p, send_rule::blocking) == all_at_send);
        // Grouped: one rank posting its send and receive in one group breaks the cycle.
        if (mask != 0) CHECK(find_deadlock(p, send_rule::grouped).empty());
        else CHECK(find_deadlock(p, send_rule::grouped) == all_at_send);
    }
    // A send that no receive matches never completes: its rank stays, under every rule.
    execution_plan lone = ring({true, true, true});
    auto& ins = lone.programs[1].instructions;
    ins.erase(ins.begin() + 2);  // rank 1's receive start
    ins.erase(ins.begin() + 3);  // and its wait
    CHECK(find_deadlock(lone, send_rule::buffered) == std::vector<blocked_rank>{{0, 3}});  // at the send's wait
    CHECK(find_deadlock(lone, send_rule::grouped) == std::vector<blocked_rank>{{0, 1}});
    CHECK(find_deadlock(lone, send_rule::blocking) == all_at_send);
}

TEST_CASE("deadlock: covers() holds on mutated plans, and the validator reports exactly what find_deadlock finds") {
    // An interleaved plan on 3 devices (wrap-around messages) with receives (start and wait)
    // moved earlier, or single starts and waits moved about: blocking-safe implies
    // grouped-safe implies buffered-safe, and validate() under the header's rule has a
    // "deadlock" violation exactly when find_deadlock() finds a rank stuck.
    const std::array<send_rule, 3> rules = {send_rule::buffered, send_rule::blocking, send_rule::grouped};
    const auto sc = test::random_scenario(3, 6, 11);
    const auto ch = schedule::split_into_chunks(sc, 2);
    const execution_plan base = lower(ch, schedule::interleaved_1f1b{2}(ch));
    REQUIRE(validate(base).ok());
    splitmix64 rng(9);
    int tried = 0;
    std::array<int, 3> stuck{};
    for (int t = 0; t < 3000; ++t) {
        execution_plan p = base;
        if (t % 2 == 0) (void)move_a_message(p, rng);
        else if (!test::move_receive_earlier(p, rng)) continue;
        const auto first = validate(p);
        if (!first.ok() && first.violations.front().rule != "deadlock") continue;  // broken otherwise
        ++tried;
        std::array<bool, 3> safe{};
        for (std::size_t i = 0; i < rules.size(); ++i) {
            safe[i] = find_deadlock(p, rules[i]).empty();
            stuck[i] += !safe[i];
            p.header.sends = rules[i];
            const auto rep = validate(p);
            bool reported = false;
            for (const auto& v : rep.violations) reported |= v.rule == "deadlock";
            CHECK(reported == !safe[i]);
            CHECK(rep.ok() == safe[i]);
        }
        for (std::size_t a = 0; a < rules.size(); ++a)
            for (std::size_t b = 0; b < rules.size(); ++b)
                if (covers(rules[a], rules[b]) && safe[a]) CHECK(safe[b]);
    }
    MESSAGE(tried << " plans; stuck under buffered " << stuck[0] << ", blocking " << stuck[1] << ", grouped " << stuck[2]);
    CHECK(tried > 100);
    CHECK(stuck[0] > 0);  // the mutations reach deadlocks under every rule
    CHECK(stuck[2] >= stuck[0]);
    CHECK(stuck[1] >= stuck[2]);
}

TEST_CASE("deadlock: lowered plans of every schedule finish under every send rule") {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const auto sc = test::random_scenario(2 + seed % 4, 3 + 2 * seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            const execution_plan p = lower(c.sc, c.sched);
            for (const send_rule rule : {send_rule::buffered, send_rule::blocking, send_rule::grouped}) {
                CAPTURE(name_of(rule));
                CHECK(find_deadlock(p, rule).empty());
            }
        }
    }
}
