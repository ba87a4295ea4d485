// The compare tier: the methods on hand-computed cases, packed micro-batches priced as packed
// through plan_microbatches and the plan formats, the sweep's properties over seeds (pipeplan is
// never slower than the best baseline, dynapipe never faster than pipeplan), determinism, and
// the JSON / CSV / HTML outputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeplan/batching/json.hpp"
#include "pipeplan/compare/html.hpp"
#include "pipeplan/compare/report.hpp"
#include "pipeplan/compare/sweep.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/serialize.hpp"

namespace {

namespace pc = pipeplan::compare;
namespace pb = pipeplan::batching;
using pipeplan::analytic_cost_model;

const analytic_cost_model& cmp_gpt() {
    static const analytic_cost_model m = pipeplan::make_analytic_model("gpt-6.7b");
    return m;
}

pipeplan::plan::planner_options cmp_options(int stages = 4, int dp = 1) {
    pipeplan::plan::planner_options o;
    o.config.stages = stages;
    o.config.layers_per_stage = 32 / stages;
    o.config.tp = 2;
    o.config.dp = dp;
    o.config.device_memory_mb = 40000;
    o.hidden_size = 4096;
    o.order_search_evaluations = 8;
    o.polish_evaluations = 16;
    return o;
}

/// A pool of `n` samples with lengths from a seeded heavy-tailed mix (two tasks).
pb::length_pool cmp_pool(std::size_t n, std::uint64_t seed) {
    std::string csv = "task,input_tokens,target_tokens\n";
    pipeplan::splitmix64 rng(seed);
    for (std::size_t i = 0; i < n; ++i) {
        const bool long_task = rng.below(5) == 0;
        const int in = long_task ? 300 + static_cast<int>(rng.below(1500)) : 20 + static_cast<int>(rng.below(200));
        csv += std::string(long_task ? "long" : "short") + "," + std::to_string(in) + "," + std::to_string(1 + rng.below(60)) + "\n";
    }
    pb::length_pool pool;
    pb::add_length_table(pool, pipeplan::csv_table::parse(csv, "pool.csv"));
    return pool;
}

}  // namespace

TEST_CASE("compare: padding waste and the token budget, hand-computed") {
    // Lengths 100, 20, 60, 200 (rounded to 8: 104, 24, 64, 200); mbs 2 in dataset order:
    // [104 104] [200 200] = 616 computed tokens for 380 real ones.
    const std::vector<pb::sample> b{{90, 10}, {15, 5}, {60, 0}, {150, 50}};
    pc::baseline_knobs k{pc::method::padding, 2, 0, pipeplan::recompute_mode::none};
    const auto pad = pc::baseline_split(cmp_gpt(), b, cmp_options().config, {}, k);
    CHECK(pc::detail::computed_tokens(pad) == 2 * 104 + 2 * 200);
    CHECK(pc::real_tokens(b, {}, false) == 100 + 20 + 60 + 200);
    // Token budget 300 over the sorted order 200, 104, 64, 24: [200] (2 x 200 > 300), [104 64 24]? 3 x 104 = 312 > 300:
    // [104 64] (2 x 104 = 208), then [24] joins? 3 x 104 > 300, so [24] alone.
    k = {pc::method::tokens, 0, 300, pipeplan::recompute_mode::none};
    const auto tok = pc::baseline_split(cmp_gpt(), b, cmp_options().config, {}, k);
    REQUIRE(tok.microbatches.size() == 3);
    CHECK(tok.microbatches[0] == std::vector<int>{3});
    CHECK(tok.microbatches[1] == std::vector<int>{0, 2});
    CHECK(tok.microbatches[2] == std::vector<int>{1});
    CHECK(pc::detail::computed_tokens(tok) == 200 + 2 * 104 + 24);
}

