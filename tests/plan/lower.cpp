#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "common.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/schedule/simulator.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

namespace {

execution_plan lowered(const test::named_case& c) {
    execution_plan p = lower(c.sc, c.sched);
    p.header.microbatches.resize(c.sc.microbatches);
    return p;
}

}  // namespace

TEST_CASE("lower_compute: one compute op per schedule op, producers and a topological sequence") {
    const auto sc = test::random_scenario(4, 6, 7);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        const compute_programs cp = lower_compute(c.sc, c.sched);
        REQUIRE(cp.ops.size() == c.sched.orders.size());
        std::set<std::uint32_t> seqs;
        for (std::size_t r = 0; r < cp.ops.size(); ++r) {
            REQUIRE(cp.ops[r].size() == c.sched.orders[r].size());
            for (std::size_t i = 0; i < cp.ops[r].size(); ++i) {
                const auto& o = c.sched.orders[r][i];
                const auto& x = cp.ops[r][i];
                CHECK(x.microbatch == o.microbatch);
                CHECK(x.stage == o.stage);
                CHECK(is_compute(x.kind));
                CHECK(seqs.insert(cp.seq[r][i]).second);
                if (i > 0) CHECK(cp.seq[r][i] > cp.seq[r][i - 1]);  // program order kept
                for (op_ref p : {cp.input_from[r][i], cp.stash_from[r][i]})
                    if (p.valid()) CHECK(cp.seq[p.rank][p.index] < cp.seq[r][i]);  // producers first
                if (x.kind == instr_kind::forward && x.stage > 0) {
                    REQUIRE(cp.input_from[r][i].valid());
                    const auto& p = cp.ops[cp.input_from[r][i].rank][cp.input_from[r][i].index];
                    CHECK(p.kind == instr_kind::forward);
                    CHECK(p.stage + 1 == x.stage);
                    CHECK(p.microbatch == x.microbatch);
                }
                if (x.kind == instr_kind::backward && x.stage + 1 < cp.stages) {
                    const auto& p = cp.ops[cp.input_from[r][i].rank][cp.input_from[r][i].index];
                    CHECK(p.kind == instr_kind::backward);
                    CHECK(p.stage == x.stage + 1);
                }
            }
        }
    }
}

TEST_CASE("lower_compute: a schedule that cannot run is rejected naming the rank") {
    const auto sc = test::random_scenario(2, 2, 1);
    schedule::pipeline_schedule s = schedule::one_f_one_b{}(sc);
    // device 1 runs B0 before F0 can have happened: swap its first two ops if B comes later
    std::swap(s.orders[0][0], s.orders[0][s.orders[0].size() - 1]);
    CHECK_THROWS_WITH_AS((void)lower_compute(sc, s), doctest::Contains("rank"), invalid_argument);
}

TEST_CASE("partition_point_near: std::partition_point's index from every hint, sorted lists with repeats") {
    splitmix64 rng(17);
    for (int round = 0; round < 200; ++round) {
        std::vector<std::uint32_t> s(rng.below(40));
        for (auto& x : s) x = static_cast<std::uint32_t>(rng.below(30));
        std::sort(s.begin(), s.end());
        for (std::uint32_t key = 0; key <= 31; ++key)
            for (std::uint32_t hint = 0; hint <= s.size() + 2; ++hint) {
                const auto less = [key](std::uint32_t x) { return x < key; };
                const auto at_most = [key](std::uint32_t x) { return x <= key; };
                CHECK(plan::detail::partition_point_near(s, hint, less) == std::lower_bound(s.begin(), s.end(), key) - s.begin());
                CHECK(plan::detail::partition_point_near(s, hint, at_most) == std::upper_bound(s.begin(), s.end(), key) - s.begin());
            }
    }
}

