// Tests of pipeplan/schedule/op.hpp: op strings.
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

TEST_CASE("op strings parse back") {
    for (const char* s : {"F3", "B12", "W0", "f7", "R5", "F3.1", "B0.2"}) {
        const auto p = parse_op(s);
        REQUIRE(p);
        const bool chunked = std::string(s).find('.') != std::string::npos;
        CHECK(to_string(op{p->kind, p->microbatch, 0}, chunked ? static_cast<int>(p->chunk) : -1) == s);
    }
    for (const char* s : {"", "X1", "F", "F-1", "F1.", "F1x"}) CHECK_FALSE(parse_op(s));
}