TEST_CASE("compare: packed micro-batches are priced as packed rows by plan_microbatches and kept in the plan") {
    // 40 samples, every 13th of 800 tokens, the others of 100: rows of 2048 hold 800 + 12 x 100 =
    // 2000 tokens (13 samples); rows 13, 13, 13, 1. Padded instead, a row's 13 samples would be
    // [13 sequences, 800 tokens] = 10400 tokens, the mis-pricing this guards against.
    std::vector<pb::sample> b;
    for (int i = 0; i < 40; ++i) b.push_back(i % 13 == 0 ? pb::sample{792, 8} : pb::sample{92, 8});
    pb::split_options so;
    so.lengths.max_seqlen_tokens = 2048;
    const auto packed = pb::split_pack_fixed(cmp_gpt(), b, cmp_options().config, 1, 0, 0, so);
    REQUIRE(packed.per_microbatch.size() == 4);
    CHECK(packed.per_microbatch[0].shape == pb::microbatch_shape{1, 2048, 0});
    auto po = cmp_options();
    po.split = so;
    pipeplan::plan::planner<analytic_cost_model> p(cmp_gpt(), po);
    // Through split --json and back, as `plan --microbatches` reads it.
    const nlohmann::json j = packed;
    pb::given_split g = pb::split_from_json(j.dump(), "split.json");
    REQUIRE(g.layout.rows.size() == 4);
    CHECK(g.layout.row_tokens == std::vector<int>{2048, 2048, 2048, 2048});
    const auto as_rows = p.plan_microbatches(b, g.microbatches, g.layout);
    const auto as_samples = p.plan_microbatches(b, g.microbatches);  // the same ids without rows: padded samples
    const auto& e = as_rows.plan.header.microbatches;
    REQUIRE(e.size() == 4);
    for (const auto& m : e) {
        CHECK(m.shape.microbatch_size == 1);
        CHECK(m.shape.seqlen == 2048);
    }
    CHECK(e[0].row_sizes.size() == 1);
    CHECK(e[0].row_sizes[0] + e[1].row_sizes[0] + e[2].row_sizes[0] + e[3].row_sizes[0] == 40);
    bool padded_wide = false;
    for (const auto& m : as_samples.plan.header.microbatches) padded_wide = padded_wide || (m.shape.microbatch_size == 13 && m.shape.seqlen == 800);
    CHECK(padded_wide);
    CHECK(as_samples.makespan_ms > 2.0 * as_rows.makespan_ms);
    // The rows survive both plan formats.
    const auto back_json = pipeplan::plan::execution_plan_from_json(pipeplan::plan::to_json_text(as_rows.plan), "p.json");
    CHECK(back_json.header == as_rows.plan.header);
    const auto back_bin = pipeplan::plan::execution_plan_from_binary(pipeplan::plan::to_binary(as_rows.plan), "p.plan");
    CHECK(back_bin.header == as_rows.plan.header);
    // Rows that do not hold the micro-batch's samples are refused.
    pb::packed_layout bad = g.layout;
    bad.rows[0][0].pop_back();
    CHECK_THROWS_AS((void)p.plan_microbatches(b, g.microbatches, bad), pipeplan::invalid_argument);
}

TEST_CASE("compare: pipeplan >= the best baseline and dynapipe <= pipeplan in every feasible setting, over seeds") {
    const auto pool = cmp_pool(600, 7);
    for (std::uint64_t seed : {1u, 2u, 3u}) {
        pc::compare_options o;
        o.planner = cmp_options(4, seed == 2 ? 2 : 1);
        o.settings = {{512, 8192}, {2048, 8192}};
        o.iterations = 2;
        o.draw.seed = seed;
        o.knobs.padding_mbs = {1, 4};
        o.knobs.packing_rows = {1, 2};
        o.knobs.token_budgets = {2048, 8192};
        o.knobs.recompute = {pipeplan::recompute_mode::none, pipeplan::recompute_mode::full};
        const auto rep = pc::run_compare(cmp_gpt(), pool, o);
        REQUIRE(rep.settings.size() == 2);
        for (const auto& s : rep.settings) {
            const auto& pp = s.methods[static_cast<std::size_t>(pc::method::pipeplan)];
            const auto& dyn = s.methods[static_cast<std::size_t>(pc::method::dynapipe)];
            REQUIRE(pp.feasible);
            for (pc::method m : {pc::method::padding, pc::method::packing, pc::method::tokens}) {
                const auto& base = s.methods[static_cast<std::size_t>(m)];
                if (base.feasible) CHECK(pp.tokens_per_s >= base.tokens_per_s * (1 - 1e-12));
            }
            if (dyn.feasible) CHECK(dyn.tokens_per_s <= pp.tokens_per_s * (1 + 1e-12));
            CHECK(pp.speedup_over_best_baseline >= 1.0 - 1e-12);
            for (const auto& m : s.methods)
                if (m.feasible) {
                    CHECK(m.efficiency > 0);
                    CHECK(m.efficiency <= 1.0 + 1e-12);
                    CHECK(m.max_peak_memory_mb <= s.memory_limit_mb);
                    CHECK(m.makespan_over_lower_bound >= 1.0 - 1e-9);
                }
            // The chosen knobs are named: parallelism, rows, row length, recomputation, schedule.
            const auto& pk = s.methods[static_cast<std::size_t>(pc::method::packing)];
            if (pk.feasible) CHECK(pk.config.size() == 7);
        }
    }
}

