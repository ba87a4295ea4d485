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

/// The identity of the plan whose binary parts (plan/serialize.hpp) are `parts`, serialized
/// with plan_id 0, and whose payload's FNV-1a is `checksum` (see the file comment); never 0.
/// The frame is hashed piece by piece, never copied into one string.
[[nodiscard]] inline std::uint64_t plan_identity(const binary_parts& parts, std::uint64_t checksum) {
    std::size_t size = parts.header.size();
    for (const std::string& prog : parts.programs) size += prog.size();
    sha256 hash;
    hash.update(detail::frame_head(parts.programs.size(), size, checksum));
    hash.update(parts.header);
    for (const std::string& prog : parts.programs) hash.update(prog);
    const sha256_digest d = hash.finish();
    std::uint64_t id = 0;
    for (std::size_t i = 0; i < 8; ++i) id = (id << 8) | d[i];
    return id == 0 ? 1 : id;
}

/// The identity of the whole plan `p` (see the file comment); never 0.
[[nodiscard]] inline std::uint64_t plan_identity(const execution_plan& p) {
    plan_header h = p.header;
    h.plan_id = 0;
    std::uint64_t checksum = 0;
    const binary_parts parts = binary_parts_of(h, p.programs, 1, &checksum);
    return plan_identity(parts, checksum);
}

/// Sets p.header.plan_id (and the current plan version) so that every rank's share carries
/// it; returns p's binary parts with that header (the programs serialized once, on up to
/// `threads` threads, and their checksum summed meanwhile), from which its files are written.
inline binary_parts stamp_identity(execution_plan& p, std::size_t threads = 1) {
    p.header.version = plan_format_version;
    p.header.plan_id = 0;
    std::uint64_t checksum = 0;
    binary_parts parts = binary_parts_of(p.header, p.programs, threads, &checksum);
    p.header.plan_id = plan_identity(parts, checksum);
    parts.header = detail::payload_of(p.header);
    return parts;
}

/// The identity as 16 hexadecimal digits (how messages and manifests print it).
[[nodiscard]] inline std::string plan_id_hex(std::uint64_t id) { return hex16(id); }

}  // namespace pipeplan::plan