TEST_CASE("insert_communication: sends after producers, receives before consumers, same order on both sides") {
    const auto sc = test::random_scenario(4, 5, 3);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        const compute_programs cp = lower_compute(c.sc, c.sched);
        const auto progs = insert_communication(cp, c.sc);
        const std::size_t R = progs.size();
        std::map<std::pair<std::size_t, std::size_t>, std::vector<std::tuple<bool, std::uint32_t, std::uint32_t>>> seen;
        for (std::size_t r = 0; r < R; ++r) {
            const auto& prog = progs[r].instructions;
            // compute ops keep their order
            std::vector<instruction> comp;
            for (const auto& x : prog)
                if (is_compute(x.kind)) comp.push_back(x);
            REQUIRE(comp.size() == cp.ops[r].size());
            for (std::size_t i = 0; i < comp.size(); ++i) CHECK(comp[i].kind == cp.ops[r][i].kind);
            for (std::size_t i = 0; i < prog.size(); ++i) {
                const auto& x = prog[i];
                if (category(x.kind) == kind_category::send_start) {
                    // right after its producer (only other starts in between)
                    std::size_t k = i;
                    while (k > 0 && is_message_start(prog[k - 1].kind)) --k;
                    REQUIRE(k > 0);
                    CHECK(is_compute(prog[k - 1].kind));
                    CHECK(prog[k - 1].out == x.in);
                }
                if (category(x.kind) == kind_category::recv_wait) {
                    // right before its consumer (only waits and loads in between)
                    std::size_t k = i + 1;
                    while (k < prog.size() && !is_compute(prog[k].kind)) ++k;
                    REQUIRE(k < prog.size());
                    CHECK(prog[k].in == x.out);
                }
                if (is_message_start(x.kind)) {
                    const bool send = category(x.kind) == kind_category::send_start;
                    const auto key = std::minmax(r, static_cast<std::size_t>(x.peer));
                    (void)send;
                    seen[{r, static_cast<std::size_t>(x.peer)}].push_back({is_activation_message(x.kind), x.microbatch, x.stage});
                    (void)key;
                }
            }
            CHECK(prog[prog.size() - 2].kind == instr_kind::reduce_gradients);
            CHECK(prog.back().kind == instr_kind::optimizer_step);
        }
        for (const auto& [k, v] : seen) CHECK(seen[{k.second, k.first}] == v);
    }
}

TEST_CASE("plan_buffers: arena never below the live peak, frees after last use, no overlaps") {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const auto sc = test::random_scenario(2 + seed % 4, 3 + seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            const execution_plan p = lowered(c);
            for (const auto& prog : p.programs) {
                CHECK(prog.arena_bytes >= prog.live_peak_bytes);
                CHECK(prog.live_peak_bytes > 0);
                // every non-workspace buffer that is used is freed exactly once
                std::vector<int> frees(prog.buffers.size(), 0);
                for (const auto& x : prog.instructions)
                    if (x.kind == instr_kind::free) ++frees[x.in];
                const auto life = buffer_lifetimes(prog);
                for (std::size_t s = 0; s < prog.buffers.size(); ++s) {
                    CHECK(life[s].used());
                    CHECK(frees[s] == (prog.buffers[s].role == buffer_role::workspace ? 0 : 1));
                    if (prog.buffers[s].role != buffer_role::workspace)
                        CHECK(prog.instructions[life[s].last].kind == instr_kind::free);
                    CHECK(prog.buffers[s].offset_bytes % 256 == 0);
                }
                // brute force: no two buffers overlap in both time and space
                for (std::size_t a = 0; a < prog.buffers.size(); ++a)
                    for (std::size_t b = a + 1; b < prog.buffers.size(); ++b) {
                        const auto &x = prog.buffers[a], &y = prog.buffers[b];
                        if (x.size_bytes == 0 || y.size_bytes == 0 || !life[a].overlaps(life[b])) continue;
                        CHECK((x.offset_bytes + x.size_bytes <= y.offset_bytes || y.offset_bytes + y.size_bytes <= x.offset_bytes));
                    }
            }
        }
    }
}

TEST_CASE("insert_frees: the lifetimes it returns are those of a rescan; the live peak is the brute-force one") {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        const auto sc = test::random_scenario(2 + seed % 4, 3 + 2 * seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            for (rank_program& prog : insert_communication(lower_compute(c.sc, c.sched), c.sc)) {
                const std::vector<lifetime> shifted = insert_frees(prog);
                const std::vector<lifetime> rescanned = buffer_lifetimes(prog);
                REQUIRE(shifted.size() == rescanned.size());
                for (std::size_t s = 0; s < shifted.size(); ++s) {
                    CHECK(shifted[s].first == rescanned[s].first);
                    CHECK(shifted[s].last == rescanned[s].last);
                }
                assign_offsets(prog, shifted);
                std::uint64_t peak = 0;  // brute force: the live set at every instruction
                for (std::uint32_t i = 0; i < prog.instructions.size(); ++i) {
                    std::uint64_t live = 0;
                    for (std::size_t s = 0; s < rescanned.size(); ++s)
                        if (rescanned[s].used() && rescanned[s].first <= i && i <= rescanned[s].last) live += prog.buffers[s].size_bytes;
                    peak = std::max(peak, live);
                }
                CHECK(prog.live_peak_bytes == peak);
                CHECK(prog.arena_bytes >= peak);
            }
        }
    }
}

