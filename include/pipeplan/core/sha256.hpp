// pipeplan/core/sha256.hpp — SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), small and
// dependency-free: plan identities (plan/identity.hpp) and signed plan-store records
// (runtime/plan_store.hpp). Checked against the FIPS 180-4 examples and RFC 4231's test cases
// (tests/core/sha256.cpp).
//
// Whole 64-byte blocks are compressed straight from the input; on x86-64 processors with the
// SHA extensions (checked once with cpuid) by the sha256rnds2/sha256msg1/sha256msg2
// instructions (~8x faster: a 1M-sample plan's identity hashes 175 MB), elsewhere by the
// portable code. Both give the same digest (tests/core/sha256.cpp compares them).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define PIPEPLAN_SHA256_X86 1
#endif

namespace pipeplan {

using sha256_digest = std::array<std::uint8_t, 32>;

namespace detail {

inline constexpr std::array<std::uint32_t, 64> sha256_k{
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t sha256_rotr(std::uint32_t x, int n) noexcept { return (x >> n) | (x << (32 - n)); }

/// Compresses `blocks` 64-byte blocks at `data` into `h` (FIPS 180-4, section 6.2.2).
inline void sha256_blocks_portable(std::array<std::uint32_t, 8>& h, const std::uint8_t* data, std::size_t blocks) noexcept {
    for (; blocks > 0; --blocks, data += 64) {
        std::array<std::uint32_t, 64> w{};
        for (std::size_t i = 0; i < 16; ++i)
            w[i] = std::uint32_t(data[4 * i]) << 24 | std::uint32_t(data[4 * i + 1]) << 16 |
                   std::uint32_t(data[4 * i + 2]) << 8 | std::uint32_t(data[4 * i + 3]);
        for (std::size_t i = 16; i < 64; ++i) {
            const std::uint32_t s0 = sha256_rotr(w[i - 15], 7) ^ sha256_rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const std::uint32_t s1 = sha256_rotr(w[i - 2], 17) ^ sha256_rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        std::array<std::uint32_t, 8> v = h;
        for (std::size_t i = 0; i < 64; ++i) {
            const std::uint32_t s1 = sha256_rotr(v[4], 6) ^ sha256_rotr(v[4], 11) ^ sha256_rotr(v[4], 25);
            const std::uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
            const std::uint32_t t1 = v[7] + s1 + ch + sha256_k[i] + w[i];
            const std::uint32_t s0 = sha256_rotr(v[0], 2) ^ sha256_rotr(v[0], 13) ^ sha256_rotr(v[0], 22);
            const std::uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            for (std::size_t j = 7; j > 0; --j) v[j] = v[j - 1];
            v[4] += t1;
            v[0] = t1 + s0 + maj;
        }
        for (std::size_t i = 0; i < 8; ++i) h[i] += v[i];
    }
}

#if defined(PIPEPLAN_SHA256_X86)
/// Whether this processor has the SHA extensions (and SSSE3 / SSE4.1, which the code below also uses).
[[nodiscard]] inline bool sha256_has_sha_ni() noexcept {
    static const bool has = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19))) return false;  // SSSE3, SSE4.1
        return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)) != 0;                     // SHA
    }();
    return has;
}

/// sha256_blocks_portable with the SHA extensions: four rounds per step, the message schedule
/// of the step after next (sha256msg1) and of the next (sha256msg2) interleaved.
[[gnu::target("sha,sse4.1,ssse3")]] inline void sha256_blocks_sha_ni(std::array<std::uint32_t, 8>& h, const std::uint8_t* data,
                                                                    std::size_t blocks) noexcept {
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);  // big-endian words
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[0])), 0xB1);  // CDAB
    __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[4])), 0x1B);  // EFGH
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);     // ABEF
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);          // CDGH
    for (; blocks > 0; --blocks, data += 64) {
        const __m128i abef = state0, cdgh = state1;
        __m128i w[4];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
            if (i < 4) w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * i)), swap);
            __m128i msg = _mm_add_epi32(w[i % 4], _mm_loadu_si128(reinterpret_cast<const __m128i*>(&sha256_k[4 * i])));
            state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
            if (i >= 3 && i < 15) {  // words 4(i+1) .. 4(i+1)+3
                const __m128i next = _mm_add_epi32(w[(i + 1) % 4], _mm_alignr_epi8(w[i % 4], w[(i + 3) % 4], 4));
                w[(i + 1) % 4] = _mm_sha256msg2_epu32(next, w[i % 4]);
            }
            msg = _mm_shuffle_epi32(msg, 0x0E);
            state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
            if (i >= 1 && i < 13) w[(i + 3) % 4] = _mm_sha256msg1_epu32(w[(i + 3) % 4], w[i % 4]);
        }
        state0 = _mm_add_epi32(state0, abef);
        state1 = _mm_add_epi32(state1, cdgh);
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
    state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
    state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
    state1 = _mm_alignr_epi8(state1, tmp, 8);     // HGFE
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[0]), state0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[4]), state1);
}
#endif

