// libFuzzer target: the binary plan reader (plan/serialize.hpp) and the plan-store record reader
// (runtime/plan_store.hpp). Each input is read three ways: as it is (the framing: magic,
// version, length, checksum); with its payload length and checksum fixed up, so that mutations
// reach the header and programs behind the checksum; and sealed as a store record and unsealed.
// A plan that reads must validate without crashing (plan/validate.hpp) and survive a round trip
// through both formats byte for byte. Malformed input must throw pipeplan::error (never crash,
// hang, leak or trip a sanitizer).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "memory_rule.hpp"
#include "pipeplan/runtime/plan_store.hpp"

namespace pl = pipeplan::plan;

namespace {

constexpr std::size_t length_at = 16, checksum_at = 24, payload_at = 32;  // the binary framing
const pipeplan::runtime::plan_key record_key{"fuzz", 0, 0};
const pipeplan::runtime::store_secret secret{"fuzzing-shared-secret"};

void put_u64(std::string& s, std::size_t at, std::uint64_t x) {
    for (int i = 0; i < 8; ++i) s[at + static_cast<std::size_t>(i)] = static_cast<char>((x >> (8 * i)) & 0xff);
}

/// Reads `bytes`; a plan that reads is validated and must round-trip through both formats.
void read(std::string_view bytes) {
    try {
        const pl::execution_plan p = pl::execution_plan_from_binary(bytes, "fuzz.plan");
        (void)pl::validate(p);
        for (const auto& prog : p.programs) (void)pl::validate_rank(pl::rank_plan{p.header, prog});
        pipeplan::fuzz::check_memory_rule(p);  // the memory rule agrees with the header figures
        const std::string again = pl::to_binary(p);
        if (pl::to_binary(pl::execution_plan_from_binary(again, "again.plan")) != again) __builtin_trap();
        // The JSON form holds what the binary form holds (or refuses it with a clear error).
        try {
            if (pl::to_binary(pl::execution_plan_from_json(pl::to_json_text(p), "again.json")) != again) __builtin_trap();
        } catch (const pipeplan::error&) {
        }
    } catch (const pipeplan::error&) {
        // A clear error is the expected answer to malformed input.
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    read(in);
    if (size >= payload_at) {
        std::string fixed(in);
        put_u64(fixed, length_at, size - payload_at);
        put_u64(fixed, checksum_at, pl::fnv1a64(std::string_view(fixed).substr(payload_at)));
        read(fixed);
        try {
            read(pipeplan::runtime::unseal(pipeplan::runtime::seal(fixed, record_key, secret), "fuzz.record", record_key, secret));
        } catch (const pipeplan::error&) {
            __builtin_trap();  // a sealed record always unseals
        }
    }
    try {
        read(pipeplan::runtime::unseal(in, "fuzz.record", record_key));
        read(pipeplan::runtime::unseal(in, "fuzz.record", record_key, secret));
    } catch (const pipeplan::error&) {
    }
    return 0;
}
