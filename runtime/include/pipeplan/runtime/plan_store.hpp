// pipeplan/runtime/plan_store.hpp — the point of extension through which one planner feeds
// many ranks and nodes: put the bytes of a plan under (job, iteration, rank), get them back
// with a blocking fetch bounded by a timeout.
//
// Stores frame every record in an envelope (seal / unseal): magic "PPSTORE2", the payload size
// and its FNV-1a 64 checksum (little-endian u64), the key it was stored under ("job/iteration/
// rank", u32 length + bytes), a signature flag (u8) and an HMAC-SHA-256 (32 bytes, zero when
// unsigned), then the payload. A reader therefore never accepts a torn or corrupted record, nor
// one copied or planted under another key: unseal throws input_error naming where it came
// from and what does not match. With a store_secret (PIPEPLAN_STORE_KEY_FILE), writers sign
// every record (the HMAC covers the envelope and the payload) and readers refuse records
// without a valid signature, so whoever can write to the store but lacks the key cannot plant
// a plan a rank will run. fetch_rank_plan() also checks a fetched plan's header against the key
// (iteration, rank). Backends: directory_store (a shared filesystem, the embedded default) and
// redis_store (DynaPipe's choice; optional, needs hiredis).
#pragma once

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <utility>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/core/sha256.hpp"
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

/// The shared secret that signs store records: read from the file PIPEPLAN_STORE_KEY_FILE
/// names (store_secret_from_env). Empty = records are neither signed nor required to be.
struct store_secret {
    std::string key;
    [[nodiscard]] bool empty() const noexcept { return key.empty(); }
};

inline constexpr std::size_t min_store_key_bytes = 16;

/// The secret in the file `path`: its bytes less trailing whitespace, at least 16 of them.
/// Messages name the file, never the key.
[[nodiscard]] inline store_secret store_secret_from_file(const std::string& path) {
    std::string k = read_regular_file(path, regular_read_options{4096, true});
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r' || k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k.size() < min_store_key_bytes)
        throw invalid_argument("plan store key file '" + path + "' holds " + std::to_string(k.size()) +
                               " bytes; a key needs at least " + std::to_string(min_store_key_bytes) +
                               " (e.g. `head -c 32 /dev/urandom | base64 > FILE`)");
    return store_secret{std::move(k)};
}

/// The secret of PIPEPLAN_STORE_KEY_FILE, or none when the variable is unset or empty.
[[nodiscard]] inline store_secret store_secret_from_env() {
    const char* path = std::getenv("PIPEPLAN_STORE_KEY_FILE");
    if (path == nullptr || *path == '\0') return {};
    return store_secret_from_file(path);
}

inline constexpr std::string_view store_magic = "PPSTORE2";
/// Bytes of the envelope besides the key: magic, size, checksum, key length, flag, HMAC.
inline constexpr std::size_t store_header_bytes = 8 + 8 + 8 + 4 + 1 + 32;
inline constexpr std::size_t store_mac_bytes = 32;

namespace detail {

inline void put_le(std::string& out, std::uint64_t x, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
}
[[nodiscard]] inline std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
    std::uint64_t x = 0;
    for (int i = 0; i < bytes; ++i) x |= std::uint64_t(static_cast<unsigned char>(in[at + std::size_t(i)])) << (8 * i);
    return x;
}

}  // namespace detail

/// The payload framed for a store under `key` (see the file comment), signed with `secret`
/// unless it is empty.
[[nodiscard]] inline std::string seal(std::string_view payload, const plan_key& key, const store_secret& secret = {}) {
    const std::string k = key.str();
    std::string out(store_magic);
    detail::put_le(out, payload.size(), 8);
    detail::put_le(out, plan::fnv1a64(payload), 8);
    detail::put_le(out, k.size(), 4);
    out += k;
    out.push_back(secret.empty() ? '\0' : '\1');
    const std::size_t mac_at = out.size();
    out.append(store_mac_bytes, '\0');
    if (!secret.empty()) {
        const sha256_digest mac = hmac_sha256(secret.key, {std::string_view(out).substr(0, mac_at), payload});
        for (std::size_t i = 0; i < store_mac_bytes; ++i) out[mac_at + i] = static_cast<char>(mac[i]);
    }
    out.append(payload);
    return out;
}

