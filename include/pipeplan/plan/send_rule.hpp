// pipeplan/plan/send_rule.hpp — when a message start lets its rank go on: the semantics of the
// transport a plan is made for, which the deadlock check (deadlock.hpp) runs the plan under.
//
//   buffered  a start never blocks; a wait returns once the peer has posted the matching start
//             (the CPU thread transport, gloo's isend/irecv);
//   blocking  a start blocks its rank until the peer has reached the matching start (NCCL
//             point-to-point outside a group: a send waits for its receive, whatever its size);
//   grouped   a maximal run of consecutive starts is one group, launched together; the rank
//             goes on once every start of the group has its matching start in a group the peer
//             has reached (ncclGroupStart/End around each run, as runtime/stream_plan.hpp maps it).
// A plan that runs under `blocking` runs under `grouped`, and one that runs under either runs
// under `buffered`: covers() orders them.
#pragma once

#include <cstdint>

#include "pipeplan/core/names.hpp"

namespace pipeplan::plan {

enum class send_rule : std::uint8_t { buffered = 0, blocking = 1, grouped = 2 };

[[nodiscard]] constexpr auto enum_names(send_rule) noexcept {
    return name_table<send_rule, 3>{
        "send rule", {{{send_rule::buffered, "buffered"}, {send_rule::blocking, "blocking"}, {send_rule::grouped, "grouped"}}}};
}

/// How strict a rule is: a plan checked under a stricter rule also runs under a looser one.
[[nodiscard]] constexpr int strictness(send_rule r) noexcept {
    switch (r) {
        case send_rule::buffered: return 0;
        case send_rule::grouped: return 1;
        case send_rule::blocking: return 2;
    }
    return 3;
}

/// Whether a plan checked under `checked` may run on a transport that behaves as `transport`.
[[nodiscard]] constexpr bool covers(send_rule checked, send_rule transport) noexcept {
    return strictness(checked) >= strictness(transport);
}

}  // namespace pipeplan::plan
