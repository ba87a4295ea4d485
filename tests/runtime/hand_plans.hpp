// Hand-made rank programs of the runtime tests: message and compute instructions, and two
// ranks exchanging one message each way (the device backends' group and clock tests).
#pragma once

#include <cstdint>

#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/plan/plan.hpp"

namespace pipeplan::test {

using plan::instr_kind;

inline plan::instruction msg(instr_kind k, std::uint32_t mb, std::int32_t peer, std::uint32_t slot = 0, std::uint64_t bytes = 8) {
    plan::instruction i;
    i.kind = k;
    i.microbatch = mb;
    i.peer = peer;
    const auto cat = plan::category(k);
    if (cat == plan::kind_category::send_start) i.in = slot;
    if (cat == plan::kind_category::recv_start) i.out = slot;
    if (plan::is_message_start(k)) i.bytes = bytes;
    return i;
}
inline plan::instruction op(instr_kind k, std::uint32_t mb = 0) {
    plan::instruction i;
    i.kind = k;
    i.microbatch = mb;
    return i;
}

/// Two ranks that each send one message to the other and receive one from it; `send_first`
/// per rank orders its starts, `together` puts the two starts back to back (one group) or
/// separates them by the send's wait (two groups).
inline plan::execution_plan exchange(bool together0, bool together1) {
    plan::execution_plan p;
    p.header.devices = 2;
    p.header.predicted_peak_memory_mb = {0.0, 0.0};
    p.header.microbatches.resize(1);
    for (int r = 0; r < 2; ++r) {
        plan::rank_program prog;
        prog.rank = std::uint32_t(r);
        prog.arena_bytes = 16;
        prog.buffers = {plan::buffer{0, 8, plan::buffer_role::activation_out, 0, 0},
                        plan::buffer{8, 8, plan::buffer_role::grad_in, 0, 0}};
        const bool together = r == 0 ? together0 : together1;
        const int peer = 1 - r;
        auto& in = prog.instructions;
        in.push_back(op(instr_kind::forward));
        in.push_back(msg(instr_kind::send_activation_start, 0, peer, 0));
        if (!together) in.push_back(msg(instr_kind::send_activation_wait, 0, peer));
        in.push_back(msg(instr_kind::recv_activation_start, 0, peer, 1));
        if (together) in.push_back(msg(instr_kind::send_activation_wait, 0, peer));
        in.push_back(msg(instr_kind::recv_activation_wait, 0, peer));
        in.push_back(op(instr_kind::backward));
        p.programs.push_back(prog);
    }
    return p;
}

}  // namespace pipeplan::test
