// plan/plan_file.hpp: the format of plan bytes told by their first bytes.
#include <doctest/doctest.h>

#include <string>

#include "common.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/plan_file.hpp"
#include "pipeplan/plan/serialize.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

TEST_CASE("plan files: the format is told by the first bytes; both read to the same plan") {
    const auto sc = test::random_scenario(3, 5, 4);
    const execution_plan p = lower(sc, schedule::one_f_one_b{}(sc));
    const std::string bin = to_binary(p), js = to_json_text(p);
    CHECK(sniff_plan_format(bin) == plan_format::binary);
    CHECK(sniff_plan_format(js) == plan_format::json);
    CHECK(sniff_plan_format("") == plan_format::json);
    CHECK(execution_plan_from_bytes(bin) == p);
    CHECK(execution_plan_from_bytes(js) == p);
    const rank_plan r1 = share_of(p, 1);
    CHECK(rank_plan_from_bytes(to_binary(r1)) == r1);
    CHECK(rank_plan_from_bytes(to_json_text(r1)) == r1);
    CHECK_THROWS_AS((void)execution_plan_from_bytes(bin.substr(0, 12), "cut.plan"), pipeplan::error);
}