TEST_CASE("placement_items: its live extents are live_extents() of its items; sizes aligned up (mask and division)") {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        const auto sc = test::random_scenario(2 + seed % 3, 4 + 3 * seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            for (rank_program& prog : insert_communication(lower_compute(c.sc, c.sched), c.sc)) {
                const std::vector<lifetime> life = insert_frees(prog);
                for (const std::uint64_t alignment : {256ull, 100ull, 1ull}) {
                    CAPTURE(alignment);
                    plan::detail::live_extent live;
                    const auto items = plan::detail::placement_items(prog, life, alignment, live);
                    std::vector<std::uint64_t> raw;
                    for (const auto& it : items) {
                        const std::uint64_t size = prog.buffers[it.slot].size_bytes;
                        CHECK(it.size_bytes == (size + alignment - 1) / alignment * alignment);
                        raw.push_back(size);
                    }
                    const auto swept = plan::detail::live_extents(items, prog.instructions.size(), raw);
                    CHECK(live.aligned_bytes == swept.aligned_bytes);
                    CHECK(live.raw_bytes == swept.raw_bytes);
                    CHECK(live.items == swept.items);
                    CHECK(live.raw_bytes == live_peak_bytes(prog, life));
                }
            }
        }
    }
}

TEST_CASE("beam_placer: runs of one placer (size bars repeated and changed) equal runs of fresh placers") {
    const auto sc = test::random_scenario(4, 24, 3);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        for (rank_program& prog : insert_communication(lower_compute(c.sc, c.sched), c.sc)) {
            const std::vector<lifetime> life = insert_frees(prog);
            plan::detail::live_extent live;
            const auto items = plan::detail::placement_items(prog, life, 256, live);
            const std::uint64_t peak = live.aligned_bytes;
            plan::detail::beam_placer reused(items, peak, 16, live.items);
            const plan::detail::beam_stage runs[] = {{4, 4, 16}, {4, 8, 16}, {12, 8, 32}, {4, 4, 16}, {16, 16, 64}, {16, 16, 64}};
            for (const auto& st : runs) {
                std::vector<std::uint64_t> a, b;
                plan::detail::beam_placer fresh(items, peak, 16, live.items);
                CHECK(reused.run(st.width, peak / st.decision_divisor, peak / st.min_divisor, a) ==
                      fresh.run(st.width, peak / st.decision_divisor, peak / st.min_divisor, b));
                CHECK(a == b);
            }
        }
    }
}

TEST_CASE("insert_frees: one free per freed slot after its last use, slots ascending; none for workspaces and unused buffers") {
    rank_program p;
    p.buffers.resize(4);
    p.buffers[1].role = buffer_role::workspace;
    p.buffers[2].role = buffer_role::stash;  // named by no instruction
    p.buffers[3].role = buffer_role::grad_in;
    p.buffers[3].microbatch = 5;
    instruction f, b, red;
    f.in = 0, f.work = 1;
    b.kind = instr_kind::backward, b.in = 3, b.out = 3, b.stash = 0;  // slot 3 named twice
    red.kind = instr_kind::reduce_gradients;
    p.instructions = {f, b, red};
    const std::vector<lifetime> life = insert_frees(p);
    REQUIRE(p.instructions.size() == 5);
    CHECK(p.instructions[0] == f);
    CHECK(p.instructions[1] == b);
    CHECK(p.instructions[2].kind == instr_kind::free);
    CHECK(p.instructions[2].in == 0);
    CHECK(p.instructions[3].kind == instr_kind::free);
    CHECK(p.instructions[3].in == 3);
    CHECK(p.instructions[3].microbatch == 5);
    CHECK(p.instructions[4] == red);
    REQUIRE(life.size() == 4);
    CHECK((life[0].first == 0 && life[0].last == 2));
    CHECK((life[1].first == 0 && life[1].last == 0));
    CHECK(!life[2].used());
    CHECK((life[3].first == 1 && life[3].last == 3));
}