TEST_CASE("compare: deterministic for a seed; the JSON has the documented schema; CSV and HTML") {
    const auto pool = cmp_pool(300, 11);
    pc::compare_options o;
    o.planner = cmp_options();
    o.settings = {{1024, 6000}};
    o.iterations = 2;
    o.knobs.padding_mbs = {2};
    o.knobs.packing_rows = {1};
    o.knobs.token_budgets = {4096};
    o.knobs.recompute = {pipeplan::recompute_mode::selective};
    const auto a = pc::to_json(pc::run_compare(cmp_gpt(), pool, o));
    const auto rep = pc::run_compare(cmp_gpt(), pool, o);
    auto b = pc::to_json(rep);
    const auto strip = [](nlohmann::json j) {
        for (auto& s : j["settings"])
            for (auto& [name, m] : s["methods"].items()) {
                m.erase("planning_ms");
                m["per_iteration"].erase("planning_ms");
            }
        return j;
    };
    CHECK(strip(a) == strip(b));
    REQUIRE(b["settings"].is_array());
    const auto& s = b["settings"][0];
    CHECK(s["max_seqlen"] == 1024);
    CHECK(s["tokens"] == 6000);
    for (const char* name : {"padding", "packing", "tokens", "dynapipe", "pipeplan"}) {
        REQUIRE(s["methods"].contains(name));
        const auto& m = s["methods"][name];
        for (const char* key : {"feasible", "tokens_per_s", "iteration_ms", "efficiency", "peak_memory_mb", "config"})
            CHECK_MESSAGE(m.contains(key), name, ".", key);
        if (std::string(name) == "dynapipe" || std::string(name) == "pipeplan") CHECK(m.contains("speedup_over_best_baseline"));
        CHECK(m["config"].is_object());
    }
    CHECK(s["methods"]["packing"]["config"]["rows_per_microbatch"] == "1");
    CHECK(s["methods"]["packing"]["config"]["row_tokens"] == "1024");
    const std::string csv = pc::to_csv(rep);
    CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 5);
    const std::string html = pc::to_html(rep, {});
    CHECK(html.find("<svg") != std::string::npos);
    CHECK(html.find("<script") == std::string::npos);
    CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));  // no network reference but the SVG namespace
}

TEST_CASE("compare: infeasible methods are reported with their reason, not dropped") {
    const auto pool = cmp_pool(200, 5);
    pc::compare_options o;
    o.planner = cmp_options();
    o.planner.config.device_memory_mb = 12000;  // GPT-6.7B's model states alone need ~13.4 GB per device here
    o.settings = {{2048, 8192}};
    o.iterations = 1;
    o.knobs.packing_rows = {1};
    o.knobs.padding_mbs = {1};
    o.knobs.token_budgets = {2048};
    o.knobs.recompute = {pipeplan::recompute_mode::none};
    const auto rep = pc::run_compare(cmp_gpt(), pool, o);
    const auto j = pc::to_json(rep);
    for (const auto& m : rep.settings[0].methods) {
        CHECK_FALSE(m.feasible);
        CHECK_FALSE(m.reason.empty());
        CHECK(j["settings"][0]["methods"][std::string(pc::to_string(m.kind))]["tokens_per_s"].is_null());
    }
    CHECK(pc::to_table(rep).find("infeasible: ") != std::string::npos);
}
