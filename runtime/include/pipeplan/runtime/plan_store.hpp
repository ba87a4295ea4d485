// pipeplan/runtime/plan_store.hpp — the point of extension through which one planner feeds
// many ranks and nodes: put the bytes of a plan under (job, iteration, rank), get them back
// with a blocking fetch bounded by a timeout.
//
// Stores frame every plan in a checksummed envelope (seal / unseal): magic "PPSTORE1", the
// payload size and its FNV-1a 64 checksum (both little-endian u64), then the payload. A reader
// therefore never accepts a torn or corrupted plan: unseal throws input_error naming where it
// came from. Backends: directory_store (a shared filesystem, the embedded default) and
// redis_store (DynaPipe's choice; optional, needs hiredis).
#pragma once

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/runtime/transport.hpp"

namespace pipeplan::runtime {

/// Where a plan lives: one job's iteration's rank.
struct plan_key {
    std::string job;
    std::uint64_t iteration = 0;
    std::uint32_t rank = 0;

    /// "job/iteration/rank" — also how errors name the key.
    [[nodiscard]] std::string str() const {
        return job + "/" + std::to_string(iteration) + "/" + std::to_string(rank);
    }
    /// Throws pipeplan::invalid_argument unless the job name is 1–128 characters of
    /// [A-Za-z0-9_.-] not starting with '.' (it becomes a folder name and a Redis key part).
    void check() const {
        bool ok = !job.empty() && job.size() <= 128 && job[0] != '.';
        for (char ch : job)
            ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                        ch == '_' || ch == '.' || ch == '-');
        if (!ok)
            throw invalid_argument("plan store: job name '" + job +
                                   "' must be 1-128 characters of [A-Za-z0-9_.-], not starting with '.'");
    }
};

template <class S>
concept plan_store = requires(S& s, const plan_key& key, std::string_view bytes, timeout_ms timeout) {
    { s.put(key, bytes) } -> std::same_as<void>;
    { s.get(key, timeout) } -> std::same_as<std::string>;
    { s.describe() } -> std::convertible_to<std::string>;
};

inline constexpr std::string_view store_magic = "PPSTORE1";
inline constexpr std::size_t store_header_bytes = 24;

/// The payload framed for a store (see the file comment).
[[nodiscard]] inline std::string seal(std::string_view payload) {
    std::string out(store_magic);
    const auto put_u64 = [&](std::uint64_t x) {
        for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
    };
    put_u64(payload.size());
    put_u64(plan::fnv1a64(payload));
    out.append(payload);
    return out;
}

/// The payload of a sealed record; throws input_error(`where`) when it is truncated, too long,
/// not a store record, or its checksum does not match.
[[nodiscard]] inline std::string unseal(std::string_view record, const std::string& where) {
    if (record.size() < store_header_bytes || record.substr(0, store_magic.size()) != store_magic)
        throw input_error(where, 0, "", "not a pipeplan plan-store record (bad magic or truncated header)");
    const auto get_u64 = [&](std::size_t at) {
        std::uint64_t x = 0;
        for (int i = 0; i < 8; ++i) x |= std::uint64_t(static_cast<unsigned char>(record[at + i])) << (8 * i);
        return x;
    };
    const std::uint64_t size = get_u64(8), sum = get_u64(16);
    const std::string_view payload = record.substr(store_header_bytes);
    if (payload.size() != size)
        throw input_error(where, 0, "", "torn record: header announces " + std::to_string(size) + " bytes, " +
                                            std::to_string(payload.size()) + " present");
    if (plan::fnv1a64(payload) != sum) throw input_error(where, 0, "", "corrupted record: checksum mismatch");
    return std::string(payload);
}

}  // namespace pipeplan::runtime