TEST_CASE("insert_communication_and_frees_into: the programs and lifetimes of insert_communication() then insert_frees()") {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        const auto sc = test::random_scenario(2 + seed % 3, 3 + 2 * seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            lowering_options o;
            o.rank_offset = seed == 2 ? 4 : 0;
            o.microbatch_offset = seed % 2 == 0 ? 0 : 7;
            for (std::size_t j = 0; j + 1 < c.sc.microbatches; ++j) o.shapes.push_back({1, 128 + std::uint32_t(j), 0, 64});
            const compute_programs cp = lower_compute(c.sc, c.sched);
            std::vector<rank_program> fused(1);  // (one program there already: its vectors are reused)
            fused[0].instructions.resize(3);
            std::vector<std::vector<lifetime>> lives;
            insert_communication_and_frees_into(fused, lives, cp, c.sc, o);
            std::vector<rank_program> apart = insert_communication(cp, c.sc, o);
            REQUIRE(fused.size() == apart.size());
            REQUIRE(lives.size() == apart.size());
            for (std::size_t r = 0; r < apart.size(); ++r) {
                CAPTURE(r);
                const std::vector<lifetime> life = insert_frees(apart[r]);
                CHECK(fused[r].rank == apart[r].rank);
                CHECK(fused[r].buffers == apart[r].buffers);
                CHECK(fused[r].instructions == apart[r].instructions);
                REQUIRE(lives[r].size() == life.size());
                for (std::size_t s = 0; s < life.size(); ++s) {
                    CHECK(lives[r][s].first == life[s].first);
                    CHECK(lives[r][s].last == life[s].last);
                }
            }
        }
    }
}

TEST_CASE("plan_buffers: best fit reuses a freed gap (closed form)") {
    rank_program p;
    p.buffers.resize(3);
    p.buffers[0].size_bytes = 1024;  // lives 0..1
    p.buffers[1].size_bytes = 512;   // lives 1..3
    p.buffers[2].size_bytes = 1024;  // lives 2..3: fits where 0 was
    instruction a, b, c, d;
    a.kind = b.kind = c.kind = d.kind = instr_kind::forward;
    a.out = 0;
    b.in = 0;
    b.out = 1;
    c.out = 2;
    d.in = 1;
    d.stash = 2;
    p.instructions = {a, b, c, d};
    assign_offsets(p);
    CHECK(p.live_peak_bytes == 1536);
    CHECK(p.arena_bytes == 1536);
    CHECK(p.buffers[0].offset_bytes == p.buffers[2].offset_bytes);
}

