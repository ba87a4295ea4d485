// pipeplan/plan/messages.hpp — which instructions make up one message, on one rank and between two.
//
// A message is a start and a wait on each of two ranks (instruction.hpp, "Communication"):
//   start_of_wait   on one rank, the start each wait completes: the open start of the same
//                   message (kind, micro-batch, stage, peer); at most one such start is open at
//                   a time; starts never waited for and waits without a start are reported;
//   pair_sequence   between two ranks, the place k of each start among the starts of that rank
//                   pair (both directions together, program order);
//   counterpart     the k-th start of the pair on the peer's side: the start a message pairs with;
//   start_groups    the maximal runs of consecutive starts (what a grouping transport launches
//                   together).
// The validator, the deadlock simulator (deadlock.hpp), the runtime's stream mapping and the
// executor's checks all pair messages through these functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/plan/plan.hpp"

namespace pipeplan::plan {

/// An instruction index that names no instruction.
inline constexpr std::uint32_t no_instruction = 0xFFFFFFFFu;

/// Which of the four messages (activation / gradient, send / receive) a start or wait is: 0..3.
[[nodiscard]] constexpr std::size_t message_kind_index(instr_kind k) noexcept {
    const auto start = static_cast<std::size_t>(k) - (is_message_wait(k) ? 1 : 0);
    return (start - static_cast<std::size_t>(instr_kind::send_activation_start)) / 2;
}

/// What start_of_wait() found wrong with one instruction.
enum class pairing_fault : std::uint8_t {
    started_again,  ///< a start while the same message is still open (not yet waited for)
    not_started,    ///< a wait without an open start of its message
    never_waited,   ///< a start that no wait completes
};

/// How the starts and waits of one rank pair up.
struct wait_pairing {
    struct fault {
        std::uint32_t index;  ///< the instruction
        pairing_fault what;
        friend bool operator==(const fault&, const fault&) = default;
    };
    /// [instruction] the start a wait completes; no_instruction for every other instruction and
    /// for a wait without a start
    std::vector<std::uint32_t> start_of;
    std::vector<fault> faults;  ///< in program order (never_waited ones last)
    [[nodiscard]] bool ok() const noexcept { return faults.empty(); }
};

namespace detail {

/// The open starts of one rank, keyed by (kind, micro-batch) in a flat table; the few open
/// messages of one key (other stages and peers) chain through `next`. Micro-batches beyond the
/// table (`microbatches`, the header's count) share one overflow chain.
struct open_starts {
    const std::vector<instruction>& prog;
    std::size_t microbatches;
    std::vector<std::uint32_t> head, next;
    std::uint32_t overflow = no_instruction;

    open_starts(const std::vector<instruction>& p, std::size_t m)
        : prog(p), microbatches(m), head(4 * m, no_instruction), next(p.size(), no_instruction) {}
    std::uint32_t& chain(const instruction& x) {
        return x.microbatch < microbatches ? head[message_kind_index(x.kind) * microbatches + x.microbatch] : overflow;
    }
    [[nodiscard]] bool same(const instruction& start, const instruction& x) const noexcept {
        return wait_of(start.kind) == wait_of(x.kind) && start.microbatch == x.microbatch && start.stage == x.stage && start.peer == x.peer;
    }
    /// Unlinks and returns the open start of x's message (no_instruction: none).
    std::uint32_t take(const instruction& x) {
        std::uint32_t* link = &chain(x);
        for (; *link != no_instruction; link = &next[*link])
            if (same(prog[*link], x)) {
                const std::uint32_t s = *link;
                *link = next[s];
                next[s] = no_instruction;
                return s;
            }
        return no_instruction;
    }
    [[nodiscard]] bool is_open(const instruction& x) {
        for (std::uint32_t s = chain(x); s != no_instruction; s = next[s])
            if (same(prog[s], x)) return true;
        return false;
    }
    void open(std::uint32_t i) {
        std::uint32_t& h = chain(prog[i]);
        next[i] = h;
        h = i;
    }
    /// Appends the starts still open, by index, as never waited for.
    void report_open(std::vector<wait_pairing::fault>& faults) const {
        std::vector<std::uint32_t> left;
        for (const std::uint32_t h : head)
            for (std::uint32_t s = h; s != no_instruction; s = next[s]) left.push_back(s);
        for (std::uint32_t s = overflow; s != no_instruction; s = next[s]) left.push_back(s);
        std::sort(left.begin(), left.end());
        for (const std::uint32_t s : left) faults.push_back({s, pairing_fault::never_waited});
    }
};

}  // namespace detail

/// The indices of the starts and waits of `prog`, ascending (what start_of_wait() and
/// pair_sequence() read of a program; a caller that classified the instructions already may
/// pass its own list).
[[nodiscard]] inline std::vector<std::uint32_t> message_indices(const std::vector<instruction>& prog) {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < prog.size(); ++i)
        if (is_message(prog[i].kind)) out.push_back(i);
    return out;
}

