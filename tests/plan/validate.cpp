#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/validate.hpp"
#include "reference_run.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

namespace {

std::string first_rule(const execution_plan& p) {
    const auto r = validate(p);
    return r.ok() ? "ok" : r.violations.front().rule;
}

std::size_t find(const rank_program& p, instr_kind k, std::size_t nth = 0) {
    for (std::size_t i = 0; i < p.instructions.size(); ++i)
        if (p.instructions[i].kind == k && nth-- == 0) return i;
    FAIL("not found");
    return 0;
}

}  // namespace

TEST_CASE("validate: lowered plans of every schedule run correctly on the reference executor") {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const auto sc = test::random_scenario(1 + seed % 4, 2 + seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            const execution_plan p = lower(c.sc, c.sched);
            REQUIRE(validate(p).ok());
            const auto run = test::reference_run(p);
            CHECK_MESSAGE(run.finished, run.fault);
            std::size_t units = 0;
            for (const auto& g : run.grads) units += g.size();
            CHECK(units == c.sc.stages * c.sc.microbatches);
        }
    }
}

TEST_CASE("validate: each rule names rank, instruction and rule") {
    SUBCASE("structure: peer") {
        auto p = test::one_f_one_b_plan(3, 3);
        auto& x = p.programs[0].instructions[find(p.programs[0], instr_kind::send_activation_start)];
        x.peer = 2;
        const auto r = validate(p);
        REQUIRE_FALSE(r.ok());
        CHECK(r.violations[0].rank == 0);
        CHECK(r.violations[0].rule == "structure");
        CHECK(r.to_string().find("rank 0, instruction") != std::string::npos);
        CHECK(r.to_string().find("peer should be rank 1") != std::string::npos);
    }
    SUBCASE("structure: slot out of range") {
        auto p = test::one_f_one_b_plan(2, 2);
        p.programs[1].instructions[0].in = 999;
        CHECK(first_rule(p) == "structure");
    }
    SUBCASE("pairing: a wait dropped") {
        auto p = test::one_f_one_b_plan(2, 2);
        auto& prog = p.programs[1].instructions;
        prog.erase(prog.begin() + static_cast<long>(find(p.programs[1], instr_kind::recv_activation_wait)));
        CHECK(first_rule(p) == "pairing");
    }
    SUBCASE("match: bytes differ") {
        auto p = test::one_f_one_b_plan(2, 2);
        p.programs[1].instructions[find(p.programs[1], instr_kind::recv_activation_start)].bytes += 1;
        p.programs[1].instructions[find(p.programs[1], instr_kind::recv_activation_wait)].bytes += 1;
        CHECK(first_rule(p) == "match");
    }
    SUBCASE("buffer: read after free") {
        auto p = test::one_f_one_b_plan(2, 2);
        auto& prog = p.programs[0].instructions;
        const std::size_t f = find(p.programs[0], instr_kind::free);
        const instruction fr = prog[f];
        prog.erase(prog.begin() + static_cast<long>(f));
        prog.insert(prog.begin() + 1, fr);  // free right after the first instruction
        CHECK(first_rule(p) == "buffer");
    }
    SUBCASE("buffer: overlapping live buffers") {
        auto p = test::one_f_one_b_plan(2, 3);
        auto& prog = p.programs[0];
        // move every buffer to offset 0: live ones now overlap
        for (auto& b : prog.buffers) b.offset_bytes = 0;
        const auto r = validate(p);
        REQUIRE_FALSE(r.ok());
        CHECK(r.to_string().find("overlaps live slot") != std::string::npos);
    }
    SUBCASE("compute: a backward dropped") {
        auto p = test::one_f_one_b_plan(2, 2);
        auto& prog = p.programs[0].instructions;
        prog.erase(prog.begin() + static_cast<long>(find(p.programs[0], instr_kind::backward)));
        const auto r = validate(p);
        REQUIRE_FALSE(r.ok());
        CHECK(r.to_string().find("backwards (needs exactly 1)") != std::string::npos);
    }
    SUBCASE("reduce: reduce_gradients before the last backward") {
        auto p = test::one_f_one_b_plan(2, 2);
        auto& prog = p.programs[1].instructions;
        const instruction red = prog[prog.size() - 2];
        prog.erase(prog.end() - 2);
        prog.insert(prog.begin(), red);
        CHECK(first_rule(p) == "reduce");
    }
    SUBCASE("reduce: ZeRO >= 2 needs reduce-scatter") {
        auto p = test::one_f_one_b_plan(2, 2);
        p.header.zero_stage = 2;
        CHECK(first_rule(p) == "reduce");
    }
    SUBCASE("header and programs disagree") {
        auto p = test::one_f_one_b_plan(2, 2);
        p.programs.pop_back();
        CHECK(first_rule(p) == "structure");
    }
    SUBCASE("overlap: an overlap_f_b before a forward whose next compute op is not another micro-batch's backward") {
        auto p = test::one_f_one_b_plan(2, 2);  // rank 0 runs F0 F1 B0 B1
        auto& prog = p.programs[0].instructions;
        instruction o = prog[find(p.programs[0], instr_kind::forward, 1)];
        o.kind = instr_kind::overlap_f_b;
        o.in = o.out = o.stash = o.work = no_slot;
        auto q = p;
        auto& first = q.programs[0].instructions;
        const std::size_t f0 = find(q.programs[0], instr_kind::forward, 0);  // F0, then F1: no backward next
        instruction o0 = first[f0];
        o0.kind = instr_kind::overlap_f_b;
        o0.in = o0.out = o0.stash = o0.work = no_slot;
        first.insert(first.begin() + static_cast<long>(f0), o0);
        CHECK(first_rule(q) == "overlap");
        o.microbatch = 0;  // names micro-batch 0, placed before micro-batch 1's forward
        prog.insert(prog.begin() + static_cast<long>(find(p.programs[0], instr_kind::forward, 1)), o);
        const auto r = validate(p);
        REQUIRE_FALSE(r.ok());
        CHECK(r.violations[0].rule == "overlap");
        CHECK(r.to_string().find("not followed by the forward of its micro-batch and stage") != std::string::npos);
    }
}