namespace {

/// The optimal arena of tiny instances by brute force: for any optimal placement, putting the
/// buffers in the order of their optimal offsets, each at the lowest offset free of the
/// already placed ones that it meets in time, gives offsets no higher (by induction) — so the
/// best such placement over all orders is optimal.
std::uint64_t optimal_arena(const std::vector<plan::detail::placement_item>& items) {
    std::vector<std::uint32_t> order(items.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::uint64_t best = UINT64_MAX;
    std::vector<std::uint64_t> offset(items.size());
    do {
        std::uint64_t arena = 0;
        for (std::size_t k = 0; k < order.size(); ++k) {
            const auto& b = items[order[k]];
            std::uint64_t pos = 0;
            for (bool moved = true; moved;) {  // lift above every conflicting placed buffer
                moved = false;
                for (std::size_t q = 0; q < k; ++q) {
                    const auto& c = items[order[q]];
                    const bool in_time = b.first <= c.last && c.first <= b.last;
                    if (in_time && pos < offset[order[q]] + c.size_bytes && offset[order[q]] < pos + b.size_bytes) {
                        pos = offset[order[q]] + c.size_bytes;
                        moved = true;
                    }
                }
            }
            offset[order[k]] = pos;
            arena = std::max(arena, pos + b.size_bytes);
        }
        best = std::min(best, arena);
    } while (std::next_permutation(order.begin(), order.end()));
    return best;
}

}  // namespace

TEST_CASE("plan_buffers: placements against the brute-force optimum on tiny instances (<= 7 buffers)") {
    splitmix64 rng(2026);
    double worst_beam = 1.0, worst_best_fit = 1.0;
    int optimal_beam = 0, optimal_best_fit = 0;
    constexpr int instances = 150;
    for (int t = 0; t < instances; ++t) {
        const std::size_t n = 3 + rng.below(5);
        std::vector<plan::detail::placement_item> items;
        for (std::uint32_t i = 0; i < n; ++i) {
            const auto first = static_cast<std::uint32_t>(rng.below(8));
            items.push_back({i, first, first + static_cast<std::uint32_t>(rng.below(5)), 256 * (1 + rng.below(12))});
        }
        std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
            return a.first != b.first ? a.first < b.first : a.last != b.last ? a.last > b.last : a.slot < b.slot;
        });
        const std::uint64_t opt = optimal_arena(items);
        CHECK(opt >= plan::detail::aligned_live_peak(items, 16));
        for (const std::size_t width : {std::size_t(12), std::size_t(0)}) {
            std::vector<std::uint64_t> offset;
            const std::uint64_t arena = plan::detail::place_items(items, 16, width, offset);
            CAPTURE(t);
            CAPTURE(width);
            REQUIRE(offset.size() == n);
            for (std::size_t a = 0; a < n; ++a) {  // a valid placement, inside the arena
                CHECK(offset[a] + items[a].size_bytes <= arena);
                for (std::size_t b = a + 1; b < n; ++b)
                    if (items[a].first <= items[b].last && items[b].first <= items[a].last)
                        CHECK((offset[a] + items[a].size_bytes <= offset[b] || offset[b] + items[b].size_bytes <= offset[a]));
            }
            CHECK(arena >= opt);  // never below the optimum: else the placement overlaps
            const double ratio = static_cast<double>(arena) / static_cast<double>(opt);
            (width ? worst_beam : worst_best_fit) = std::max(width ? worst_beam : worst_best_fit, ratio);
            (width ? optimal_beam : optimal_best_fit) += arena == opt;
        }
    }
    MESSAGE("tiny instances: beam search optimal in " << optimal_beam << "/" << instances << ", worst " << worst_beam
                                                      << "x the optimum; best fit optimal in " << optimal_best_fit << "/"
                                                      << instances << ", worst " << worst_best_fit << "x");
    CHECK(optimal_beam >= optimal_best_fit * 9 / 10);
    CHECK(worst_beam <= 1.5);
}

TEST_CASE("plan_buffers: place_rest stopped above a limit and resumed places as one call") {
    splitmix64 rng(77);
    for (int t = 0; t < 60; ++t) {
        std::vector<plan::detail::placement_item> items;
        const std::size_t n = 20 + rng.below(120);
        for (std::uint32_t i = 0; i < n; ++i) {
            const auto first = static_cast<std::uint32_t>(rng.below(n / 2));
            items.push_back({i, first, first + static_cast<std::uint32_t>(rng.below(12)), 256 * (1 + rng.below(40))});
        }
        std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
            return a.first != b.first ? a.first < b.first : a.last != b.last ? a.last > b.last : a.slot < b.slot;
        });
        plan::detail::rest_scratch x;
        std::vector<std::uint64_t> search(n, plan::detail::unplaced);  // some items placed first (a valid placement)
        plan::detail::place_rest(items, search, x);
        for (std::size_t i = 0; i < n; ++i)
            if (rng.below(3) != 0) search[i] = plan::detail::unplaced;
        std::vector<std::uint64_t> whole = search;
        const std::uint64_t arena = plan::detail::place_rest(items, whole, x);
        for (const std::uint64_t limit : {arena / 4, arena / 2, arena - 1, arena}) {
            std::vector<std::uint64_t> offset = search;
            const plan::detail::rest_result r = plan::detail::place_rest_from(items, offset, x, 0, limit);
            CAPTURE(t);
            CAPTURE(limit);
            CHECK((r.arena > limit) == (arena > limit));  // (the arena only grows)
            if (r.arena <= limit) CHECK(r.next == n);
            const plan::detail::rest_result end = plan::detail::place_rest_from(items, offset, x, r.next, UINT64_MAX);
            CHECK(end.next == n);
            CHECK(end.arena == arena);
            CHECK(offset == whole);
        }
    }
}

