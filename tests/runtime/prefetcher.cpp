// plan_prefetcher: strict order, determinism over thread counts, bounded look-ahead, errors,
// clean shutdown.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/runtime/prefetcher.hpp"

using namespace pipeplan::runtime;
using namespace std::chrono_literals;

namespace {
/// A deterministic "plan" of an iteration that takes a random-looking time to compute.
std::vector<std::uint64_t> fake_plan(std::uint64_t it) {
    pipeplan::splitmix64 rng(it);
    std::this_thread::sleep_for(std::chrono::microseconds(rng.below(3000)));
    return {it, rng(), rng()};
}
}  // namespace

TEST_CASE("prefetcher: plans come out in iteration order and identical for every thread count") {
    std::vector<std::vector<std::uint64_t>> baseline;
    for (std::size_t threads : {1, 2, 5}) {
        CAPTURE(threads);
        plan_prefetcher<std::vector<std::uint64_t>> p(fake_plan, {threads, 3, 10, 25});
        std::vector<std::vector<std::uint64_t>> got;
        while (auto plan = p.next(10s)) got.push_back(*plan);
        REQUIRE(got.size() == 25);
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i][0] == 10 + i);
        if (baseline.empty()) baseline = got;
        CHECK(got == baseline);
        CHECK_FALSE(p.next(1ms).has_value());
    }
}

TEST_CASE("prefetcher: keeps exactly depth plans ready ahead and no more") {
    std::atomic<std::uint64_t> highest{0};
    plan_prefetcher<std::uint64_t> p(
        [&](std::uint64_t it) {
            std::uint64_t h = highest.load();
            while (it > h && !highest.compare_exchange_weak(h, it)) {
            }
            return it * 10;
        },
        {4, 3, 0, 1000});
    for (int spin = 0; spin < 2000 && p.ready() < 3; ++spin) std::this_thread::sleep_for(1ms);
    CHECK(p.ready() == 3);
    std::this_thread::sleep_for(20ms);
    CHECK(p.ready() == 3);  // the window is full: nobody plans iteration 3 yet
    CHECK(highest.load() == 2);
    CHECK(*p.next(1s) == 0);
    for (int spin = 0; spin < 2000 && p.ready() < 3; ++spin) std::this_thread::sleep_for(1ms);
    CHECK(highest.load() == 3);
}

TEST_CASE("prefetcher: a planner error surfaces at its iteration; stop joins mid-stream") {
    plan_prefetcher<int> p(
        [](std::uint64_t it) {
            if (it == 2) throw pipeplan::error("planning iteration 2 failed");
            return int(it);
        },
        {3, 2});
    CHECK(*p.next(5s) == 0);
    CHECK(*p.next(5s) == 1);
    CHECK_THROWS_WITH_AS((void)p.next(5s), doctest::Contains("iteration 2"), pipeplan::error);
    CHECK(*p.next(5s) == 3);
    p.stop();  // the other threads are waiting on a full window: they must wake and leave
    CHECK_THROWS_AS((void)p.next(1ms), pipeplan::error);
    CHECK_THROWS_AS(plan_prefetcher<int>([](std::uint64_t) { return 0; }, {0, 1}), pipeplan::invalid_argument);
}

TEST_CASE("prefetcher: next times out when planning is slower than asked") {
    plan_prefetcher<int> p([](std::uint64_t) { std::this_thread::sleep_for(200ms); return 1; }, {1, 1});
    CHECK_THROWS_AS((void)p.next(5ms), timeout_error);
}