TEST_CASE("validate: a full report stops nothing from being checked safely") {
    // Every rank broken in its structure, with room for one violation: the later ranks' walks
    // must not run on out-of-range fields once the cap is reached.
    auto p = test::one_f_one_b_plan(4, 6);
    for (auto& prog : p.programs)
        for (auto& x : prog.instructions)
            if (is_compute(x.kind)) x.microbatch = 1000;
    validate_options o;
    o.max_violations = 1;
    const auto r = validate(p, o);
    REQUIRE(r.violations.size() == 1);
    CHECK(r.truncated);
    CHECK(r.violations[0].rule == "structure");
    CHECK(r.violations[0].message.find("micro-batch out of range") != std::string::npos);
}

TEST_CASE("validate_rank: a header claiming 2^30 stages is checked without tabulating them") {
    rank_plan rp;
    rp.header.devices = 1u << 30;  // as a corrupted file may claim
    rp.header.dp = 1;
    rp.header.chunks = 1;
    rp.program.rank = 3;
    instruction f;
    f.kind = instr_kind::forward;
    f.stage = (1u << 30) - 1;  // beyond any table: its device is computed
    rp.program.instructions = {f};
    const auto rep = validate_rank(rp);
    REQUIRE_FALSE(rep.ok());
    CHECK(rep.violations.front().rule == "structure");  // micro-batch 0 is not in the (empty) table
}

TEST_CASE("validate_rank / validate: a header claiming millions of chunks is a structure error in O(1)") {
    // A valid 2-rank plan whose header claims 6,094,850 chunks: the stage -> device map would
    // need 12 million entries, so the header is refused before any table is sized by it.
    auto p = test::one_f_one_b_plan(2, 2);
    p.header.chunks = 6094850;
    for (const auto& prog : p.programs) {
        const auto r = validate_rank(rank_plan{p.header, prog});
        REQUIRE(r.violations.size() == 1);
        CHECK(r.violations[0].rule == "structure");
        CHECK(r.violations[0].message == "placement: stage_devices has 2 entries, devices x chunks is 12189700");
    }
    CHECK_FALSE(validate(p).ok());
    p.header.stage_devices.clear();  // no map: only one chunk per device
    const auto r = validate_rank(rank_plan{p.header, p.programs[0]});
    REQUIRE(r.violations.size() == 1);
    CHECK(r.violations[0].message == "placement: no stage_devices map for 6094850 chunks per device");
}

TEST_CASE("validate: the placement map decides which rank runs a stage") {
    // The map is what the rules read, whatever the placement's name says: swapping the two
    // devices of a 2-stage plan makes every compute op run on the wrong rank.
    auto p = test::one_f_one_b_plan(2, 3);
    REQUIRE(validate(p).ok());
    p.header.placement = "my-placement";  // a user's name for the same map
    CHECK(validate(p).ok());
    p.header.stage_devices = {1, 0};
    const auto r = validate(p);
    REQUIRE_FALSE(r.ok());
    CHECK(r.violations.front().rule == "structure");
    CHECK(r.violations.front().message.find("stage runs on device") != std::string::npos);
}

