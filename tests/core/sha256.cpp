// core/sha256.hpp: SHA-256 against FIPS 180-4's examples (and its SHA-extension code against the
// portable code), HMAC-SHA-256 against RFC 4231.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/random.hpp"
#include "pipeplan/core/sha256.hpp"

using pipeplan::hmac_sha256;
using pipeplan::sha256_of;
using pipeplan::to_hex;

TEST_CASE("sha256: FIPS 180-4 examples, any split of the input") {
    CHECK(to_hex(sha256_of("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(to_hex(sha256_of("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 56 bytes: padding spills
    CHECK(to_hex(sha256_of(two_blocks)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const std::string million(1000000, 'a');
    CHECK(to_hex(sha256_of(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    for (std::size_t cut : {0u, 1u, 55u, 56u, 63u, 64u, 65u}) {
        pipeplan::sha256 h;
        h.update(std::string_view(million).substr(0, cut)).update(std::string_view(million).substr(cut));
        CHECK(h.finish() == sha256_of(million));
    }
}

TEST_CASE("hmac_sha256: RFC 4231 test cases 1, 2, 3, 6 and 7") {
    CHECK(to_hex(hmac_sha256(std::string(20, '\x0b'), {"Hi There"})) ==
          "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    CHECK(to_hex(hmac_sha256("Jefe", {"what do ya ", "want for nothing?"})) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    CHECK(to_hex(hmac_sha256(std::string(20, '\xaa'), {std::string(50, '\xdd')})) ==
          "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    const std::string long_key(131, '\xaa');  // longer than a block: hashed first
    CHECK(to_hex(hmac_sha256(long_key, {"Test Using Larger Than Block-Size Key - Hash Key First"})) ==
          "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    CHECK(to_hex(hmac_sha256(long_key, {"This is a test using a larger than block-size key and a larger than block-size data. "
                                        "The key needs to be hashed before being used by the HMAC algorithm."})) ==
          "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
    CHECK(pipeplan::digests_equal(hmac_sha256("k", {"a"}), hmac_sha256("k", {"a"})));
    CHECK_FALSE(pipeplan::digests_equal(hmac_sha256("k", {"a"}), hmac_sha256("k", {"b"})));
}

TEST_CASE("sha256: the SHA-extension code (where the processor has it) and the portable code give the same digests") {
    pipeplan::splitmix64 rng(7);
    std::string bytes(64 * 300 + 37, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
    for (const std::size_t blocks : {1u, 2u, 3u, 300u}) {
        std::array<std::uint32_t, 8> portable{1, 2, 3, 4, 5, 6, 7, 8}, dispatched = portable;
        pipeplan::detail::sha256_blocks_portable(portable, data, blocks);
        pipeplan::detail::sha256_blocks(dispatched, data, blocks);
        CHECK(dispatched == portable);
#if defined(PIPEPLAN_SHA256_X86)
        if (pipeplan::detail::sha256_has_sha_ni()) {
            std::array<std::uint32_t, 8> extension{1, 2, 3, 4, 5, 6, 7, 8};
            pipeplan::detail::sha256_blocks_sha_ni(extension, data, blocks);
            CHECK(extension == portable);
        }
#endif
    }
    // any split of the input: whole blocks straight from it, the rest buffered
    const pipeplan::sha256_digest whole = sha256_of(bytes);
    for (const std::size_t cut : {0u, 5u, 64u, 100u, 128u, 64u * 300u}) {
        pipeplan::sha256 h;
        h.update(std::string_view(bytes).substr(0, cut)).update(std::string_view(bytes).substr(cut));
        CHECK(h.finish() == whole);
    }
    pipeplan::sha256 bytewise;
    for (const char c : bytes) bytewise.update(std::string_view(&c, 1));
    CHECK(bytewise.finish() == whole);
}
