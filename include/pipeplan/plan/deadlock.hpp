// pipeplan/plan/deadlock.hpp — whether every rank of a plan finishes under a send rule.
//
// One cursor per rank walks its program; a rank stops at an instruction that cannot run yet:
//   start             buffered: never stops; blocking: until the peer's cursor has reached the
//                     matching start (counterpart(), messages.hpp); grouped: at the first start
//                     of its group (a maximal run of consecutive starts) until, for every start
//                     of the group, the peer's cursor has reached the group holding the
//                     matching start; then the rank passes the whole group;
//   wait              buffered: until the peer's cursor has passed the matching start;
//                     blocking, grouped: never (its start already met the peer);
//   reduce_gradients  until every rank of its data-parallel group is there;
//   anything else     never stops.
// The cursors advance round-robin, each as far as it goes, until all are done or none moves;
// ranks left are deadlocked (the report names where each stands). The validator runs it under
// the rule of the plan's header (validate.hpp, rule "deadlock"); send_rule.hpp says which
// transports behave as which rule. The plan's message structure must be sound (every wait
// after its start, the k-th starts of each rank pair matching: the validator's pairing and
// match rules) for the answer to mean anything; a start without a counterpart never passes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipeplan/plan/messages.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/plan/send_rule.hpp"

namespace pipeplan::plan {

/// Where a rank that cannot finish stands.
struct blocked_rank {
    std::uint32_t rank = 0;
    std::uint32_t index = 0;  ///< the instruction it cannot run
    friend bool operator==(const blocked_rank&, const blocked_rank&) = default;
};

namespace detail {

/// [buffered ? 0 : 1][kind code] whether an instruction of that kind may stop a cursor (the
/// file comment): a wait (buffered) or a start (any other rule), and reduce_gradients.
inline constexpr auto cursor_stops_by_code = [] {
    std::array<std::array<bool, 256>, 2> t{};
    for (std::size_t code = 0; code < 256; ++code) {
        const auto k = static_cast<instr_kind>(code);
        const bool reduce = k == instr_kind::reduce_gradients;
        t[0][code] = reduce || is_message_wait(k);
        t[1][code] = reduce || is_message_start(k);
    }
    return t;
}();

/// The cursors of find_deadlock() and what they need to know of the plan.
class rank_cursors {
public:
    rank_cursors(const execution_plan& plan, const std::vector<wait_pairing>& pairs, const message_sequence& seq,
                 send_rule rule)
        : plan_(plan), pairs_(pairs), rule_(rule), R_(plan.programs.size()), pos_(R_, 0), at_reduce_(R_, 0),
          partner_(R_), group_first_(R_) {
        for (std::size_t r = 0; r < R_; ++r) {
            const auto& prog = plan.programs[r].instructions;
            if (rule == send_rule::grouped) group_first_[r] = start_groups(prog);
            partner_[r].assign(prog.size(), no_instruction);
        }
        // counterpart() of every start, pair by pair: the k-th starts of the two sides
        for (std::size_t r = 0; r < R_; ++r)
            for (std::size_t q = 0; q < R_; ++q) {
                const auto mine = seq.starts(r, q), theirs = seq.starts(q, r);
                for (std::size_t k = 0; k < mine.size() && k < theirs.size(); ++k) partner_[r][mine[k]] = theirs[k];
            }
    }

    /// Runs the cursors as far as they go; the ranks left, in rank order.
    std::vector<blocked_rank> run() {
        std::size_t finished = 0;
        for (std::size_t r = 0; r < R_; ++r) finished += plan_.programs[r].instructions.empty();
        for (bool progress = true; finished < R_ && progress;) {
            progress = false;
            for (std::size_t r = 0; r < R_; ++r) {
                const std::size_t n = plan_.programs[r].instructions.size();
                if (pos_[r] >= n) continue;
                const std::size_t before = pos_[r];
                advance(r);
                progress = progress || pos_[r] != before;
                finished += pos_[r] == n;
            }
        }
        std::vector<blocked_rank> out;
        for (std::size_t r = 0; r < R_; ++r)
            if (pos_[r] < plan_.programs[r].instructions.size())
                out.push_back({static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(pos_[r])});
        return out;
    }

private:
    /// Moves rank r's cursor as far as it goes: over the instructions that never stop it, and
    /// through step() at the others.
    void advance(std::size_t r) {
        const auto& prog = plan_.programs[r].instructions;
        const std::array<bool, 256>& stops = cursor_stops_by_code[rule_ == send_rule::buffered ? 0 : 1];
        const std::size_t n = prog.size();
        std::size_t i = pos_[r];
        while (i < n) {
            if (!stops[static_cast<std::uint8_t>(prog[i].kind)]) {
                ++i;
                continue;
            }
            pos_[r] = i;
            if (!step(r)) return;
            i = pos_[r];
        }
        pos_[r] = i;
    }

