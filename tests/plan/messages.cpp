// plan/messages.hpp: start_of_wait against a brute-force pairing, pair_sequence and counterpart
// on lowered plans, start_groups; and that the validator, the runtime's stream mapping and the
// executor's request map pair every wait with the same start.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/messages.hpp"
#include "pipeplan/plan/validate.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

namespace {

/// The pairing by definition: a wait takes the one open start of its message (kind, mb, stage,
/// peer); a start of an open message is started again; what stays open was never waited for.
wait_pairing brute_force(const std::vector<instruction>& prog) {
    wait_pairing out;
    out.start_of.assign(prog.size(), no_instruction);
    std::vector<std::uint32_t> open;
    const auto same = [](const instruction& a, const instruction& b) {
        return wait_of(a.kind) == wait_of(b.kind) && a.microbatch == b.microbatch && a.stage == b.stage && a.peer == b.peer;
    };
    for (std::uint32_t i = 0; i < prog.size(); ++i) {
        std::size_t hit = open.size();
        for (std::size_t k = 0; k < open.size(); ++k)
            if (same(prog[open[k]], prog[i])) hit = k;
        if (is_message_start(prog[i].kind)) {
            if (hit < open.size()) out.faults.push_back({i, pairing_fault::started_again});
            else open.push_back(i);
        } else if (is_message_wait(prog[i].kind)) {
            if (hit == open.size()) {
                out.faults.push_back({i, pairing_fault::not_started});
                continue;
            }
            out.start_of[i] = open[hit];
            open.erase(open.begin() + static_cast<std::ptrdiff_t>(hit));
        }
    }
    std::sort(open.begin(), open.end());
    for (std::uint32_t s : open) out.faults.push_back({s, pairing_fault::never_waited});
    return out;
}

}  // namespace

TEST_CASE("messages: start_of_wait pairs by kind, micro-batch, stage and peer and reports each fault once") {
    const std::vector<instruction> prog = {
        test::instr(instr_kind::send_activation_start, 1, 0, 1),  // 0
        test::instr(instr_kind::send_activation_start, 2, 0, 1),  // 1 another peer: another message
        test::instr(instr_kind::send_activation_start, 1, 0, 1),  // 2 started again
        test::instr(instr_kind::recv_grad_wait, 1, 0, 2),         // 3 never started
        test::instr(instr_kind::send_activation_wait, 2, 0, 1),   // 4 -> 1
        test::instr(instr_kind::send_activation_wait, 1, 0, 1),   // 5 -> 0
        test::instr(instr_kind::recv_activation_start, 0, 7, 0),  // 6 never waited for (mb beyond the table)
    };
    const wait_pairing w = start_of_wait(prog, 4);
    CHECK(w.start_of == std::vector<std::uint32_t>{no_instruction, no_instruction, no_instruction, no_instruction, 1, 0,
                                                   no_instruction});
    using F = wait_pairing::fault;
    CHECK(w.faults == std::vector<F>{{2, pairing_fault::started_again}, {3, pairing_fault::not_started},
                                     {6, pairing_fault::never_waited}});
    CHECK(start_of_wait(prog).start_of == w.start_of);  // sized by the program: the same pairing
}

TEST_CASE("messages: start_of_wait equals the brute-force pairing on random programs (any micro-batch table size)") {
    splitmix64 rng(17);
    for (int t = 0; t < 400; ++t) {
        std::vector<instruction> prog;
        const std::size_t n = 1 + rng.below(40);
        for (std::size_t i = 0; i < n; ++i) {
            const auto k = static_cast<instr_kind>(static_cast<std::uint8_t>(instr_kind::send_activation_start) + rng.below(8));
            const bool compute = rng.below(5) == 0;
            const auto microbatch = static_cast<std::uint32_t>(rng.below(3));
            const auto stage = static_cast<std::uint32_t>(rng.below(2));
            const auto peer = static_cast<std::int32_t>(rng.below(2));
            prog.push_back(test::instr(compute ? instr_kind::forward : k, peer, microbatch, stage));
        }
        const wait_pairing want = brute_force(prog);
        for (std::size_t table : {0, 1, 3, 8}) {
            CAPTURE(t);
            CAPTURE(table);
            const wait_pairing got = start_of_wait(prog, table);
            CHECK(got.start_of == want.start_of);
            CHECK(got.faults == want.faults);
            // over a list of the messages (what the validator passes), and over every index
            // (the other instructions passed over): the same pairing
            const std::vector<std::uint32_t> listed = message_indices(prog);
            for (const std::uint32_t i : listed) CHECK(is_message(prog[i].kind));
            CHECK(listed.size() == static_cast<std::size_t>(std::count_if(prog.begin(), prog.end(), [](const instruction& x) { return is_message(x.kind); })));
            std::vector<std::uint32_t> every(prog.size());
            for (std::uint32_t i = 0; i < every.size(); ++i) every[i] = i;
            for (const auto& list : {listed, every}) {
                const wait_pairing over = start_of_wait(prog, table, list);
                CHECK(over.start_of == want.start_of);
                CHECK(over.faults == want.faults);
            }
        }
    }
}

TEST_CASE("messages: counterparts of lowered plans are mutual and of matching kinds; groups are runs of starts") {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        const auto sc = test::random_scenario(2 + seed % 3, 3 + seed, seed);
        for (const auto& c : test::all_schedules(sc)) {
            CAPTURE(c.name);
            const execution_plan p = lower(c.sc, c.sched);
            const message_sequence seq = pair_sequence(p);
            std::size_t starts = 0;
            for (std::size_t r = 0; r < p.programs.size(); ++r) {
                const auto& prog = p.programs[r].instructions;
                const std::vector<std::uint32_t> groups = start_groups(prog);
                for (std::uint32_t i = 0; i < prog.size(); ++i) {
                    CHECK((groups[i] != no_instruction) == is_message_start(prog[i].kind));
                    if (!is_message_start(prog[i].kind)) continue;
                    ++starts;
                    CHECK(groups[i] == (i > 0 && is_message_start(prog[i - 1].kind) ? groups[i - 1] : i));
                    const message_end e = counterpart(p, seq, r, i);
                    REQUIRE(e.found());
                    const instruction& y = p.programs[e.rank].instructions[e.index];
                    CHECK(y.kind == matching_start(prog[i].kind));
                    CHECK(y.microbatch == prog[i].microbatch);
                    CHECK(y.stage == prog[i].stage);
                    CHECK(counterpart(p, seq, e.rank, e.index) == message_end{static_cast<std::uint32_t>(r), i});
                }
            }
            CHECK(seq.flat.size() == starts);
            // from lists of each rank's messages, or of every instruction: the same places
            std::vector<std::vector<std::uint32_t>> listed, every;
            for (const rank_program& rp : p.programs) {
                listed.push_back(message_indices(rp.instructions));
                every.emplace_back(rp.instructions.size());
                for (std::uint32_t i = 0; i < rp.instructions.size(); ++i) every.back()[i] = i;
            }
            for (const auto& lists : {listed, every}) {
                const message_sequence other = pair_sequence(p, lists);
                CHECK(other.k == seq.k);
                CHECK(other.begin == seq.begin);
                CHECK(other.flat == seq.flat);
            }
        }
    }
}