/// Compresses whole blocks with the fastest code this processor runs.
inline void sha256_blocks(std::array<std::uint32_t, 8>& h, const std::uint8_t* data, std::size_t blocks) noexcept {
#if defined(PIPEPLAN_SHA256_X86)
    if (sha256_has_sha_ni()) return sha256_blocks_sha_ni(h, data, blocks);
#endif
    sha256_blocks_portable(h, data, blocks);
}

}  // namespace detail

/// Incremental SHA-256: update() any number of times, then finish() once.
class sha256 {
public:
    sha256& update(std::string_view bytes) noexcept {
        length_bytes_ += bytes.size();
        const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
        std::size_t n = bytes.size();
        if (fill_ > 0) {  // complete the buffered block first
            const std::size_t take = std::min(n, 64 - fill_);
            for (std::size_t i = 0; i < take; ++i) block_[fill_ + i] = p[i];
            fill_ += take, p += take, n -= take;
            if (fill_ < 64) return *this;
            compress();
        }
        detail::sha256_blocks(h_, p, n / 64);
        p += n / 64 * 64, n %= 64;
        for (std::size_t i = 0; i < n; ++i) block_[i] = p[i];
        fill_ = n;
        return *this;
    }

    [[nodiscard]] sha256_digest finish() noexcept {
        const std::uint64_t bits = length_bytes_ * 8;
        block_[fill_++] = 0x80;
        if (fill_ > 56) {
            while (fill_ < 64) block_[fill_++] = 0;
            compress();
            fill_ = 0;
        }
        while (fill_ < 56) block_[fill_++] = 0;
        for (int i = 7; i >= 0; --i) block_[fill_++] = static_cast<std::uint8_t>(bits >> (8 * i));
        compress();
        sha256_digest out{};
        for (std::size_t i = 0; i < 8; ++i)
            for (std::size_t b = 0; b < 4; ++b) out[4 * i + b] = static_cast<std::uint8_t>(h_[i] >> (24 - 8 * b));
        return out;
    }

private:
    void compress() noexcept {
        detail::sha256_blocks(h_, block_.data(), 1);
        fill_ = 0;
    }

    std::array<std::uint32_t, 8> h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::array<std::uint8_t, 64> block_{};
    std::size_t fill_ = 0;
    std::uint64_t length_bytes_ = 0;
};

/// SHA-256 of `bytes`.
[[nodiscard]] inline sha256_digest sha256_of(std::string_view bytes) noexcept { return sha256().update(bytes).finish(); }

/// HMAC-SHA-256 of the concatenation of `parts` under `key` (RFC 2104; keys longer than the
/// 64-byte block are hashed first).
[[nodiscard]] inline sha256_digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) noexcept {
    std::array<std::uint8_t, 64> k{};
    if (key.size() > 64) {
        const sha256_digest d = sha256_of(key);
        for (std::size_t i = 0; i < d.size(); ++i) k[i] = d[i];
    } else {
        for (std::size_t i = 0; i < key.size(); ++i) k[i] = static_cast<std::uint8_t>(key[i]);
    }
    std::string ipad(64, '\0'), opad(64, '\0');
    for (std::size_t i = 0; i < 64; ++i) {
        ipad[i] = static_cast<char>(k[i] ^ 0x36);
        opad[i] = static_cast<char>(k[i] ^ 0x5c);
    }
    sha256 inner;
    inner.update(ipad);
    for (const std::string_view p : parts) inner.update(p);
    const sha256_digest in = inner.finish();
    return sha256().update(opad).update(std::string_view(reinterpret_cast<const char*>(in.data()), in.size())).finish();
}

/// Lower-case hexadecimal of `d`'s first `bytes` bytes.
[[nodiscard]] inline std::string to_hex(const sha256_digest& d, std::size_t bytes = 32) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < bytes && i < d.size(); ++i) {
        s.push_back(digits[d[i] >> 4]);
        s.push_back(digits[d[i] & 15]);
    }
    return s;
}

/// Compares two digests in time independent of where they differ (signature checks).
[[nodiscard]] inline bool digests_equal(const sha256_digest& a, const sha256_digest& b) noexcept {
    std::uint8_t diff = 0;
    for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<std::uint8_t>(a[i] ^ b[i]);
    return diff == 0;
}

}  // namespace pipeplan