TEST_CASE("validate: the deadlock rule agrees with the reference executor") {
    // With the pair rule, two ranks cannot deadlock each other (a rank blocked on the pair's
    // k-th message has posted every earlier start of the pair), so a linear pipeline cannot
    // deadlock at all; a wrap-around placement can. Move receives (start and wait) of an
    // interleaved plan on 3 devices earlier until the only rule broken is "deadlock".
    const auto sc = test::random_scenario(3, 6, 11);
    const auto ch = schedule::split_into_chunks(sc, 2);
    const execution_plan base = lower(ch, schedule::interleaved_1f1b{2}(ch));
    REQUIRE(validate(base).ok());
    splitmix64 rng(9);
    int deadlocks = 0;
    for (int t = 0; t < 3000 && deadlocks < 5; ++t) {
        execution_plan p = base;
        if (!test::move_receive_earlier(p, rng)) continue;
        const auto r = validate(p);
        if (r.ok() || r.violations.front().rule != "deadlock") continue;
        ++deadlocks;
        CHECK(r.to_string().find("waits for rank") != std::string::npos);
        CHECK_FALSE(test::reference_run(p).finished);
    }
    CHECK(deadlocks > 0);
}

TEST_CASE("validate: mutation test — every edit that breaks the plan is rejected") {
    // Edits: drop, duplicate, swap (adjacent and anywhere), change a peer, a shape, a slot,
    // the bytes or the dtype. The oracle is the reference executor: an edit that makes it
    // deadlock, fault or compute other gradients broke the plan and must be rejected. Edits of
    // a message's peer, shape, bytes or dtype always break a rule (structure or match).
    std::size_t edits = 0, rejected = 0, broken = 0, harmless_accepted = 0;
    splitmix64 rng(2024);
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const auto sc = test::random_scenario(2 + seed % 3, 3 + seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            const execution_plan base = lower(c.sc, c.sched);
            const auto want = test::reference_run(base);
            REQUIRE(want.finished);
            for (int e = 0; e < 100; ++e, ++edits) {
                execution_plan p = base;
                auto& prog = p.programs[rng.below(p.programs.size())];
                auto& ins = prog.instructions;
                const std::size_t i = rng.below(ins.size());
                bool must_break = false;
                switch (rng.below(8)) {
                    case 0: ins.erase(ins.begin() + static_cast<long>(i)); break;
                    case 1: ins.insert(ins.begin() + static_cast<long>(i), ins[i]); break;
                    case 2: std::swap(ins[i], ins[i + 1 < ins.size() ? i + 1 : 0]); break;
                    case 3: std::swap(ins[i], ins[rng.below(ins.size())]); break;
                    case 4:
                        ins[i].peer = static_cast<std::int32_t>(rng.below(p.programs.size() + 1));
                        must_break = is_message(ins[i].kind) && ins[i].peer != base.programs[prog.rank].instructions[i].peer;
                        break;
                    case 5:
                        ins[i].shape.seqlen += 1 + static_cast<std::uint32_t>(rng.below(3));
                        must_break = is_message(ins[i].kind) || is_compute(ins[i].kind);
                        break;
                    case 6: {
                        std::uint32_t* f[] = {&ins[i].in, &ins[i].out, &ins[i].stash, &ins[i].work};
                        *f[rng.below(4)] = rng.below(4) == 0 ? no_slot : static_cast<std::uint32_t>(rng.below(prog.buffers.size()));
                        break;
                    }
                    default:
                        if (rng.below(2)) ins[i].bytes += 1;
                        else ins[i].type = ins[i].type == dtype::fp16 ? dtype::bf16 : dtype::fp16;
                        must_break = is_message_start(ins[i].kind) || (ins[i].type != base.header.type && (is_compute(ins[i].kind) || is_message(ins[i].kind)));
                        break;
                }
                const bool accepted = validate(p).ok();
                const auto run = test::reference_run(p);
                const bool breaks = !(run == want);
                rejected += !accepted;
                broken += breaks;
                if (accepted) {
                    ++harmless_accepted;
                    CHECK_MESSAGE(!breaks, c.name << ": an accepted edit broke the run: " << run.fault);
                }
                if (must_break) CHECK_MESSAGE(!accepted, c.name << ": a rule-breaking edit was accepted");
            }
        }
    }
    CHECK(edits >= 2000);
    MESSAGE("mutation test: " << edits << " edits, " << broken << " broke the run, " << rejected
                              << " rejected, " << harmless_accepted << " accepted (all harmless)");
    CHECK(rejected >= broken);
}

