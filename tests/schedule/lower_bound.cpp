// Tests of pipeplan/schedule/lower_bound.hpp: the bound's parts hold for every schedule.
#include <doctest/doctest.h>

#include <cstring>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

using namespace pipeplan::schedule;
using pipeplan::test::check_schedule;
using pipeplan::test::random_scenario;
using pipeplan::test::two_stage;

TEST_CASE("lower bound: parts and validity") {
    const scenario sc = scaled_scenario({4, 4, 2, 2}, {1, .8, 1.2, .9, 1.1, .7, 1.4, .6}, 2.0, 4000, 8000, 16000);
    const auto lb = lower_bound(sc, stage_placement::linear(4));
    // Stage 1: fill 4·0.6 + work 12·7.7 + drain 8·0.6 = 99.6.
    CHECK(lb.device_bound_ms[1] == doctest::Approx(99.6));
    CHECK(lb.device_bound_ms[0] == doctest::Approx(92.4));
    CHECK(lb.longest_path_ms == doctest::Approx(12 * 1.4 * 3));
    CHECK(lb.bound_ms == doctest::Approx(99.6));
    // Holds for every schedule (checked by check_schedule on random scenarios); brute force
    // over all orders of a small scenario never beats it.
    const scenario small = random_scenario(3, 4, 5);
    std::vector<std::uint32_t> order{0, 1, 2, 3};
    const double bound = lower_bound(small, stage_placement::linear(3)).bound_ms;
    do {
        const scenario r = reorder(small, order);
        for (const auto& gen : {any_generator(one_f_one_b{}), any_generator(adaptive{}), any_generator(gpipe{})})
            CHECK(simulate(r, gen).makespan_ms >= bound - 1e-9);
    } while (std::next_permutation(order.begin(), order.end()));
}

TEST_CASE("lower bound: the one-pass sweep of one-stage devices equals the general sweep bit for bit") {
    // Every figure lower_bound() combines (work, fill, drain per device; pf, sb at the last
    // stage), compared as bits: S 1-9 (groups of four stages and the rest), M 1-9 and 64 (odd
    // counts: a last micro-batch alone), with and without a B/W split.
    auto bits = [](const std::vector<double>& v) {
        std::vector<std::uint64_t> b(v.size());
        std::memcpy(b.data(), v.data(), v.size() * sizeof(double));
        return b;
    };
    for (std::size_t S = 1; S <= 9; ++S)
        for (const std::size_t M : {1, 2, 3, 5, 8, 9, 64})
            for (const double w : {0.0, 0.4}) {
                const scenario sc = random_scenario(S, M, 100 * S + M);
                detail::bound_sweep one, general;
                detail::sweep_bounds(sc, stage_placement::linear(S), w, 1.0, one);
                detail::sweep_bounds(sc, stage_placement::linear(S), w, 1.0, general, true);
                CAPTURE(S);
                CAPTURE(M);
                CAPTURE(w);
                CHECK(bits(one.work) == bits(general.work));
                CHECK(bits(one.fill) == bits(general.fill));
                CHECK(bits(one.drain) == bits(general.drain));
                CHECK(bits(one.pf) == bits(general.pf));
                CHECK(bits(one.sb) == bits(general.sb));
            }
}
