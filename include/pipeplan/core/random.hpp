// pipeplan/core/random.hpp — the seeded PRNG behind every randomised pipeplan algorithm, so a
// seed gives the same result on every platform and standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace pipeplan {

/// A small, portable, seeded PRNG (splitmix64): identical streams on every platform.
class splitmix64 {
public:
    explicit splitmix64(std::uint64_t seed) noexcept : s_(seed) {}
    std::uint64_t operator()() noexcept {
        std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    /// Uniform in [0, n) (n > 0), by rejection: no modulo bias.
    std::size_t below(std::size_t n) noexcept {
        const std::uint64_t lim = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
        std::uint64_t x;
        do x = (*this)();
        while (x >= lim);
        return static_cast<std::size_t>(x % n);
    }

private:
    std::uint64_t s_;
};

}  // namespace pipeplan
