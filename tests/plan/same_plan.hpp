// The thread-count tests' comparison of two plans of the same inputs.
#pragma once

#include <cstddef>

#include <doctest/doctest.h>

#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/serialize.hpp"

namespace pipeplan::test {

/// Checks that `b` is `a`'s plan: the same plan bytes and the same candidate reports (kind,
/// split, makespan) in the same order.
inline void check_same_plan(const plan::plan_result& a, const plan::plan_result& b) {
    CHECK(plan::to_binary(b.plan) == plan::to_binary(a.plan));
    REQUIRE(b.candidates.size() == a.candidates.size());
    for (std::size_t k = 0; k < a.candidates.size(); ++k) {
        CHECK(b.candidates[k].name == a.candidates[k].name);
        CHECK(b.candidates[k].split == a.candidates[k].split);
        CHECK(b.candidates[k].makespan_ms == a.candidates[k].makespan_ms);
    }
}

}  // namespace pipeplan::test