/// Pairs every wait of `prog` with its start (see the file comment); `messages` lists the
/// indices of every start and wait of prog, ascending (message_indices(); other instructions
/// listed are passed over). `microbatches` sizes the lookup table (the header's micro-batch
/// count; any micro-batch number is handled).
[[nodiscard]] inline wait_pairing start_of_wait(const std::vector<instruction>& prog, std::size_t microbatches,
                                                std::span<const std::uint32_t> messages) {
    wait_pairing out;
    out.start_of.assign(prog.size(), no_instruction);
    detail::open_starts open(prog, microbatches);
    std::size_t still_open = 0;
    for (const std::uint32_t i : messages) {
        const instruction& x = prog[i];
        if (is_message_start(x.kind)) {
            if (open.is_open(x)) {
                out.faults.push_back({i, pairing_fault::started_again});
                continue;
            }
            open.open(i);
            ++still_open;
        } else if (is_message_wait(x.kind)) {
            const std::uint32_t s = open.take(x);
            if (s == no_instruction) {
                out.faults.push_back({i, pairing_fault::not_started});
                continue;
            }
            out.start_of[i] = s;
            --still_open;
        }
    }
    if (still_open > 0) open.report_open(out.faults);
    return out;
}

/// start_of_wait() of every start and wait of `prog`.
[[nodiscard]] inline wait_pairing start_of_wait(const std::vector<instruction>& prog, std::size_t microbatches) {
    return start_of_wait(prog, microbatches, message_indices(prog));
}

/// start_of_wait() sized by the program itself (its messages' micro-batches, at most its length).
[[nodiscard]] inline wait_pairing start_of_wait(const std::vector<instruction>& prog) {
    std::size_t microbatches = 0;
    for (const instruction& x : prog)
        if (is_message(x.kind)) microbatches = std::max<std::size_t>(microbatches, std::min<std::size_t>(x.microbatch + 1ull, prog.size()));
    return start_of_wait(prog, microbatches);
}

/// start_of_wait() of a rank's program, sized by the plan's micro-batch table.
[[nodiscard]] inline wait_pairing start_of_wait(const plan_header& h, const rank_program& p) {
    return start_of_wait(p.instructions, h.microbatches.size());
}

/// The groups of a rank's starts: [instruction] the first start of the maximal run of
/// consecutive starts that holds it (the group a transport launches together); no_instruction
/// for every other instruction.
[[nodiscard]] inline std::vector<std::uint32_t> start_groups(const std::vector<instruction>& prog) {
    std::vector<std::uint32_t> first(prog.size(), no_instruction);
    for (std::uint32_t i = 0; i < prog.size(); ++i)
        if (is_message_start(prog[i].kind)) first[i] = i > 0 && first[i - 1] != no_instruction ? first[i - 1] : i;
    return first;
}

