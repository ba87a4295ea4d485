// pipeplan/core/huge_pages.hpp — transparent huge pages for large scratch buffers.
//
// The first touch of fresh memory costs a page fault per 4 KiB page; on virtual machines a
// fault can cost microseconds (13 µs on the 2-core development VM: writing 34 MB of fresh
// memory takes 111 ms in 4 KiB pages, 2.8 ms advised as huge pages; docs/schedules.md,
// "Simulator speed"). Large scratch buffers of the simulator are therefore advised as huge
// pages: a hint that changes how the kernel backs them, never what they hold. Linux only (a
// no-op elsewhere), and only for buffers that span at least two aligned 2 MiB pages.
#pragma once

#include <cstddef>
#include <cstdint>
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
    if (hi >= lo + 2 * huge_page_bytes) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

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
