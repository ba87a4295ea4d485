#include <doctest/doctest.h>

#include "pipeplan/core/estimate.hpp"

using pipeplan::estimate;
using pipeplan::estimate_status;

TEST_CASE("estimate: value, status and propagation") {
    estimate<double> a(2.0), b(3.5);
    CHECK(a.ok());
    CHECK((a + b).value() == doctest::Approx(5.5));
    CHECK((a * 2.0).value() == doctest::Approx(4.0));
    auto oor = estimate<double>::out_of_range();
    CHECK_FALSE(oor.ok());
    CHECK_THROWS_AS((void)oor.value(), pipeplan::error);
    CHECK(oor.value_or(-1.0) == -1.0);
    CHECK((a + oor).status() == estimate_status::out_of_profiled_range);
    CHECK((oor + estimate<double>::unsupported()).status() == estimate_status::unsupported);
    CHECK(pipeplan::max(a, b).value() == 3.5);
    CHECK_FALSE(pipeplan::max(a, oor).ok());
    CHECK_FALSE(estimate<double>{}.ok());
}
