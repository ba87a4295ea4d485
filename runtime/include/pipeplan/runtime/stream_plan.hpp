// pipeplan/runtime/stream_plan.hpp — how a rank's instruction stream maps onto two device
// streams (compute and communication) ordered by events, and a check that the whole job cannot
// deadlock under that mapping. Host-only: no CUDA header; the CUDA transports follow it, and it
// is unit-tested on CPU.
//
// The mapping (make_stream_plan):
//  - every non-message instruction is one op on the rank's compute stream;
//  - a maximal run of consecutive message starts (send/recv starts with nothing between them)
//    is one communication group: one ncclGroupStart/ncclGroupEnd on the communication stream
//    (the single-GPU transport issues its copies at the same points). Before the group
//    launches, the communication stream waits on an event recorded on the compute stream after
//    every op enqueued so far: a send never reads a buffer before its producer wrote it, and a
//    receive never overwrites arena bytes an earlier op still reads;
//  - a message wait makes the compute stream wait on its group's completion event (only the
//    first wait of a group: later ones are already ordered);
//  - the host never blocks on the device inside a step.
//
// find_stream_deadlock runs every rank's two streams as the device would: an op on the compute
// stream runs when it is reached, a wait when its group completed; a group starts when the
// previous group of its rank completed and its compute event was reached; a started group
// completes when the counterpart of each of its messages (the k-th send from a to b pairs with
// the k-th receive at b from a) sits in a started group of the peer. Sends are assumed to block
// until matched (NCCL's behaviour for large messages), so a plan that passes cannot deadlock
// whatever the message sizes. Collectives (gradient all-reduce) are not modelled: they come
// after the rank's last message in every plan the lowering emits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "pipeplan/core/error.hpp"
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

namespace detail {

/// The start each wait completes: [instruction] index of the start, or SIZE_MAX.
[[nodiscard]] inline std::vector<std::size_t> start_of_waits(const plan::rank_program& prog) {
    std::vector<std::size_t> start(prog.instructions.size(), std::size_t(-1));
    std::vector<std::size_t> open;
    for (std::size_t i = 0; i < prog.instructions.size(); ++i) {
        const auto& in = prog.instructions[i];
        if (plan::is_message_start(in.kind)) {
            open.push_back(i);
        } else if (plan::is_message_wait(in.kind)) {
            for (auto it = open.begin(); it != open.end(); ++it) {
                const auto& s = prog.instructions[*it];
                if (plan::wait_of(s.kind) == in.kind && s.mb == in.mb && s.stage == in.stage && s.peer == in.peer) {
                    start[i] = *it;
                    open.erase(it);
                    break;
                }
            }
        }
    }
    return start;
}

}  // namespace detail

