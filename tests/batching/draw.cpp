// Global batches drawn from length files: budget, determinism, epochs, mixture weights, errors.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "pipeplan/batching/draw.hpp"

namespace pb = pipeplan::batching;

namespace {
pb::length_pool draw_pool() {
    pb::length_pool pool;
    pb::add_length_table(pool, pipeplan::csv_table::parse("task,category,input_tokens,target_tokens\n"
                                                          "a,x,10,0\na,x,20,0\na,x,30,0\nb,y,100,5\nb,y,200,5\n",
                                                          "mix.csv"));
    return pool;
}
long long tokens_of(const std::vector<pb::sample>& b) {
    long long n = 0;
    for (const auto& s : b) n += s.input_tokens + s.target_tokens;
    return n;
}
}  // namespace

TEST_CASE("draw: batches stay within the budget, continue where the last stopped, and depend only on the seed") {
    const auto pool = draw_pool();
    CHECK(pool.tasks == std::vector<std::string>{"a", "b"});
    CHECK(pool.task_of == std::vector<std::int32_t>{0, 0, 0, 1, 1});
    pb::batch_drawer d(pool, {.tokens = 120, .seed = 3, .weights = {}});
    pb::batch_drawer e(pool, {.tokens = 120, .seed = 3, .weights = {}});
    for (int i = 0; i < 6; ++i) {
        const auto b = d.next();
        CHECK(b == e.next());
        REQUIRE_FALSE(b.empty());
        if (b.size() > 1) CHECK(tokens_of(b) <= 120);  // 205 alone is over the budget and forms a batch alone
    }
    pb::batch_drawer other(pool, {.tokens = 1000, .seed = 4, .weights = {}});
    const auto big = other.next();  // passes of 370 tokens: the next epoch reshuffles and continues
    CHECK(tokens_of(big) <= 1000);
    CHECK(tokens_of(big) > 1000 - 205);
    CHECK(big.size() > 5);
    CHECK_THROWS_AS(pb::batch_drawer(pool, {.tokens = 0, .seed = 1, .weights = {}}), pipeplan::invalid_argument);
}

TEST_CASE("draw: mixture weights by task or file; a name matching nothing is an error") {
    const auto pool = draw_pool();
    pb::batch_drawer only_a(pool, {.tokens = 200, .seed = 1, .weights = {{"a", 1.0}, {"b", 0.0}}});
    for (int i = 0; i < 5; ++i)
        for (const auto& s : only_a.next()) CHECK(s.input_tokens <= 30);
    pb::batch_drawer by_file(pool, {.tokens = 200, .seed = 1, .weights = {{"mix.csv", 1.0}}});
    CHECK_FALSE(by_file.next().empty());
    CHECK_THROWS_AS(pb::batch_drawer(pool, {.tokens = 10, .seed = 1, .weights = {{"c", 1.0}}}), pipeplan::invalid_argument);
    CHECK_THROWS_AS(pb::batch_drawer(pool, {.tokens = 10, .seed = 1, .weights = {{"a", -1.0}}}), pipeplan::invalid_argument);
    CHECK_THROWS_AS(pb::batch_drawer(pool, {.tokens = 10, .seed = 1, .weights = {{"a", 0.0}}}), pipeplan::invalid_argument);
    // A bad cell names the file, line and column.
    pb::length_pool bad;
    CHECK_THROWS_WITH_AS(pb::add_length_table(bad, pipeplan::csv_table::parse("input_tokens,target_tokens\n5,x\n", "bad.csv")),
                         doctest::Contains("bad.csv:2"), pipeplan::input_error);
}
