// pipeplan/runtime/bootstrap.hpp — exchanging a communicator's bootstrap id (NCCL's
// ncclUniqueId: 128 opaque bytes) through a plan store, so that a job needs no launcher of its
// own: rank 0 creates the id and publishes it, every rank fetches it with a timeout. Host-only
// (the id is plain bytes; runtime/cuda passes NCCL's), unit-tested on CPU.
//
// Key: job "<job>.bootstrap", iteration = the communicator's epoch (a job that rebuilds its
// communicator, e.g. after a failure, bumps the epoch so nobody reads a stale id), rank 0.
// The record is sealed like a plan (size and checksum), so a torn or corrupted id is refused.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/runtime/plan_store.hpp"

namespace pipeplan::runtime {

inline constexpr std::string_view bootstrap_suffix = ".bootstrap";

/// Where the bootstrap id of `job`'s communicator `epoch` lives. Throws invalid_argument when
/// the job name is invalid or too long to carry the suffix.
[[nodiscard]] inline plan_key bootstrap_key(const std::string& job, std::uint64_t epoch) {
    plan_key{job, 0, 0}.check();
    plan_key k{job + std::string(bootstrap_suffix), epoch, 0};
    if (k.job.size() > 128)
        throw invalid_argument("bootstrap: job name '" + job + "' is too long for its bootstrap key (at most " +
                               std::to_string(128 - bootstrap_suffix.size()) + " characters)");
    return k;
}

/// Rank 0's side: stores `id` under bootstrap_key(job, epoch).
template <plan_store S>
void publish_bootstrap_id(S& store, const std::string& job, std::uint64_t epoch, std::span<const std::byte> id) {
    if (id.empty()) throw invalid_argument("bootstrap: empty id");
    store.put(bootstrap_key(job, epoch), std::string_view(reinterpret_cast<const char*>(id.data()), id.size()));
}

/// Every other rank's side: waits up to `timeout` for the id (timeout_error naming the store and
/// key when it does not come) and copies it into `id`, whose size it must have (input_error
/// otherwise: a peer built with another id size).
template <plan_store S>
void fetch_bootstrap_id(S& store, const std::string& job, std::uint64_t epoch, std::span<std::byte> id,
                        timeout_ms timeout) {
    const plan_key key = bootstrap_key(job, epoch);
    const std::string bytes = store.get(key, timeout);
    if (bytes.size() != id.size())
        throw input_error(store.describe() + " " + key.str(), 0, "bootstrap id",
                          "holds " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(id.size()));
    std::memcpy(id.data(), bytes.data(), id.size());
}

}  // namespace pipeplan::runtime
