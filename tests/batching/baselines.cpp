// The baselines (fixed mbs in dataset order and sorted, token budget, pack-then-fixed) and
// data-parallel balancing.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "batching/common.hpp"
#include "batching/table_model.hpp"
#include "pipeplan/batching.hpp"

namespace pb = pipeplan::batching;
using pipeplan::test::table_cost_model;
using pipeplan::test::check_split_result;

namespace {

std::vector<pb::sample> batch_of(std::uint64_t seed, int n, int max_in = 500) {
    std::mt19937_64 rng(seed);
    std::vector<pb::sample> b;
    for (int i = 0; i < n; ++i) b.push_back({1 + static_cast<int>(rng() % static_cast<unsigned>(max_in)), static_cast<int>(rng() % 40)});
    return b;
}

pb::pipeline_config config() { return pipeplan::test::make_config(4, 2, 8000); }

}  // namespace

TEST_CASE("fixed mbs in dataset order: consecutive groups of mbs, padded to the longest") {
    table_cost_model model;
    const auto b = batch_of(1, 23);
    const auto r = pb::split_fixed_mbs(model, b, config(), 5);
    CHECK(r.method == "fixed");
    REQUIRE(r.microbatches.size() == 5);
    CHECK(r.microbatches[0] == std::vector<int>{0, 1, 2, 3, 4});
    CHECK(r.microbatches[4] == std::vector<int>{20, 21, 22});
    const auto shapes = pb::padded_shapes(b, {}, false);
    for (std::size_t k = 0; k < 5; ++k) CHECK(r.per_microbatch[k].shape == pb::shape_of(r.microbatches[k], shapes));
    check_split_result(r, b.size());
    CHECK_THROWS_AS((void)pb::split_fixed_mbs(model, b, config(), 0), pipeplan::invalid_argument);
}

TEST_CASE("fixed mbs sorted: groups follow the descending order and never pad more than dataset order") {
    table_cost_model model;
    model.time_noise = 0;
    const auto b = batch_of(2, 64);
    const auto shapes = pb::padded_shapes(b, {}, false);
    const auto sorted = pb::split_fixed_mbs(model, b, config(), 4, pb::fixed_order::sorted);
    const auto dataset = pb::split_fixed_mbs(model, b, config(), 4, pb::fixed_order::dataset);
    CHECK(sorted.method == "fixed-sorted");
    check_split_result(sorted, b.size());
    long long pad_sorted = 0, pad_dataset = 0;
    for (const auto& m : sorted.per_microbatch) pad_sorted += static_cast<long long>(m.shape.mbs) * m.shape.seqlen_tokens;
    for (const auto& m : dataset.per_microbatch) pad_dataset += static_cast<long long>(m.shape.mbs) * m.shape.seqlen_tokens;
    CHECK(pad_sorted <= pad_dataset);
    for (std::size_t k = 1; k < sorted.per_microbatch.size(); ++k)
        CHECK(sorted.per_microbatch[k].shape.seqlen_tokens <= sorted.per_microbatch[k - 1].shape.seqlen_tokens);
    // The exact split over the same order is at least as good as any fixed size under the same rung.
    pb::split_options same;
    same.limit_ladder = {sorted.limit};
    same.recompute_ladder = {sorted.recompute};
    same.order = pb::ordering_method::sorted;
    CHECK(pb::exact_split(model, b, config(), same).objective_ms <= sorted.objective_ms * (1 + 1e-12));
}

TEST_CASE("token budget: padded tokens per micro-batch stay within the budget") {
    table_cost_model model;
    for (const bool enc_dec : {false, true}) {
        model.encoder_decoder = enc_dec;
        const auto b = batch_of(3, 80);
        const auto shapes = pb::padded_shapes(b, {}, enc_dec);
        for (long long budget : {256LL, 1000LL, 4096LL}) {
            const auto r = pb::split_token_budget(model, b, config(), budget);
            CHECK(r.method == "tokens");
            check_split_result(r, b.size());
            for (const auto& m : r.per_microbatch) {
                const long long padded = static_cast<long long>(m.shape.mbs) * (m.shape.seqlen_tokens + m.shape.dec_seqlen_tokens);
                if (m.shape.mbs > 1) CHECK(padded <= budget);
            }
        }
    }
    CHECK_THROWS_AS((void)pb::split_token_budget(model, batch_of(3, 3), config(), 0), pipeplan::invalid_argument);
}