TEST_CASE("validate: structure_ok() passes exactly the instructions check_structure() finds nothing wrong with") {
    // Random edits of every field structure_ok() reads (kinds built in, a user's or unknown;
    // slots, micro-batches, stages, peers, shapes, dtypes) on plans of every schedule (with and
    // without a placement map, one and several replicas): the fast test (with its table of
    // message peers and without) and the reporting one agree.
    splitmix64 rng(23);
    std::size_t passed = 0, failed = 0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const auto sc = test::random_scenario(2 + seed, 4 + seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            const execution_plan p = lower(c.sc, c.sched);
            const plan::detail::placement_tables t(p.header);
            for (const rank_program& prog : p.programs) {
                const plan::detail::rank_view rv(p.header, prog, t);
                const plan::detail::structure_limits lim(rv);
                REQUIRE_FALSE(lim.peer_of.empty());  // (tabulated: fewer stages than instructions)
                plan::detail::structure_limits untabulated = lim;  // as for a header claiming more stages
                untabulated.peer_of.clear();
                rank_program one = prog;  // the edited instruction alone, with the rank's buffers
                one.instructions.resize(1);
                const plan::detail::rank_view rv1(p.header, one, t);
                for (int k = 0; k < 200; ++k) {
                    instruction x = prog.instructions[rng.below(prog.instructions.size())];
                    switch (rng.below(9)) {
                        case 0: x.kind = static_cast<instr_kind>(rng.below(256)); break;
                        case 1: (rng.below(2) ? x.in : x.work) = static_cast<std::uint32_t>(rng.below(prog.buffers.size() + 2)); break;
                        case 2: x.stash = rng.below(2) ? no_slot : static_cast<std::uint32_t>(prog.buffers.size()); break;
                        case 3: x.microbatch = static_cast<std::uint32_t>(rng.below(p.header.microbatches.size() + 2)); break;
                        case 4: x.stage = static_cast<std::uint32_t>(rng.below(p.header.virtual_stages() + 2)); break;
                        case 5: x.peer = static_cast<std::int32_t>(rng.below(p.programs.size() + 2)) - 1; break;
                        case 6: (rng.below(2) ? x.shape.hidden : x.shape.dec_seqlen) += 1; break;
                        case 7: x.type = static_cast<dtype>(rng.below(4)); break;
                        default: break;  // as lowered
                    }
                    one.instructions[0] = x;
                    validation_report r;
                    plan::detail::reporter rep{r, 8};
                    plan::detail::check_structure(rv1, 0, rep);
                    CAPTURE(describe(x));
                    CHECK(plan::detail::structure_ok(lim, x) == r.ok());
                    CHECK(plan::detail::structure_ok(untabulated, x) == r.ok());
                    (r.ok() ? passed : failed) += 1;
                }
            }
        }
    }
    MESSAGE(passed << " sound, " << failed << " broken");
    CHECK(passed > 1000);
    CHECK(failed > 1000);
}

TEST_CASE("validate: arena_disjoint() holds exactly when the reporting sweep finds no overlap") {
    // Seeded edits of buffer offsets and sizes (onto another buffer, half into it, anywhere in
    // the arena, size 0 or larger) on plans of every schedule: the fast proof that no two live
    // buffers overlap agrees with the sweep that reports each overlap.
    splitmix64 rng(31);
    std::size_t disjoint = 0, overlapping = 0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const auto sc = test::random_scenario(2 + seed, 4 + 2 * seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            const execution_plan base = lower(c.sc, c.sched);
            const plan::detail::placement_tables t(base.header);
            for (int e = 0; e < 40; ++e) {
                rank_program prog = base.programs[rng.below(base.programs.size())];
                const std::size_t edits = e == 0 ? 0 : 1 + rng.below(3);
                for (std::size_t k = 0; k < edits && !prog.buffers.empty(); ++k) {
                    buffer& a = prog.buffers[rng.below(prog.buffers.size())];
                    const buffer& b = prog.buffers[rng.below(prog.buffers.size())];
                    switch (rng.below(4)) {
                        case 0: a.offset_bytes = b.offset_bytes; break;
                        case 1: a.offset_bytes = b.offset_bytes + b.size_bytes / 2; break;
                        case 2: a.offset_bytes = rng.below(prog.arena_bytes + 1); break;
                        default: a.size_bytes = rng.below(2) ? 0 : a.size_bytes + 1 + rng.below(1 << 20); break;
                    }
                }
                const plan::detail::rank_view rv(base.header, prog, t);
                validation_report r;
                plan::detail::reporter rep{r, 1000};
                std::vector<plan::detail::unit_state> units(std::size_t(base.header.chunks) * base.header.microbatches.size());
                plan::detail::buffer_walk w(rv, rep);
                plan::detail::walk_program(w, units);
                w.report_leaks();
                plan::detail::buffer_walk sweep = w;  // the same states, for the reporting path
                const std::size_t before = r.violations.size();
                sweep.report_overlaps();
                const bool reported = r.violations.size() != before;
                CHECK(w.arena_disjoint() == !reported);
                (reported ? overlapping : disjoint) += 1;
            }
        }
    }
    MESSAGE(disjoint << " disjoint, " << overlapping << " overlapping");
    CHECK(disjoint > 50);
    CHECK(overlapping > 50);
}
