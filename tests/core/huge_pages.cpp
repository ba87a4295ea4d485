#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <new>

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

TEST_CASE("huge pages: a freed block is kept for the next block of its rounded size") {
    constexpr std::size_t MiB = std::size_t{1} << 20;
    pipeplan::huge_page_allocator<unsigned char> a;
    unsigned char* p = a.allocate(3 * MiB + 5);
    p[3 * MiB + 4] = 7;
    a.deallocate(p, 3 * MiB + 5);
    unsigned char* q = a.allocate(4 * MiB);  // the same 4 MiB block, faulted in already
    CHECK(q == p);
    CHECK(q[3 * MiB + 4] == 7);  // (not cleared: the allocator never zeroes)
    unsigned char* r = a.allocate(4 * MiB);
    CHECK(r != q);
    CHECK(reinterpret_cast<std::uintptr_t>(r) % huge_page_bytes == 0);
    a.deallocate(q, 4 * MiB);
    a.deallocate(r, 4 * MiB);
}

TEST_CASE("huge pages: the block cache keeps the newest blocks within its limits") {
    using pipeplan::huge_block_cache;
    auto block = [](std::size_t bytes) { return ::operator new(bytes, std::align_val_t{huge_page_bytes}); };
    auto release = [](void* p) { ::operator delete(p, std::align_val_t{huge_page_bytes}); };
    huge_block_cache cache;
    // kept_bytes: six blocks of a quarter of it, the two oldest released
    const std::size_t quarter = huge_block_cache::kept_bytes / 4;
    void* big[6];
    for (auto& b : big) cache.keep(b = block(quarter), quarter);
    for (std::size_t i = 6; i-- > 2;) {
        void* t = cache.take(quarter);  // the newest first
        CHECK(t == big[i]);
        release(t);
    }
    CHECK(cache.take(quarter) == nullptr);
    // kept_blocks: one block more, the oldest released; other sizes are not handed out
    void* small[huge_block_cache::kept_blocks + 1];
    for (auto& b : small) cache.keep(b = block(huge_page_bytes), huge_page_bytes);
    CHECK(cache.take(2 * huge_page_bytes) == nullptr);
    for (std::size_t i = huge_block_cache::kept_blocks + 1; i-- > 1;) {
        void* t = cache.take(huge_page_bytes);
        CHECK(t == small[i]);
        release(t);
    }
    CHECK(cache.take(huge_page_bytes) == nullptr);
    // A block larger than kept_bytes is released at once; what is kept is released with the cache.
    const std::size_t over = huge_block_cache::kept_bytes + huge_page_bytes;
    cache.keep(block(over), over);
    CHECK(cache.take(over) == nullptr);
    CHECK(cache.held_bytes() == 0);
    cache.keep(block(huge_page_bytes), huge_page_bytes);
    CHECK(cache.held_bytes() == huge_page_bytes);
}

TEST_CASE("huge pages: release() gives every kept block back") {
    using pipeplan::huge_block_cache;
    huge_block_cache cache;
    CHECK(cache.release() == 0);
    for (int i = 0; i < 3; ++i) cache.keep(::operator new(2 * huge_page_bytes, std::align_val_t{huge_page_bytes}), 2 * huge_page_bytes);
    CHECK(cache.held_bytes() == 6 * huge_page_bytes);
    CHECK(cache.release() == 6 * huge_page_bytes);
    CHECK(cache.held_bytes() == 0);
    CHECK(cache.take(2 * huge_page_bytes) == nullptr);
}