TEST_CASE("pack then fixed mbs: Megatron-style rows never exceed the pack length") {
    table_cost_model model;
    const auto b = batch_of(4, 100, 300);
    const auto shapes = pb::padded_shapes(b, {}, false);
    for (int sep : {0, 1}) {
        const auto r = pb::split_pack_fixed(model, b, config(), 2, 512, sep);
        CHECK(r.method == "packing");
        check_split_result(r, b.size());
        std::vector<int> concatenated;
        for (const auto& m : r.per_microbatch) {
            CHECK(m.shape.seqlen_tokens == 512);
            CHECK(m.shape.mbs == static_cast<int>(m.rows.size()));
            CHECK(m.shape.mbs <= 2);
            for (const auto& row : m.rows) {
                CHECK(pb::row_tokens(row, shapes, sep) <= 512);
                concatenated.insert(concatenated.end(), row.begin(), row.end());
            }
        }
        std::vector<int> want(b.size());
        std::iota(want.begin(), want.end(), 0);
        CHECK(concatenated == want);  // dataset order
    }
    // Default pack length: the longest padded sample.
    const auto d = pb::split_pack_fixed(model, b, config(), 1);
    const int longest = std::max_element(shapes.begin(), shapes.end(), [](auto& x, auto& y) {
                            return x.seqlen_tokens < y.seqlen_tokens;
                        })->seqlen_tokens;
    CHECK(d.per_microbatch[0].shape.seqlen_tokens == longest);
    CHECK_THROWS_AS((void)pb::split_pack_fixed(model, b, config(), 2, 100), pipeplan::invalid_argument);  // a sample > row
    CHECK_THROWS_AS((void)pb::split_pack_fixed(model, b, config(), 0, 512), pipeplan::invalid_argument);
}

TEST_CASE("pack then fixed mbs, hand-computed: decoder-only rows and encoder-decoder rows filling both parts") {
    table_cost_model model;
    model.time_noise = 0;
    // Lengths 300, 200, 100, 450, 60 into rows of 512: [300 200] [100] [450 60]: 3 rows, 1110 real tokens.
    const std::vector<pb::sample> b{{290, 10}, {200, 0}, {90, 10}, {400, 50}, {60, 0}};
    const auto r = pb::split_pack_fixed(model, b, config(), 2, 512);
    REQUIRE(r.per_microbatch.size() == 2);
    CHECK(r.per_microbatch[0].rows == std::vector<std::vector<int>>{{0, 1}, {2}});
    CHECK(r.per_microbatch[1].rows == std::vector<std::vector<int>>{{3, 4}});
    CHECK(r.per_microbatch[0].shape == pb::microbatch_shape{2, 512, 0});  // priced as 2 rows of 512, not 3 samples
    CHECK(r.per_microbatch[1].shape == pb::microbatch_shape{1, 512, 0});
    // Encoder-decoder: encoder rows of 512 and decoder rows of the longest decoder length (2 extra tokens each).
    table_cost_model t5 = model;
    t5.encoder_decoder = true;
    const std::vector<pb::sample> e{{300, 20}, {200, 40}, {100, 6}, {10, 30}};  // decoder 22, 42, 8, 32
    const auto q = pb::split_pack_fixed(t5, e, config(), 4, 512);
    REQUIRE(q.per_microbatch.size() == 1);
    // Decoder part = 48 (42 rounded): 22 + 8 fit, 42 starts a row, 32 would make 74 > 48.
    CHECK(q.per_microbatch[0].rows == std::vector<std::vector<int>>{{0}, {1}, {2, 3}});
    CHECK(q.per_microbatch[0].shape == pb::microbatch_shape{3, 512, 48});
}