namespace {

/// A rank program of `microbatches` FIFO stashes as a long 1F1B plan has them: micro-batch m's
/// forward (instruction 2m) writes its stash (size by runs of equal micro-batches, as a
/// length-sorted batch has) with a workspace of half its size; its backward, `in_flight`
/// micro-batches later (instruction 2(m + in_flight) + 1), reads the stash and frees it.
rank_program fifo_stash_program(std::size_t microbatches, std::uint32_t in_flight, std::uint64_t seed) {
    splitmix64 rng(seed);
    rank_program p;
    std::uint64_t unit_bytes = 0;
    std::vector<std::uint64_t> stash_bytes;
    while (stash_bytes.size() < microbatches) {
        unit_bytes = (1 + rng.below(4)) << 20;
        for (std::uint64_t k = 20 + rng.below(60); k-- > 0 && stash_bytes.size() < microbatches;) stash_bytes.push_back(unit_bytes);
    }
    p.instructions.resize(2 * (microbatches + in_flight));
    for (std::uint32_t i = 0; i < p.instructions.size(); ++i) p.instructions[i].kind = instr_kind::forward;
    for (std::uint32_t m = 0; m < microbatches; ++m) {
        const auto stash = static_cast<std::uint32_t>(p.buffers.size());
        p.buffers.push_back({0, stash_bytes[m], buffer_role::stash, m, 0});
        p.buffers.push_back({0, stash_bytes[m] / 2, buffer_role::workspace, m, 0});
        p.instructions[2 * m].stash = stash;
        p.instructions[2 * m].work = stash + 1;
        p.instructions[2 * (m + in_flight) + 1].in = stash;
    }
    return p;
}

}  // namespace

TEST_CASE("plan_buffers: long FIFO stash programs get an arena within 0.5% of the live set") {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        rank_program p = fifo_stash_program(5000, 4 + static_cast<std::uint32_t>(seed), seed);  // (10,000 buffers: a long plan)
        const std::vector<lifetime> life = insert_frees(p);
        assign_offsets(p, life);
        CAPTURE(seed);
        CHECK(p.arena_bytes >= p.live_peak_bytes);
        CHECK(p.arena_bytes <= p.live_peak_bytes + p.live_peak_bytes / 200);
        std::vector<std::uint32_t> by_birth(p.buffers.size());  // no two buffers overlap in time and space
        for (std::uint32_t s = 0; s < by_birth.size(); ++s) by_birth[s] = s;
        std::sort(by_birth.begin(), by_birth.end(), [&](std::uint32_t a, std::uint32_t b) { return life[a].first < life[b].first; });
        for (std::size_t a = 0; a < by_birth.size(); ++a)
            for (std::size_t b = a + 1; b < by_birth.size() && life[by_birth[b]].first <= life[by_birth[a]].last; ++b) {
                const buffer &x = p.buffers[by_birth[a]], &y = p.buffers[by_birth[b]];
                CHECK((x.offset_bytes + x.size_bytes <= y.offset_bytes || y.offset_bytes + y.size_bytes <= x.offset_bytes));
            }
    }
}

TEST_CASE("plan_buffers: in lanes, a workspace takes the gap between the stash lanes before a small buffer living across it") {
    // Stash lanes: A (20 units, instructions 0..10) in lane 0 at 0, B (0..2) then C (8..10)
    // in lane 1 at 20, D (0..10) in lane 2 at 30, so [20, 30) is free during 3..7. A small
    // buffer S (3..7) and a workspace W (5..5, as large as that gap): placed in time order (or W
    // in a lane of its own on top) S takes the gap and W goes above the lanes (arena 45 units);
    // W first takes the gap and S goes above the lanes: arena 37, the live peak (A + D + S + W
    // at instruction 5).
    constexpr std::uint64_t u = 256;
    std::vector<buffer> buffers(6);
    const auto add = [&](std::uint32_t slot, buffer_role role, std::uint64_t units) {
        buffers[slot].role = role, buffers[slot].size_bytes = units * u;
    };
    add(0, buffer_role::stash, 20), add(1, buffer_role::stash, 10), add(2, buffer_role::stash, 5);
    add(3, buffer_role::activation_in, 2), add(4, buffer_role::workspace, 10), add(5, buffer_role::stash, 10);
    const std::vector<plan::detail::placement_item> items = {
        {0, 0, 10, 20 * u}, {1, 0, 2, 10 * u}, {2, 0, 10, 5 * u}, {3, 3, 7, 2 * u}, {4, 5, 5, 10 * u}, {5, 8, 10, 10 * u}};
    std::vector<std::uint64_t> offset;
    const std::uint64_t arena = plan::detail::place_stashes_in_lanes(items, buffers, offset);
    CHECK(arena == 37 * u);
    CHECK(arena == plan::detail::aligned_live_peak(items, 11));
    CHECK(offset[4] == 20 * u);  // W in the gap
    for (std::size_t a = 0; a < items.size(); ++a)
        for (std::size_t b = a + 1; b < items.size(); ++b)
            if (items[a].first <= items[b].last && items[b].first <= items[a].last)
                CHECK((offset[a] + items[a].size_bytes <= offset[b] || offset[b] + items[b].size_bytes <= offset[a]));
}

