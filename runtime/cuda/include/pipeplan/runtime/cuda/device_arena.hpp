// pipeplan/runtime/cuda/device_arena.hpp — a rank's buffers in device memory: one cudaMalloc
// for the largest plan seen so far (arena_growth decides the size), reused by every later plan
// that fits; never an allocation per instruction. Models the executor's arena_memory, so
// executor<T, device_arena> lays the plan's buffers out in it and handlers get device pointers.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "pipeplan/runtime/arena_growth.hpp"
#include "pipeplan/runtime/cuda/check.hpp"

namespace pipeplan::runtime::cuda {

class device_arena {
public:
    explicit device_arena(arena_growth growth = {}) : growth_(growth) { growth_.check(); }
    device_arena(const device_arena&) = delete;
    device_arena& operator=(const device_arena&) = delete;
    device_arena(device_arena&& o) noexcept { *this = std::move(o); }
    device_arena& operator=(device_arena&& o) noexcept {
        if (this != &o) {
            release();
            growth_ = o.growth_;
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            capacity_ = std::exchange(o.capacity_, 0);
            allocations_ = std::exchange(o.allocations_, 0);
        }
        return *this;
    }
    ~device_arena() { release(); }

    /// Device memory: pass it to kernels and copies, never dereference it on the host.
    [[nodiscard]] std::span<std::byte> bytes() noexcept { return {data_, size_}; }
    [[nodiscard]] const std::byte* data() const noexcept { return data_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    /// How many cudaMalloc calls this arena made.
    [[nodiscard]] std::size_t allocations() const noexcept { return allocations_; }

    /// Makes the arena `size` bytes long; reallocates (after the device finished with the old
    /// memory: cudaFree synchronizes) only when `size` exceeds the capacity.
    void resize(std::size_t size) {
        const std::size_t want = growth_.capacity_for(capacity_, size);
        if (want != capacity_) {
            release();
            void* p = nullptr;
            check(cudaMalloc(&p, want), "device_arena: cudaMalloc");
            data_ = static_cast<std::byte*>(p);
            capacity_ = want;
            ++allocations_;
        }
        size_ = size;
    }

private:
    void release() noexcept {
        if (data_ != nullptr) (void)cudaFree(data_);
        data_ = nullptr;
        size_ = capacity_ = 0;
    }

    arena_growth growth_;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0, capacity_ = 0, allocations_ = 0;
};

}  // namespace pipeplan::runtime::cuda