    /// Runs rank r's current instruction (or group) when it can; false when it must wait.
    bool step(std::size_t r) {
        const auto& prog = plan_.programs[r].instructions;
        const std::size_t i = pos_[r];
        const instruction& x = prog[i];
        if (is_message_start(x.kind) && rule_ != send_rule::buffered) return pass_starts(r);
        if (is_message_wait(x.kind) && rule_ == send_rule::buffered) {
            const std::uint32_t s = pairs_[r].start_of[i];
            const std::uint32_t j = s == no_instruction ? no_instruction : partner_[r][s];
            if (j == no_instruction || pos_[static_cast<std::size_t>(x.peer)] <= j) return false;
        } else if (x.kind == instr_kind::reduce_gradients) {
            at_reduce_[r] = 1;
            const plan_header& h = plan_.header;
            if (h.devices == 0) return false;
            for (std::size_t q = h.device_of_rank(static_cast<std::uint32_t>(r)); q < R_; q += h.devices)
                if (!at_reduce_[q]) return false;
        }
        ++pos_[r];
        return true;
    }

    /// The first start of the group holding start i of rank r (blocking: i itself).
    [[nodiscard]] std::size_t group_first(std::size_t r, std::size_t i) const {
        return rule_ == send_rule::grouped ? group_first_[r][i] : i;
    }

    /// blocking / grouped: passes rank r's start (or group of starts) once every peer is there.
    bool pass_starts(std::size_t r) {
        const auto& prog = plan_.programs[r].instructions;
        std::size_t end = pos_[r] + 1;
        if (rule_ == send_rule::grouped)
            while (end < prog.size() && group_first_[r][end] == pos_[r]) ++end;
        for (std::size_t i = pos_[r]; i < end; ++i) {
            const std::uint32_t j = partner_[r][i];
            const auto q = static_cast<std::size_t>(prog[i].peer);
            if (j == no_instruction || pos_[q] < group_first(q, j)) return false;
        }
        pos_[r] = end;
        return true;
    }

    const execution_plan& plan_;
    const std::vector<wait_pairing>& pairs_;
    send_rule rule_;
    std::size_t R_;
    std::vector<std::size_t> pos_;
    std::vector<char> at_reduce_;
    std::vector<std::vector<std::uint32_t>> partner_;      ///< [rank][start] the matching start's index on the peer
    std::vector<std::vector<std::uint32_t>> group_first_;  ///< [rank] start_groups() (grouped only)
};

}  // namespace detail

/// The ranks that cannot finish when `plan` runs under `rule` (see the file comment), with the
/// pairing and sequence of its messages already computed; empty when every rank finishes.
[[nodiscard]] inline std::vector<blocked_rank> find_deadlock(const execution_plan& plan,
                                                             const std::vector<wait_pairing>& pairs,
                                                             const message_sequence& seq, send_rule rule) {
    return detail::rank_cursors(plan, pairs, seq, rule).run();
}

/// The same, pairing the plan's messages first.
[[nodiscard]] inline std::vector<blocked_rank> find_deadlock(const execution_plan& plan, send_rule rule) {
    std::vector<wait_pairing> pairs;
    pairs.reserve(plan.programs.size());
    for (const rank_program& p : plan.programs) pairs.push_back(start_of_wait(plan.header, p));
    return find_deadlock(plan, pairs, pair_sequence(plan), rule);
}

/// find_deadlock() under the rule the plan's header records.
[[nodiscard]] inline std::vector<blocked_rank> find_deadlock(const execution_plan& plan) {
    return find_deadlock(plan, plan.header.sends);
}

}  // namespace pipeplan::plan
