// `dynapipe` accounting against numbers from DynaPipe's own code: the tables in data/ (made by
// data/make_dynapipe_tables.py with the reference harness) list micro-batch shapes of real GPT
// (65k and 1M tokens) and T5 batches, of batches with samples below 16 tokens and a grid of
// shapes, with DynaPipe's float32 time, stored and peak memory (or `inf` where DynaPipe's
// never-measured 1e100 cells make the shape infeasible). pipeplan must agree to float32
// precision. Needs ../shared/data (the profiles); the tables themselves are in the repository.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common.hpp"
#include "pipeplan/batching.hpp"
#include "pipeplan/core/csv.hpp"
#include "profile_models.hpp"
#include "support.hpp"

namespace pb = pipeplan::batching;
using pipeplan::interpolation_mode;
using pipeplan::profile_cost_model;

namespace {

// The tables: $PIPEPLAN_SOURCE_DIR (set by `meson test`) or the source root the build saw.
std::filesystem::path table_dir() {
    const char* src = std::getenv("PIPEPLAN_SOURCE_DIR");
    return std::filesystem::path(src && *src ? src : PIPEPLAN_SOURCE_DIR) / "tests" / "batching" / "data";
}

// A float32 value from DynaPipe against pipeplan's double: equal to a few float32 ulps (the
// sums of up to four float32 roundings), with an absolute floor for extrapolated values near 0.
bool same_in_float32(double pipeplan_value, double dynapipe_value) {
    return std::abs(pipeplan_value - dynapipe_value) <= 1e-6 * std::abs(dynapipe_value) + 1e-6;
}

struct table_check {
    int rows = 0, infeasible = 0;
    int min_seqlen_tokens = 1 << 30;  // the shortest (encoder) length in the table
};

table_check check_table(const std::string& name, const std::string& model, int tp, int layers_per_stage) {
    const auto& m = pipeplan::test::profile_model(model, interpolation_mode::dynapipe);
    const pb::stage_cost_evaluator<profile_cost_model> ev(
        m, pipeplan::test::make_config(4, layers_per_stage, 36000, tp), pb::accounting_mode::dynapipe);
    const auto t = pipeplan::csv_table::read(table_dir() / ("dynapipe_" + name + ".csv"));
    const std::size_t c_rc = t.column("recompute"), c_mbs = t.column("mbs"), c_s = t.column("seqlen"),
                      c_d = t.column("dec_seqlen"), c_t = t.column("time_ms"), c_st = t.column("stored_mb"),
                      c_p = t.column("peak_mb");
    table_check out;
    for (std::size_t r = 0; r < t.rows(); ++r) {
        const pb::microbatch_shape shape{static_cast<int>(t.integer(r, c_mbs, 1, 1 << 20)),
                                         static_cast<int>(t.integer(r, c_s, 1, 1 << 20)),
                                         static_cast<int>(t.integer(r, c_d, 0, 1 << 20))};
        const auto rc = pipeplan::parse_recompute(t.cell(r, c_rc));
        const auto got = ev.evaluate(shape, rc);
        CAPTURE(name);
        CAPTURE(r + 2);  // the table's line
        ++out.rows;
        out.min_seqlen_tokens = std::min(out.min_seqlen_tokens, shape.seqlen_tokens);
        if (t.cell(r, c_t) == "inf") {
            ++out.infeasible;
            CHECK_FALSE(got.ok());
            continue;
        }
        REQUIRE(got.ok());
        const auto& c = got.value();
        CHECK(same_in_float32(c.time_ms, t.number(r, c_t)));
        CHECK(same_in_float32(c.stored_mb, t.number(r, c_st)));
        CHECK(same_in_float32(c.peak_mb, t.number(r, c_p)));
    }
    return out;
}

}  // namespace

TEST_CASE("dynapipe accounting equals DynaPipe's own per-micro-batch cost (GPT-6.7B)" * PIPEPLAN_NEEDS_DATA()) {
    for (const char* name : {"gpt_65k", "gpt_1m", "gpt_short", "gpt_grid"}) CHECK(check_table(name, "gpt_6.7b", 2, 8).rows >= 5);
    // DynaPipe's own split of the short batch has micro-batches of 8 tokens (below the
    // smallest profiled length, 16: extrapolated).
    CHECK(check_table("gpt_short", "gpt_6.7b", 2, 8).min_seqlen_tokens == 8);
    // The grid reaches cells DynaPipe never measured (out of memory when profiled).
    CHECK(check_table("gpt_grid", "gpt_6.7b", 2, 8).infeasible > 0);
}

TEST_CASE("dynapipe accounting equals DynaPipe's own per-micro-batch cost (T5-11B)" * PIPEPLAN_NEEDS_DATA()) {
    for (const char* name : {"t5_65k", "t5_short", "t5_grid"}) CHECK(check_table(name, "t5_11b", 4, 6).rows >= 4);
    CHECK(check_table("t5_short", "t5_11b", 4, 6).min_seqlen_tokens == 8);
    CHECK(check_table("t5_grid", "t5_11b", 4, 6).infeasible > 0);
}