/// The payload of a record stored under `key`; throws input_error(`where`) when it is
/// truncated, too long, not a store record, its checksum does not match, it was stored under
/// another key, or (with a non-empty `secret`) it is unsigned or its signature does not match.
[[nodiscard]] inline std::string unseal(std::string_view record, const std::string& where, const plan_key& key,
                                        const store_secret& secret = {}) {
    const auto bad = [&](const std::string& why) { return input_error(where, 0, "", why); };
    if (record.size() < store_header_bytes || record.substr(0, store_magic.size()) != store_magic)
        throw bad("not a pipeplan plan-store record (bad magic or truncated header)");
    const std::uint64_t size = detail::get_le(record, 8, 8), sum = detail::get_le(record, 16, 8);
    const std::uint64_t key_bytes = detail::get_le(record, 24, 4);
    if (key_bytes > record.size() - store_header_bytes) throw bad("torn record: the key runs past the end");
    const std::size_t flag_at = 28 + key_bytes, mac_at = flag_at + 1, payload_at = mac_at + store_mac_bytes;
    const std::string_view stored_key = record.substr(28, key_bytes), payload = record.substr(payload_at);
    if (payload.size() != size)
        throw bad("torn record: header announces " + std::to_string(size) + " bytes, " + std::to_string(payload.size()) + " present");
    if (plan::fnv1a64(payload) != sum) throw bad("corrupted record: checksum mismatch");
    if (stored_key != key.str())
        throw bad("the record was stored under key '" + printable(std::string(stored_key)) + "', not '" + key.str() +
                  "': copied or planted from another job, iteration or rank");
    const char flag = record[flag_at];
    if (flag != '\0' && flag != '\1') throw bad("corrupted record: bad signature flag");
    if (!secret.empty()) {
        if (flag != '\1') throw bad("the record is not signed, and this reader requires signed records (PIPEPLAN_STORE_KEY_FILE)");
        sha256_digest stored{};
        for (std::size_t i = 0; i < store_mac_bytes; ++i) stored[i] = static_cast<std::uint8_t>(record[mac_at + i]);
        if (!digests_equal(stored, hmac_sha256(secret.key, {record.substr(0, mac_at), payload})))
            throw bad("bad signature: the record was not written with this reader's key (PIPEPLAN_STORE_KEY_FILE), or was altered");
    }
    return std::string(payload);
}

/// The rank plan stored under `key` in `store` (waiting up to `timeout`), checked against the
/// key: the header's iteration and the program's rank must be the key's (input_error naming
/// the store and the key otherwise). The plan rules themselves are the executor's to check.
template <plan_store S>
[[nodiscard]] plan::rank_plan fetch_rank_plan(S& store, const plan_key& key, timeout_ms timeout) {
    const std::string where = store.describe() + " " + key.str();
    plan::rank_plan rp = plan::rank_plan_from_binary(store.get(key, timeout), where);
    if (rp.header.iteration != key.iteration)
        throw input_error(where, 0, "header.iteration", "the plan is for iteration " + std::to_string(rp.header.iteration) +
                                                            ", the key for " + std::to_string(key.iteration));
    if (rp.program.rank != key.rank)
        throw input_error(where, 0, "programs[0].rank", "the plan is rank " + std::to_string(rp.program.rank) + "'s, the key rank " +
                                                            std::to_string(key.rank) + "'s");
    return rp;
}

/// A job's writer lock (plan stores that offer lock_writer): released when destroyed.
class writer_lock {
public:
    writer_lock() = default;
    explicit writer_lock(std::function<void()> release) : release_(std::move(release)) {}
    writer_lock(writer_lock&& o) noexcept : release_(std::exchange(o.release_, nullptr)) {}
    writer_lock& operator=(writer_lock&& o) noexcept {
        if (this != &o) {
            reset();
            release_ = std::exchange(o.release_, nullptr);
        }
        return *this;
    }
    ~writer_lock() { reset(); }
    void reset() noexcept {
        if (release_) {
            try {
                release_();
            } catch (...) {  // a lease that cannot be released expires on its own
            }
            release_ = nullptr;
        }
    }

private:
    std::function<void()> release_;
};

}  // namespace pipeplan::runtime