/// The place of every message start among the starts of its rank pair (see the file comment).
struct message_sequence {
    std::size_t ranks = 0;
    std::vector<std::vector<std::uint32_t>> k;  ///< [rank][instruction] a start's place; no_instruction otherwise
    std::vector<std::uint32_t> begin;           ///< [rank * ranks + peer] .. [+ 1]: that pair's run of `flat`
    std::vector<std::uint32_t> flat;            ///< the starts' instruction indices, by rank, peer and order

    /// Rank `rank`'s starts with `peer`, in program order.
    [[nodiscard]] std::span<const std::uint32_t> starts(std::size_t rank, std::size_t peer) const {
        const std::size_t x = rank * ranks + peer;
        return {flat.data() + begin[x], flat.data() + begin[x + 1]};
    }
};

/// One end of a message: a rank and the index of its start there.
struct message_end {
    std::uint32_t rank = no_instruction;
    std::uint32_t index = no_instruction;
    [[nodiscard]] bool found() const noexcept { return index != no_instruction; }
    friend bool operator==(const message_end&, const message_end&) = default;
};

/// Numbers every start of `plan` within its rank pair; `messages[r]` lists the indices of
/// every start of rank r's program, ascending (message_indices(); other instructions listed
/// are passed over). Starts whose peer is not a rank of the plan (or is the rank itself) get
/// no place.
[[nodiscard]] inline message_sequence pair_sequence(const execution_plan& plan,
                                                    const std::vector<std::vector<std::uint32_t>>& messages) {
    const std::size_t R = plan.programs.size();
    message_sequence seq;
    seq.ranks = R;
    seq.k.resize(R);
    seq.begin.assign(R * R + 1, 0);
    const auto paired = [R](std::size_t r, const instruction& x) {
        return is_message_start(x.kind) && x.peer >= 0 && static_cast<std::size_t>(x.peer) < R &&
               static_cast<std::size_t>(x.peer) != r;
    };
    for (std::size_t r = 0; r < R; ++r)  // count, then fill
        for (const std::uint32_t i : messages[r])
            if (const instruction& x = plan.programs[r].instructions[i]; paired(r, x)) ++seq.begin[r * R + static_cast<std::size_t>(x.peer) + 1];
    for (std::size_t x = 1; x < seq.begin.size(); ++x) seq.begin[x] += seq.begin[x - 1];
    seq.flat.resize(seq.begin.back());
    std::vector<std::uint32_t> fill(seq.begin.begin(), seq.begin.end() - 1);
    for (std::size_t r = 0; r < R; ++r) {
        const auto& prog = plan.programs[r].instructions;
        seq.k[r].assign(prog.size(), no_instruction);
        for (const std::uint32_t i : messages[r]) {
            if (!paired(r, prog[i])) continue;
            const std::size_t pair = r * R + static_cast<std::size_t>(prog[i].peer);
            seq.k[r][i] = fill[pair] - seq.begin[pair];
            seq.flat[fill[pair]++] = i;
        }
    }
    return seq;
}

/// pair_sequence() of every start of `plan`.
[[nodiscard]] inline message_sequence pair_sequence(const execution_plan& plan) {
    std::vector<std::vector<std::uint32_t>> messages;
    messages.reserve(plan.programs.size());
    for (const rank_program& p : plan.programs) messages.push_back(message_indices(p.instructions));
    return pair_sequence(plan, messages);
}

/// The start that rank `rank`'s start `index` pairs with: the peer's start of the same place in
/// their pair; not found() when the peer has fewer starts with this rank (or `index` has no place).
[[nodiscard]] inline message_end counterpart(const execution_plan& plan, const message_sequence& seq, std::size_t rank,
                                             std::size_t index) {
    const std::uint32_t k = seq.k[rank][index];
    if (k == no_instruction) return {};
    const auto peer = static_cast<std::size_t>(plan.programs[rank].instructions[index].peer);
    const auto theirs = seq.starts(peer, rank);
    if (k >= theirs.size()) return {};
    return {static_cast<std::uint32_t>(peer), theirs[k]};
}

}  // namespace pipeplan::plan
