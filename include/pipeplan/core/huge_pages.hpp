// pipeplan/core/huge_pages.hpp — transparent huge pages for large scratch buffers.
//
// The first touch of fresh memory costs a page fault per 4 KiB page; on virtual machines a
// fault can cost microseconds (13 µs on the 2-core development VM: writing 34 MB of fresh
// memory takes 111 ms in 4 KiB pages, 2.8 ms advised as huge pages; docs/schedules.md,
// "Simulator speed"). The simulator's large scratch buffers and results are therefore advised
// as huge pages: a hint that changes how the kernel backs them, never what they hold. Linux only
// (a no-op elsewhere), and only for the whole 2 MiB pages inside a buffer (huge_page_allocator
// aligns large buffers to huge pages, so all of such a buffer is). Freed large blocks are kept for
// the next allocation of the same size (huge_block_cache, at most 64 MiB): a fresh simulation
// whose result the caller dropped then writes into memory that is already faulted in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
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

/// Freed blocks of huge_page_allocator, kept for the next allocation of the same rounded size (at
/// most kept_blocks blocks and kept_bytes bytes, the oldest released first): a block taken from
/// here is already faulted in, where a fresh one costs the kernel's clearing of every huge page
/// (~240 µs per 2 MiB on the development VM: ~3 ms of a fresh 1F1B simulation at S 64, M 4096,
/// whose result and scratch are three such blocks that the previous simulation freed). What it
/// holds is the last owner's data: the allocator never zeroes memory (construct()). One per
/// process, behind a mutex (an allocation of a huge page or more takes it once).
class huge_block_cache {
public:
    static constexpr std::size_t kept_blocks = 8;
    static constexpr std::size_t kept_bytes = std::size_t{64} << 20;

    huge_block_cache() = default;
    huge_block_cache(const huge_block_cache&) = delete;
    huge_block_cache& operator=(const huge_block_cache&) = delete;
    ~huge_block_cache() { (void)release(); }

    /// The process's cache (never destroyed: blocks may be freed during static destruction).
    [[nodiscard]] static huge_block_cache& instance() {
        static huge_block_cache* cache = new huge_block_cache;
        return *cache;
    }

    /// A kept block of `bytes` (a multiple of huge_page_bytes), or nullptr.
    [[nodiscard]] void* take(std::size_t bytes) noexcept {
        const std::lock_guard<std::mutex> lock(mutex_);
        for (std::size_t i = count_; i-- > 0;)  // the newest first
            if (blocks_[i].bytes == bytes) {
                void* p = blocks_[i].p;
                held_ -= bytes;
                for (std::size_t j = i + 1; j < count_; ++j) blocks_[j - 1] = blocks_[j];
                --count_;
                return p;
            }
        return nullptr;
    }

    /// Keeps block `p` of `bytes` (releasing the oldest blocks as the limits need), or releases
    /// it when it alone exceeds kept_bytes.
    void keep(void* p, std::size_t bytes) noexcept {
        block released[kept_blocks + 1];
        std::size_t n = 0;
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            if (bytes > kept_bytes) {
                released[n++] = {p, bytes};
            } else {
                std::size_t drop = 0;
                while (count_ - drop == kept_blocks || held_ + bytes > kept_bytes) {
                    held_ -= blocks_[drop].bytes;
                    released[n++] = blocks_[drop++];
                }
                for (std::size_t j = drop; j < count_; ++j) blocks_[j - drop] = blocks_[j];
                count_ -= drop;
                blocks_[count_++] = {p, bytes};
                held_ += bytes;
            }
        }
        for (std::size_t i = 0; i < n; ++i) ::operator delete(released[i].p, std::align_val_t{huge_page_bytes});
    }

    /// Releases every kept block to the system and returns their bytes: for a long-running
    /// process (a trainer) that has finished simulating and wants the memory back.
    std::size_t release() noexcept {
        block released[kept_blocks];
        std::size_t n = 0, bytes = 0;
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            for (; n < count_; ++n) released[n] = blocks_[n];
            bytes = held_;
            count_ = held_ = 0;
        }
        for (std::size_t i = 0; i < n; ++i) ::operator delete(released[i].p, std::align_val_t{huge_page_bytes});
        return bytes;
    }

    /// The bytes of the blocks kept now.
    [[nodiscard]] std::size_t held_bytes() const noexcept {
        const std::lock_guard<std::mutex> lock(mutex_);
        return held_;
    }

private:
    struct block {
        void* p = nullptr;
        std::size_t bytes = 0;
    };
    mutable std::mutex mutex_;
    block blocks_[kept_blocks];
    std::size_t count_ = 0, held_ = 0;  ///< blocks kept (oldest first) and their bytes
};

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
        const std::size_t rounded = rounded_bytes(bytes);
        void* p = huge_block_cache::instance().take(rounded);
        if (!p) p = ::operator new(rounded, std::align_val_t{huge_page_bytes});
        advise_huge_pages(p, huge_advised_bytes(bytes));
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n * sizeof(T) < huge_page_bytes) return std::allocator<T>{}.deallocate(p, n);
        huge_block_cache::instance().keep(p, rounded_bytes(n * sizeof(T)));
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

private:
    /// `bytes` rounded up to whole huge pages.
    [[nodiscard]] static constexpr std::size_t rounded_bytes(std::size_t bytes) noexcept {
        return (bytes + huge_page_bytes - 1) & ~(huge_page_bytes - 1);
    }
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
