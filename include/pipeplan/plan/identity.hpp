// pipeplan/plan/identity.hpp — the plan identity: a 64-bit name of one whole plan that every
// rank file of the plan carries in header.plan_id, so that rank files of different plans (two
// planners, two runs, a stale file) are told apart before anything runs.
//
// plan_identity(p) is the first 8 bytes (big-endian) of the SHA-256 of p's binary form
// (plan/serialize.hpp) with plan_id set to 0: the header, the micro-batch table and every
// rank's program. Equal plans get equal identities on every machine; 0 is never an identity
// (it means "not stamped"). Writers of plan files and stores stamp it (stamp_identity);
// validate() recomputes it for a whole plan and reports a mismatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/core/sha256.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/plan/serialize.hpp"

namespace pipeplan::plan {

/// The identity of the whole plan `p` (see the file comment); never 0.
[[nodiscard]] inline std::uint64_t plan_identity(const execution_plan& p) {
    plan_header h = p.header;
    h.plan_id = 0;
    h.version = plan_format_version;
    std::vector<const rank_program*> progs;
    for (const rank_program& prog : p.programs) progs.push_back(&prog);
    const sha256_digest d = sha256_of(detail::frame(h, progs.data(), progs.size()));
    std::uint64_t id = 0;
    for (std::size_t i = 0; i < 8; ++i) id = (id << 8) | d[i];
    return id == 0 ? 1 : id;
}

/// Sets p.header.plan_id (and the current plan version) so that every rank's share carries it.
inline void stamp_identity(execution_plan& p) {
    p.header.version = plan_format_version;
    p.header.plan_id = plan_identity(p);
}

/// The identity as 16 hexadecimal digits (how messages and manifests print it).
[[nodiscard]] inline std::string plan_id_hex(std::uint64_t id) { return hex16(id); }

}  // namespace pipeplan::plan
