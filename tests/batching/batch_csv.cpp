// batching/batch_csv.hpp: the batch CSV reader and its errors.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "pipeplan/batching/batch_csv.hpp"

namespace pb = pipeplan::batching;

TEST_CASE("batch CSV: columns by name, other columns ignored, 0-based rows") {
    const auto b = pb::parse_batch_csv("task,target_tokens,input_tokens\nx,5,100\ny,0,7\n", "mem.csv");
    REQUIRE(b.size() == 2);
    CHECK(b[0] == pb::sample{100, 5});
    CHECK(b[1] == pb::sample{7, 0});
    CHECK(pb::parse_batch_csv("input_tokens,target_tokens\n", "e.csv").empty());
}

TEST_CASE("batch CSV: errors name file, line and column") {
    try {
        (void)pb::parse_batch_csv("input_tokens,target_tokens\n1,2\n3,x\n", "b.csv");
        FAIL("expected input_error");
    } catch (const pipeplan::input_error& e) {
        CHECK(e.file() == "b.csv");
        CHECK(e.line() == 3);
        CHECK(e.column() == "target_tokens");
    }
    try {
        (void)pb::parse_batch_csv("input_tokens,tokens\n1,2\n", "c.csv");
        FAIL("expected input_error");
    } catch (const pipeplan::input_error& e) {
        CHECK(e.column() == "target_tokens");
        CHECK(std::string(e.what()).find("missing required column") != std::string::npos);
    }
    CHECK_THROWS_WITH_AS((void)pb::parse_batch_csv("input_tokens,target_tokens\n-4,2\n", "d.csv"),
                         doctest::Contains("d.csv:2: column 'input_tokens'"), pipeplan::input_error);
    CHECK_THROWS_AS((void)pb::read_batch_csv("/nonexistent/batch.csv"), pipeplan::input_error);
}