TEST_CASE("lower: every schedule gives a valid plan") {
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
        const auto sc = test::random_scenario(1 + seed % 5, 1 + seed * 2 % 9, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            CAPTURE(seed);
            const execution_plan p = lowered(c);
            const auto rep = validate(p);
            CHECK_MESSAGE(rep.ok(), rep.to_string());
        }
    }
}

TEST_CASE("lower_into: one plan reused across scenarios of every size gives exactly lower()'s plans") {
    execution_plan reused;  // shrinks and grows: ranks, micro-batches and schedules change each time
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const auto sc = test::random_scenario(1 + (seed * 5) % 6, 2 + (seed * 7) % 11, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            CAPTURE(seed);
            lower_into(reused, c.sc, c.sched);
            CHECK(reused == lower(c.sc, c.sched));
        }
    }
}

TEST_CASE("join_replicas: one replica is lower()'s plan; more number ranks and micro-batches on; one header filler") {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        const auto sc = test::random_scenario(2 + seed % 3, 3 + seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            CAPTURE(seed);
            lowering_options lo;
            lo.type = dtype::bf16;
            replica_schedule rep{&c.sc, &c.sched, {}, nullptr};
            for (std::size_t j = 0; j < c.sc.microbatches; ++j) {
                const tensor_shape shape{static_cast<std::uint32_t>(1 + j), 8, 0, 16};
                lo.shapes.push_back(shape);
                rep.microbatches.push_back({0, {}, shape, {}});
            }
            join_options jo;
            jo.type = lo.type;
            const execution_plan one = join_replicas({rep}, jo);
            CHECK(one == lower(c.sc, c.sched, lo));  // the same header fields, programs and buffers
            const schedule::simulation_result sim = schedule::simulate(c.sc, c.sched);
            rep.sim = &sim;
            jo.iteration = 7;
            jo.zero_stage = 2;
            const execution_plan two = join_replicas({rep, rep}, jo);
            CHECK(two.header.dp == 2);
            CHECK(two.header.iteration == 7);
            CHECK(two.header.ranks() == 2 * one.header.devices);
            CHECK(two.header.predicted_makespan_ms == sim.makespan_ms);
            CHECK(two.header.predicted_peak_memory_mb.size() == two.programs.size());
            REQUIRE(two.header.microbatches.size() == 2 * c.sc.microbatches);
            CHECK(two.header.microbatches.back().replica == 1);
            for (std::size_t r = 0; r < two.programs.size(); ++r) CHECK(two.programs[r].rank == r);
            CHECK_MESSAGE(validate(two).ok(), validate(two).to_string());
        }
    }
}

TEST_CASE("lower: a scenario built in code with a value beyond scenario_limits is refused, naming field and range") {
    const auto sc = test::random_scenario(3, 4, 9);
    const auto c = test::all_schedules(sc).front();
    schedule::scenario bad = c.sc;
    bad.backward_ms[bad.at(2, 1)] = 5e9;  // 58 days: beyond the 1e9 ms of every scenario file
    try {
        (void)lower(bad, c.sched);
        FAIL("no error");
    } catch (const invalid_argument& e) {
        CHECK(std::string(e.what()) == "scenario: microbatches[2].backward_ms[1] must be a number in [0, 1e+09] ms, is 5e+09");
    }
    bad = c.sc;
    bad.network.bandwidth_gbps = 1e7;
    CHECK_THROWS_WITH_AS((void)lower(bad, c.sched),
                         "scenario: network.bandwidth_gbps must be a number in [0, 1e+06] Gbit/s, is 1e+07", invalid_argument);
    CHECK_NOTHROW((void)lower(c.sc, c.sched));
}
