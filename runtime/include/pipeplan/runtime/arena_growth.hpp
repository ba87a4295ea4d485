// pipeplan/runtime/arena_growth.hpp — how a rank's arena grows when a plan needs more bytes
// than it holds. Host-only: the CUDA device arena (runtime/cuda) follows it, and it is
// unit-tested on CPU.
//
// An arena is allocated once for the largest plan seen so far: a plan whose arena_bytes fit the
// capacity reuses it (no allocation per instruction or per iteration); a larger one replaces it
// with round_up(needed × headroom, granularity) bytes, so a job whose plans keep growing
// slightly reallocates O(log_headroom(max / first)) times, not every iteration.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include "pipeplan/core/error.hpp"

namespace pipeplan::runtime {

struct arena_growth {
    std::size_t granularity_bytes = std::size_t(2) << 20;  ///< capacities are multiples of this (2 MiB)
    double headroom = 1.25;                                ///< a regrown arena holds needed × headroom

    /// Throws invalid_argument unless granularity ≥ 1 and 1 ≤ headroom ≤ 16.
    void check() const {
        if (granularity_bytes == 0 || !(headroom >= 1.0 && headroom <= 16.0))
            throw invalid_argument("arena_growth: granularity_bytes must be >= 1 and headroom in [1, 16] (got " +
                                   std::to_string(granularity_bytes) + ", " + std::to_string(headroom) + ")");
    }

    /// The capacity to hold `needed` bytes when `capacity` are held now: `capacity` when they
    /// fit, else the regrown size (never smaller than needed). Throws invalid_argument when the
    /// size overflows.
    [[nodiscard]] std::size_t capacity_for(std::size_t capacity, std::size_t needed) const {
        check();
        if (needed <= capacity) return capacity;
        const double want = std::ceil(static_cast<double>(needed) * headroom);
        constexpr auto max_bytes = static_cast<double>(std::numeric_limits<std::size_t>::max() / 2);
        if (want >= max_bytes) throw invalid_argument("arena_growth: " + std::to_string(needed) + " bytes cannot be allocated");
        std::size_t bytes = static_cast<std::size_t>(want);
        if (bytes < needed) bytes = needed;
        const std::size_t rem = bytes % granularity_bytes;
        return rem == 0 ? bytes : bytes + (granularity_bytes - rem);
    }
};

}  // namespace pipeplan::runtime