/// The stream mapping of a rank's program. Throws invalid_argument when a wait has no start
/// before it (the executor's checks reject such plans first).
[[nodiscard]] inline stream_plan make_stream_plan(const plan::rank_program& prog) {
    const auto& ins = prog.instructions;
    const std::vector<std::size_t> start = detail::start_of_waits(prog);
    stream_plan sp;
    sp.group_of.assign(ins.size(), no_group);
    sp.compute_waits.assign(ins.size(), 0);
    std::vector<std::uint8_t> group_waited;
    for (std::size_t i = 0; i < ins.size(); ++i) {
        if (plan::is_message_start(ins[i].kind)) {
            const bool extends = i > 0 && plan::is_message_start(ins[i - 1].kind);
            if (!extends) {
                sp.groups.push_back({i, i, sp.compute_items});
                group_waited.push_back(0);
            }
            sp.groups.back().last = i;
            sp.group_of[i] = static_cast<std::uint32_t>(sp.groups.size() - 1);
        } else if (plan::is_message_wait(ins[i].kind)) {
            if (start[i] == std::size_t(-1))
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

namespace detail {

/// One rank's two streams while find_stream_deadlock runs them.
struct stream_state {
    stream_plan sp;
    std::vector<std::size_t> items;  ///< compute-stream items: instruction indices (ops and first waits)
    std::size_t compute_done = 0;    ///< compute-stream items that ran
    std::size_t group = 0;           ///< the group at the head of the communication stream
    bool started = false;            ///< whether that group started
};

/// For every start, the (rank, instruction) of its counterpart, by per-pair sequence numbers.
[[nodiscard]] inline std::vector<std::vector<std::pair<std::size_t, std::size_t>>> counterparts(
    const plan::execution_plan& p) {
    // (src, dst, is_recv) -> instruction indices in program order
    std::map<std::tuple<std::size_t, std::size_t, bool>, std::vector<std::size_t>> seq;
    for (std::size_t r = 0; r < p.programs.size(); ++r)
        for (std::size_t i = 0; i < p.programs[r].instructions.size(); ++i) {
            const auto& in = p.programs[r].instructions[i];
            if (!plan::is_message_start(in.kind)) continue;
            const bool recv = plan::category(in.kind) == plan::kind_category::recv_start;
            const auto peer = static_cast<std::size_t>(in.peer);
            seq[recv ? std::tuple(peer, r, true) : std::tuple(r, peer, false)].push_back(i);
        }
    std::vector<std::vector<std::pair<std::size_t, std::size_t>>> out(p.programs.size());
    const std::pair<std::size_t, std::size_t> none{std::size_t(-1), std::size_t(-1)};
    for (std::size_t r = 0; r < p.programs.size(); ++r) out[r].assign(p.programs[r].instructions.size(), none);
    for (const auto& [key, sends] : seq) {
        const auto [src, dst, recv] = key;
        if (recv) continue;
        const auto it = seq.find({src, dst, true});
        const std::size_t n = it == seq.end() ? 0 : std::min(sends.size(), it->second.size());
        for (std::size_t k = 0; k < n; ++k) {
            out[src][sends[k]] = {dst, it->second[k]};
            out[dst][it->second[k]] = {src, sends[k]};
        }
    }
    return out;
}

/// Whether rank r's current group may complete: started, and every counterpart in a started group.
[[nodiscard]] inline bool group_can_complete(const std::vector<stream_state>& st, std::size_t r,
                                             const std::vector<std::vector<std::pair<std::size_t, std::size_t>>>& cp) {
    const auto& s = st[r];
    const comm_group& g = s.sp.groups[s.group];
    for (std::size_t i = g.first; i <= g.last; ++i) {
        const auto [peer, j] = cp[r][i];
        if (peer == std::size_t(-1)) return false;  // never matched
        const auto& q = st[peer];
        const std::uint32_t pg = q.sp.group_of[j];
        if (pg > q.group || (pg == q.group && !q.started)) return false;
    }
    return true;
}

/// Advances rank r's streams as far as they go; true when anything moved.
inline bool advance(std::vector<stream_state>& st, std::size_t r, const plan::execution_plan& p,
                    const std::vector<std::vector<std::pair<std::size_t, std::size_t>>>& cp) {
    bool moved = false;
    auto& s = st[r];
    for (;;) {
        bool step = false;
        while (s.compute_done < s.items.size()) {
            const std::size_t i = s.items[s.compute_done];
            if (plan::is_message_wait(p.programs[r].instructions[i].kind) && s.sp.group_of[i] >= s.group) break;
            ++s.compute_done;
            step = true;
        }
        if (s.group < s.sp.groups.size()) {
            if (!s.started && s.compute_done >= s.sp.groups[s.group].compute_before) s.started = step = true;
            if (s.started && group_can_complete(st, r, cp)) {
                ++s.group;
                s.started = false;
                step = true;
            }
        }
        if (!step) return moved;
        moved = true;
    }
}

}  // namespace detail

/// Runs every rank's streams under the mapping above (see the file comment); nullopt when every
/// rank finishes, else a description of where each unfinished rank is stuck.
[[nodiscard]] inline std::optional<std::string> find_stream_deadlock(const plan::execution_plan& p) {
    std::vector<detail::stream_state> st(p.programs.size());
    for (std::size_t r = 0; r < p.programs.size(); ++r) {
        st[r].sp = make_stream_plan(p.programs[r]);
        const auto& ins = p.programs[r].instructions;
        for (std::size_t i = 0; i < ins.size(); ++i)
            if (!plan::is_message_start(ins[i].kind) && (!plan::is_message_wait(ins[i].kind) || st[r].sp.compute_waits[i]))
                st[r].items.push_back(i);
    }
    const auto cp = detail::counterparts(p);
    for (bool moved = true; moved;) {
        moved = false;
        for (std::size_t r = 0; r < st.size(); ++r) moved = detail::advance(st, r, p, cp) || moved;
    }
    std::string stuck;
    for (std::size_t r = 0; r < st.size(); ++r) {
        const auto& s = st[r];
        if (s.compute_done == s.items.size() && s.group == s.sp.groups.size()) continue;
        stuck += "rank " + std::to_string(r) + ": compute stream at item " + std::to_string(s.compute_done) + " of " +
                 std::to_string(s.items.size());
        if (s.group < s.sp.groups.size())
            stuck += ", communication group " + std::to_string(s.group) + " (instructions #" +
                     std::to_string(s.sp.groups[s.group].first) + "..#" + std::to_string(s.sp.groups[s.group].last) +
                     (s.started ? ", started)" : ", not started)");
        stuck += "\n";
    }
    if (stuck.empty()) return std::nullopt;
    return stuck;
}

}  // namespace pipeplan::runtime
