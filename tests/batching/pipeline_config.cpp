// batching/pipeline_config.hpp: uniform layouts and validation.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "pipeplan/batching/pipeline_config.hpp"

namespace pb = pipeplan::batching;

TEST_CASE("pipeline configuration: uniform layouts and validation") {
    pb::pipeline_config c;
    c.stages = 4;
    c.layers_per_stage = 8;
    c.device_memory_mb = 1000;
    const auto gpt = c.layout(false);
    REQUIRE(gpt.size() == 4);
    CHECK(gpt[0] == pb::stage_layout{8, 0, true, false});
    CHECK(gpt[1] == pb::stage_layout{8, 0, false, false});
    CHECK(gpt[3] == pb::stage_layout{8, 0, false, true});
    const auto t5 = c.layout(true);
    CHECK(t5[0] == pb::stage_layout{8, 0, true, false});
    CHECK(t5[1] == pb::stage_layout{8, 0, false, false});
    CHECK(t5[2] == pb::stage_layout{0, 8, true, false});
    CHECK(t5[3] == pb::stage_layout{0, 8, false, true});
    c.virtual_chunks = 2;
    CHECK(c.layout(false).size() == 8);
    CHECK(c.device_of_chunk(5) == 1);
    CHECK_NOTHROW(c.validate(true));
    auto v = c;  // the V: device d holds chunks d and 2S - 1 - d
    v.v_shape = true;
    for (int k = 0; k < 8; ++k) CHECK(v.device_of_chunk(k) == (k < 4 ? k : 7 - k));
    CHECK_NOTHROW(v.validate(false));
    v.virtual_chunks = 3;
    CHECK_THROWS_WITH_AS(v.validate(false), doctest::Contains("2 chunks per device"), pipeplan::invalid_argument);
    auto bad = c;
    bad.stages = 0;
    CHECK_THROWS_WITH_AS(bad.validate(false), doctest::Contains("stages"), pipeplan::invalid_argument);
    bad = c;
    bad.zero_stage = 4;
    CHECK_THROWS_AS(bad.validate(false), pipeplan::invalid_argument);
    bad = c;
    bad.device_memory_mb = 0;
    CHECK_THROWS_AS(bad.validate(false), pipeplan::invalid_argument);
    bad = c;
    bad.stages = 3;
    bad.virtual_chunks = 1;
    CHECK_THROWS_AS(bad.validate(true), pipeplan::invalid_argument);  // odd chunk count, encoder-decoder
    bad.chunks = std::vector<pb::stage_layout>(2);
    CHECK_THROWS_AS(bad.validate(false), pipeplan::invalid_argument);  // 2 chunks for 3 stages
    CHECK(pb::parse_accounting_mode("dynapipe") == pb::accounting_mode::dynapipe);
    CHECK_THROWS_AS((void)pb::parse_accounting_mode("x"), pipeplan::invalid_argument);
}
