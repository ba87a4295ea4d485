// runtime/stream_plan.hpp: the stream/event mapping of a rank's program (groups of starts,
// waits, compute events); every schedule's plans for a grouping transport pass the grouped
// deadlock check, and streams, executor and validator pair waits alike.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hand_plans.hpp"
#include "pipeplan/plan/deadlock.hpp"
#include "pipeplan/runtime/cpu/plans.hpp"
#include "pipeplan/runtime/executor.hpp"
#include "pipeplan/runtime/stream_plan.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace std::chrono_literals;
using plan::instr_kind;
using test::exchange;
using test::msg;
using test::op;

TEST_CASE("stream plan: groups are maximal runs of starts; waits wait once per group; compute events counted") {
    plan::rank_program prog;
    prog.rank = 0;
    prog.instructions = {op(instr_kind::forward),                          // 0 compute item 0
                         msg(instr_kind::send_activation_start, 0, 1),     // 1 group 0
                         msg(instr_kind::recv_grad_start, 1, 1),           // 2 group 0
                         op(instr_kind::forward, 1),                       // 3 compute item 1
                         msg(instr_kind::send_activation_wait, 0, 1),      // 4 waits on group 0: item 2
                         msg(instr_kind::recv_grad_wait, 1, 1),            // 5 group 0 already waited on
                         msg(instr_kind::send_activation_start, 1, 1),     // 6 group 1
                         msg(instr_kind::send_activation_wait, 1, 1),      // 7 item 3
                         op(instr_kind::backward, 1)};                     // 8 item 4
    const stream_plan sp = make_stream_plan(prog);
    REQUIRE(sp.groups.size() == 2);
    CHECK(sp.groups[0].first == 1);
    CHECK(sp.groups[0].last == 2);
    CHECK(sp.groups[0].compute_before == 1);
    CHECK(sp.groups[1].first == 6);
    CHECK(sp.groups[1].last == 6);
    CHECK(sp.groups[1].compute_before == 3);
    CHECK(sp.compute_items == 5);
    CHECK(sp.events() == 4);
    CHECK(sp.group_of == std::vector<std::uint32_t>{no_group, 0, 0, no_group, 0, 0, 1, 1, no_group});
    CHECK(sp.compute_waits == std::vector<std::uint8_t>{0, 0, 0, 0, 1, 0, 0, 1, 0});
    for (std::size_t i = 0; i < prog.instructions.size(); ++i) CHECK(sp.ends_group(i) == (i == 2 || i == 6));
    prog.instructions.push_back(msg(instr_kind::recv_grad_wait, 7, 1));
    CHECK_THROWS_WITH_AS((void)make_stream_plan(prog), doctest::Contains("#9 waits for a message that was not started"),
                         pipeplan::invalid_argument);
}

TEST_CASE("stream plan: every schedule's plans for a grouping transport run under the grouped rule; one pairing of waits") {
    cpu::model_config c;
    c.vocab = 16;
    c.hidden = 4;
    c.ffn = 4;
    c.blocks = 16;
    int plans = 0;
    for (std::size_t dp : {1, 2})
        for (std::size_t devices : {2, 4, 8})
            for (auto name : {schedule::schedule_name::gpipe, schedule::schedule_name::one_f_one_b,
                              schedule::schedule_name::interleaved, schedule::schedule_name::adaptive,
                              schedule::schedule_name::zb_h1, schedule::schedule_name::merak_early,
                              schedule::schedule_name::merak_last, schedule::schedule_name::merak_critical,
                              schedule::schedule_name::zb_v, schedule::schedule_name::v_half,
                              schedule::schedule_name::v_min, schedule::schedule_name::dualpipe_v}) {
                CAPTURE(dp);
                CAPTURE(devices);
                CAPTURE(schedule::to_string(name));
                splitmix64 rng(devices * 10 + dp);
                const std::size_t mbs = 2 * devices + 3;
                std::vector<std::size_t> lengths;
                cpu::replica_split split(dp);
                for (std::size_t k = 0; k < dp; ++k)
                    for (std::size_t m = 0; m < mbs; ++m) {
                        std::vector<std::uint32_t> ids;
                        for (std::size_t s = 0, n = 1 + rng.below(3); s < n; ++s) {
                            ids.push_back(static_cast<std::uint32_t>(lengths.size()));
                            lengths.push_back(1 + rng.below(12));
                        }
                        split[k].push_back(ids);
                    }
                cpu::tiny_plan_options o;
                o.schedule = name;
                o.devices = devices;
                o.sends = plan::send_rule::grouped;  // validated under it by plan_tiny
                o.overlap_factor = 0.5;              // dualpipe-v's plans then hold overlap_f_b pairs
                const plan::execution_plan p = cpu::plan_tiny(c, split, lengths, o);
                REQUIRE(p.header.sends == plan::send_rule::grouped);
                // Messages are typed as the model's doubles; the stash of a store-mode forward or a
                // recompute holds the input of every block of its virtual stage (what the CUDA model
                // keeps there).
                const auto layouts = cpu::split_layers(c.blocks, p.header.virtual_stages());
                for (const auto& prog : p.programs)
                    for (const auto& in : prog.instructions) {
                        if (plan::is_message(in.kind)) REQUIRE(in.type == plan::dtype::fp64);
                        const bool stores = in.kind == instr_kind::forward || in.kind == instr_kind::recompute;
                        if (!stores || in.stash == plan::no_slot) continue;
                        const auto& mb = p.header.microbatches[in.microbatch].shape;
                        const std::size_t tensor_bytes = 8 * c.hidden * mb.microbatch_size * mb.seqlen;
                        const auto& l = layouts[in.stage];
                        REQUIRE(prog.buffers[in.stash].size_bytes >= (l.end_block - l.first_block) * tensor_bytes);
                        if (in.out != plan::no_slot) REQUIRE(prog.buffers[in.out].size_bytes >= tensor_bytes);
                    }
                if (plans == 0) {  // fp64 survives the binary format (dtype code 4)
                    const plan::execution_plan back = plan::execution_plan_from_binary(plan::to_binary(p));
                    CHECK(back.header.type == plan::dtype::fp64);
                    CHECK(back.programs == p.programs);
                }
                CHECK(plan::find_deadlock(p).empty());
                // One pairing of waits with starts: the stream mapping puts a wait in its start's
                // group, the executor gives it its start's request, both as start_of_wait says.
                handler_registry any;
                for (const auto& k : plan::builtin_kinds)
                    if (!plan::is_message(k.kind)) any.on(k.kind, [](const plan::instruction&, step_context&) {});
                for (const auto& prog : p.programs) {
                    const stream_plan sp = make_stream_plan(prog);
                    const request_map req = check_rank_plan(plan::rank_plan{p.header, prog}, p.programs.size(), any,
                                                            plan::send_rule::grouped);
                    const auto start = plan::start_of_wait(p.header, prog).start_of;
                    const auto groups = plan::start_groups(prog.instructions);
                    for (std::size_t i = 0; i < prog.instructions.size(); ++i) {
                        if (plan::is_message_start(prog.instructions[i].kind))
                            CHECK(sp.groups[sp.group_of[i]].first == groups[i]);
                        if (!plan::is_message_wait(prog.instructions[i].kind)) continue;
                        REQUIRE(start[i] != plan::no_instruction);
                        CHECK(sp.group_of[i] == sp.group_of[start[i]]);
                        CHECK(req.slot_of[i] == req.slot_of[start[i]]);
                    }
                }
                ++plans;
            }
    CHECK(plans == 72);
}

