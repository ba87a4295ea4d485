#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>

#include "pipeplan/core/huge_pages.hpp"
#include "pipeplan/core/row_array.hpp"

using pipeplan::huge_advised_bytes;
using pipeplan::huge_page_bytes;

TEST_CASE("huge pages: a block's whole huge pages are advised, its tail only when it is long") {
    constexpr std::size_t MiB = std::size_t{1} << 20;
    CHECK(huge_advised_bytes(0) == 0);
    CHECK(huge_advised_bytes(huge_page_bytes) == huge_page_bytes);
    // 1F1B's timeline at S 64, M 4096: 524,609 entries of 32 bytes = 16 MiB + 10,272 bytes.
    CHECK(huge_advised_bytes(524'609 * 32) == 16 * MiB);
    CHECK(huge_advised_bytes(16 * MiB + huge_page_bytes / 8 - 1) == 16 * MiB);
    CHECK(huge_advised_bytes(16 * MiB + huge_page_bytes / 8) == 18 * MiB);
    CHECK(huge_advised_bytes(3 * MiB) == 4 * MiB);
    CHECK(huge_advised_bytes(huge_page_bytes / 8) == huge_page_bytes);
    CHECK(huge_advised_bytes(huge_page_bytes / 8 - 1) == 0);
}

TEST_CASE("huge pages: a buffer with a short tail is whole and writable to its last entry") {
    pipeplan::row_array<std::uint64_t> a;
    const std::size_t n = huge_page_bytes / sizeof(std::uint64_t) + 1000;  // one huge page + 8,000 bytes
    std::uint64_t* p = a.start(1, n);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % huge_page_bytes == 0);
    for (std::size_t i = 0; i < n; ++i) p[i] = i;
    a.end_row(p + n);
    REQUIRE(a[0].size() == n);
    CHECK(a[0][n - 1] == n - 1);
    CHECK(a[0][huge_page_bytes / sizeof(std::uint64_t)] == huge_page_bytes / sizeof(std::uint64_t));
}
