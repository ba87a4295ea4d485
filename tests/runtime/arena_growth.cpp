// runtime/arena_growth.hpp: capacities that fit, round up with headroom and regrow rarely.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>

#include "pipeplan/core/random.hpp"
#include "pipeplan/runtime/arena_growth.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;

TEST_CASE("arena growth: fits reuse the arena, growth rounds up with headroom, few regrowths, bad settings refused") {
    const arena_growth g;  // 2 MiB granularity, 1.25 headroom
    CHECK(g.capacity_for(0, 0) == 0);
    CHECK(g.capacity_for(0, 1) == g.granularity_bytes);
    CHECK(g.capacity_for(4 << 20, 3 << 20) == (4 << 20));  // fits: unchanged, never shrinks
    CHECK(g.capacity_for(4 << 20, 4 << 20) == (4 << 20));
    CHECK(g.capacity_for(4 << 20, (4 << 20) + 1) == (6 << 20));  // 5 MiB + headroom → 6 MiB
    splitmix64 rng(5);
    std::size_t cap = 0, regrowths = 0;
    double needed = 1e6;
    for (int it = 0; it < 2000; ++it) {
        needed *= 1.0 + 0.002 * double(rng.below(10));  // plans growing slowly and noisily
        const auto n = static_cast<std::size_t>(needed);
        const std::size_t next = g.capacity_for(cap, n);
        CHECK(next >= n);
        CHECK(next >= cap);
        CHECK(next % g.granularity_bytes == 0);
        regrowths += next != cap;
        cap = next;
    }
    const double bound = std::log(needed / 1e6) / std::log(1.25) + 2;
    CHECK(double(regrowths) <= bound);
    CHECK(regrowths >= 2);
    const arena_growth no_granularity{0, 1.25}, shrinking{64, 0.5};
    CHECK_THROWS_AS((void)no_granularity.capacity_for(0, 1), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)shrinking.capacity_for(0, 1), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)g.capacity_for(0, std::size_t(-1) / 2), pipeplan::invalid_argument);
}