TEST_CASE("baselines report the micro-batch that fits under no rung, and by how much") {
    table_cost_model model;
    model.stored_mb_per_token = 0.1;
    const auto b = batch_of(5, 40);
    auto cfg = config();
    cfg.device_memory_mb = 1000;  // 800 MB available; 40 samples of up to 504 tokens need more
    try {
        (void)pb::split_fixed_mbs(model, b, cfg, 40);
        FAIL("expected split_error");
    } catch (const pb::split_error& e) {
        CHECK((e.kind() == pb::split_failure::peak_memory || e.kind() == pb::split_failure::stored_memory));
        CHECK(e.required() > e.limit());
        CHECK(e.unit() == "MB");
        CHECK(std::string(e.what()).find("micro-batch 0") != std::string::npos);
    }
    // A small fixed size fits, under recomputation if needed.
    const auto ok = pb::split_fixed_mbs(model, b, cfg, 1);
    check_split_result(ok, b.size());
}

TEST_CASE("data-parallel balancing: a partition, ordered per rank, never worse than LPT") {
    std::mt19937_64 rng(17);
    for (int trial = 0; trial < 300; ++trial) {
        const int n = static_cast<int>(rng() % 60);
        const int dp = 1 + static_cast<int>(rng() % 8);
        std::vector<double> t;
        std::uniform_real_distribution<double> u(0.5, 100.0);
        for (int i = 0; i < n; ++i) t.push_back(trial % 3 == 0 ? std::round(u(rng)) : u(rng));
        const auto best = pb::balance_data_parallel(t, dp);
        const auto lpt = pb::balance_lpt(t, dp);
        const auto kk = pb::balance_karmarkar_karp(t, dp);
        for (const auto* a : {&best, &lpt, &kk}) {
            REQUIRE(a->groups.size() == static_cast<std::size_t>(dp));
            std::vector<int> all;
            for (std::size_t g = 0; g < a->groups.size(); ++g) {
                CHECK(std::is_sorted(a->groups[g].begin(), a->groups[g].end()));
                double s = 0;
                for (int i : a->groups[g]) s += t[static_cast<std::size_t>(i)];
                CHECK(a->group_ms[g] == doctest::Approx(s));
                all.insert(all.end(), a->groups[g].begin(), a->groups[g].end());
            }
            std::sort(all.begin(), all.end());
            std::vector<int> want(static_cast<std::size_t>(n));
            std::iota(want.begin(), want.end(), 0);
            CHECK(all == want);
        }
        CHECK(best.max_ms() <= lpt.max_ms());
        CHECK(best.max_ms() <= kk.max_ms());
        const double total = std::accumulate(t.begin(), t.end(), 0.0);
        CHECK(best.max_ms() >= total / dp - 1e-9);
    }
    // A case where LPT is not optimal: {3,3,2,2,2} on 2 ranks (LPT 7, optimum 6).
    const std::vector<double> t{3, 3, 2, 2, 2};
    CHECK(pb::balance_lpt(t, 2).max_ms() == 7);
    CHECK(pb::balance_data_parallel(t, 2).max_ms() == 6);
    CHECK_THROWS_AS((void)pb::balance_data_parallel(t, 0), pipeplan::invalid_argument);
}

TEST_CASE("balance_result fills dp_groups over the micro-batches") {
    table_cost_model model;
    const auto b = batch_of(6, 90);
    auto cfg = config();
    cfg.dp = 3;
    auto r = pb::exact_split(model, b, cfg);
    CHECK(r.dp == 3);
    pb::balance_result(r);
    REQUIRE(r.dp_groups.size() == 3);
    std::size_t total = 0;
    for (const auto& g : r.dp_groups) total += g.size();
    CHECK(total == r.microbatches.size());
}
