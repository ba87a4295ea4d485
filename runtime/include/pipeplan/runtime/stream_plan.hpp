// pipeplan/runtime/stream_plan.hpp — how a rank's instruction stream maps onto two device
// streams (compute and communication) ordered by events. Host-only: no CUDA header; the CUDA
// transports follow it, and it is unit-tested on CPU.
//
// The mapping (make_stream_plan):
//  - every non-message instruction is one op on the rank's compute stream;
//  - a maximal run of consecutive message starts (plan::start_groups) is one communication
//    group: one ncclGroupStart/ncclGroupEnd on the communication stream (the single-GPU
//    transport issues its copies at the same points). Before the group launches, the
//    communication stream waits on an event recorded on the compute stream after every op
//    enqueued so far: a send never reads a buffer before its producer wrote it, and a receive
//    never overwrites arena bytes an earlier op still reads;
//  - a message wait makes the compute stream wait on its group's completion event (only the
//    first wait of a group: later ones are already ordered);
//  - the host never blocks on the device inside a step.
// Whether a whole plan can deadlock under this mapping is the plan tier's question: a group
// completes once every counterpart sits in a group its peer launched, which is the `grouped`
// send rule of plan/deadlock.hpp (plan::find_deadlock(plan, plan::send_rule::grouped); the
// validator runs it for plans whose header records that rule). Transports that group starts
// refuse plans checked under a looser rule (executor.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/plan/messages.hpp"
#include "pipeplan/plan/plan.hpp"

namespace pipeplan::runtime {

/// What an instruction that belongs to no communication group holds in stream_plan::group_of.
inline constexpr std::uint32_t no_group = 0xFFFFFFFFu;

/// One communication group: the message starts [first, last] of a rank's program.
struct comm_group {
    std::size_t first = 0;           ///< index of the group's first start
    std::size_t last = 0;            ///< index of its last start
    std::size_t compute_before = 0;  ///< compute-stream items enqueued before it launches
};

/// The stream mapping of one rank's program (see the file comment).
struct stream_plan {
    std::vector<comm_group> groups;
    std::vector<std::uint32_t> group_of;      ///< [instruction] the group of a start or a wait; else no_group
    std::vector<std::uint8_t> compute_waits;  ///< [instruction] 1: this wait makes the compute stream wait on its group
    std::size_t compute_items = 0;            ///< ops plus compute-stream waits

    /// True when instruction i is the last start of its group (the transport closes the group).
    [[nodiscard]] bool ends_group(std::size_t i) const noexcept {
        const std::uint32_t g = i < group_of.size() ? group_of[i] : no_group;
        return g != no_group && groups[g].last == i;
    }
    /// Events the backend needs: one compute event and one completion event per group.
    [[nodiscard]] std::size_t events() const noexcept { return 2 * groups.size(); }
};

/// The stream mapping of a rank's program. Throws invalid_argument when a wait has no start
/// before it (the executor's checks reject such plans first).
[[nodiscard]] inline stream_plan make_stream_plan(const plan::rank_program& prog) {
    const auto& ins = prog.instructions;
    const std::vector<std::uint32_t> start = plan::start_of_wait(prog.instructions).start_of;
    const std::vector<std::uint32_t> group_first = plan::start_groups(prog.instructions);
    stream_plan sp;
    sp.group_of.assign(ins.size(), no_group);
    sp.compute_waits.assign(ins.size(), 0);
    std::vector<std::uint8_t> group_waited;
    for (std::size_t i = 0; i < ins.size(); ++i) {
        if (plan::is_message_start(ins[i].kind)) {
            if (group_first[i] == i) {
                sp.groups.push_back({i, i, sp.compute_items});
                group_waited.push_back(0);
            }
            sp.groups.back().last = i;
            sp.group_of[i] = static_cast<std::uint32_t>(sp.groups.size() - 1);
        } else if (plan::is_message_wait(ins[i].kind)) {
            if (start[i] == plan::no_instruction)
                throw invalid_argument("rank " + std::to_string(prog.rank) + ": instruction #" + std::to_string(i) +
                                       " waits for a message that was not started");
            const std::uint32_t g = sp.group_of[start[i]];
            sp.group_of[i] = g;
            if (!group_waited[g]) {
                group_waited[g] = 1;
                sp.compute_waits[i] = 1;
                ++sp.compute_items;
            }
        } else {
            ++sp.compute_items;
        }
    }
    return sp;
}

}  // namespace pipeplan::runtime
