// pipeplan/core/huge_pages.hpp — transparent huge pages for large scratch buffers.
//
// The first touch of fresh memory costs a page fault per 4 KiB page; on virtual machines a
// fault can cost microseconds (13 µs on the 2-core development VM: writing 34 MB of fresh
// memory takes 111 ms in 4 KiB pages, 2.8 ms advised as huge pages; docs/schedules.md,
// "Simulator speed"). The simulator's large scratch buffers and results are therefore advised
// as huge pages: a hint that changes how the kernel backs them, never what they hold. Linux only
// (a no-op elsewhere), and only for the whole 2 MiB pages inside a buffer (huge_page_allocator
// aligns large buffers to huge pages, so all of such a buffer is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pipeplan {

inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

/// Advises the 2 MiB-aligned part of [p, p + bytes) as huge pages (MADV_HUGEPAGE); best effort.
inline void advise_huge_pages(const void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const auto begin = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t lo = (begin + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
    const std::uintptr_t hi = (begin + bytes) & ~(huge_page_bytes - 1);
    if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/// The bytes of a block of `bytes` aligned to huge pages to advise as huge pages: its whole huge
/// pages, and the partial one at its end only when it holds at least huge_page_bytes / 8 of the
/// block. On the development VM a huge page costs ~240 µs to fault in (the kernel clears 2 MiB)
/// and a 4 KiB page ~2.5 µs, so a short tail faults in faster in 4 KiB pages (1F1B's timeline
/// at S 64, M 4096: 16 MiB + 10 KB, three 4 KiB faults instead of a ninth huge page).
[[nodiscard]] constexpr std::size_t huge_advised_bytes(std::size_t bytes) noexcept {
    const std::size_t whole = bytes & ~(huge_page_bytes - 1);
    return bytes - whole >= huge_page_bytes / 8 ? whole + huge_page_bytes : whole;
}

/// An allocator whose blocks of at least one huge page are aligned to huge pages, rounded up to
/// whole ones and advised as huge pages (huge_advised_bytes(): all but a short tail): such a block
/// is backed by huge pages from its first byte (a block of plain operator new has up to 2 MiB at
/// its ends in 4 KiB pages, a fault each: 8–10 ms of a fresh 8 MB buffer on the development VM,
/// against 0.6 ms aligned). Smaller blocks come from std::allocator. For large scratch buffers
/// and results.
template <class T>
struct huge_page_allocator {
    using value_type = T;
    huge_page_allocator() noexcept = default;
    template <class U>
    huge_page_allocator(const huge_page_allocator<U>&) noexcept {}

    [[nodiscard]] T* allocate(std::size_t n) {
        if (n > (SIZE_MAX / 2 - huge_page_bytes) / sizeof(T)) throw std::bad_array_new_length();  // rounded fits
        const std::size_t bytes = n * sizeof(T);
        if (bytes < huge_page_bytes) return std::allocator<T>{}.allocate(n);
        const std::size_t rounded = (bytes + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
        void* p = ::operator new(rounded, std::align_val_t{huge_page_bytes});
        advise_huge_pages(p, huge_advised_bytes(bytes));
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n * sizeof(T) < huge_page_bytes) return std::allocator<T>{}.deallocate(p, n);
        ::operator delete(p, std::align_val_t{huge_page_bytes});
    }
    /// Construction without a value default-initializes: resize() of a vector of numbers leaves
    /// the new entries unwritten (scratch that is overwritten anyway is not zero-filled first,
    /// which for fresh memory would touch every page twice).
    template <class U>
    void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
    friend bool operator==(const huge_page_allocator&, const huge_page_allocator&) noexcept { return true; }
};

/// A vector whose large storage is huge pages (huge_page_allocator); resize() leaves new entries
/// of trivial types unwritten (scratch buffers).
template <class T>
using huge_page_vector = std::vector<T, huge_page_allocator<T>>;

/// Room for n elements in v: when v must grow, its contents are dropped and the new storage is
/// advised as huge pages before anything touches it (for scratch vectors rewritten anyway).
template <class T, class A>
void reserve_scratch(std::vector<T, A>& v, std::size_t n) {
    if (v.capacity() >= n) return;
    v.clear();
    v.reserve(n);
    advise_huge_pages(v.data(), n * sizeof(T));
}

}  // namespace pipeplan
