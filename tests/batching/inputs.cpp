// Batch input: padded shapes (rounding, truncation, decoder extra tokens), the batch CSV reader,
// the pipeline configuration and the orderings.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/batching/ordering.hpp"
#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/sample.hpp"

namespace pb = pipeplan::batching;

TEST_CASE("padded shapes: decoder-only sums input and target, rounds up to 8") {
    const std::vector<pb::sample> b{{100, 9}, {1, 0}, {8, 0}, {0, 3}};
    const auto s = pb::padded_shapes(b, {}, false);
    REQUIRE(s.size() == 4);
    CHECK(s[0] == pb::sample_shape{112, 0, 109});
    CHECK(s[1] == pb::sample_shape{8, 0, 1});
    CHECK(s[2] == pb::sample_shape{8, 0, 8});
    CHECK(s[3] == pb::sample_shape{8, 0, 3});
}

TEST_CASE("padded shapes: encoder-decoder adds the decoder's start/end tokens before rounding") {
    const std::vector<pb::sample> b{{100, 6}, {17, 0}, {5, 7}};
    const auto s = pb::padded_shapes(b, {}, true);
    CHECK(s[0] == pb::sample_shape{104, 8, 100, 8});   // 6 + 2 = 8
    CHECK(s[1] == pb::sample_shape{24, 8, 17, 2});     // 0 + 2 -> 8
    CHECK(s[2] == pb::sample_shape{8, 16, 5, 9});      // 7 + 2 = 9 -> 16
    pb::length_rules none;
    none.decoder_extra_tokens = 0;
    none.round_to_tokens = 1;
    const auto r = pb::padded_shapes(std::vector<pb::sample>{{100, 6}}, none, true);
    CHECK(r[0] == pb::sample_shape{100, 6, 100, 6});
    CHECK_THROWS_AS((void)pb::padded_shapes(std::vector<pb::sample>{{3, 0}}, none, true), pipeplan::invalid_argument);
}

TEST_CASE("padded shapes: truncation at the maximum length") {
    pb::length_rules r;
    r.max_seqlen_tokens = 100;  // not a multiple of 8: rounding never exceeds it
    r.max_dec_seqlen_tokens = 16;
    const auto d = pb::padded_shapes(std::vector<pb::sample>{{500, 20}, {95, 0}, {50, 0}}, r, false);
    CHECK(d[0] == pb::sample_shape{100, 0, 100});
    CHECK(d[1] == pb::sample_shape{96, 0, 95});
    CHECK(d[2] == pb::sample_shape{56, 0, 50});
    const auto e = pb::padded_shapes(std::vector<pb::sample>{{500, 40}}, r, true);
    CHECK(e[0] == pb::sample_shape{100, 16, 100, 16});
}

TEST_CASE("padded shapes: invalid samples and rules name the sample") {
    CHECK_THROWS_WITH_AS((void)pb::padded_shapes(std::vector<pb::sample>{{1, 1}, {-1, 2}}, {}, false),
                         doctest::Contains("sample 1"), pipeplan::invalid_argument);
    CHECK_THROWS_WITH_AS((void)pb::padded_shapes(std::vector<pb::sample>{{0, 0}}, {}, false),
                         doctest::Contains("sample 0"), pipeplan::invalid_argument);
    pb::length_rules bad;
    bad.round_to_tokens = 0;
    CHECK_THROWS_AS((void)pb::padded_shapes(std::vector<pb::sample>{{1, 1}}, bad, false), pipeplan::invalid_argument);
}

TEST_CASE("shape_of pads to the longest member") {
    const std::vector<pb::sample_shape> s{{64, 8, 60}, {32, 24, 30}, {16, 16, 10}};
    const std::vector<int> ids{0, 1, 2};
    CHECK(pb::shape_of(ids, s) == pb::microbatch_shape{3, 64, 24});
}

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

TEST_CASE("orderings are permutations; sorted is descending; the tour starts at the largest shape") {
    std::mt19937_64 rng(5);
    std::vector<pb::sample> b;
    for (int i = 0; i < 300; ++i) b.push_back({1 + static_cast<int>(rng() % 900), static_cast<int>(rng() % 200)});
    for (const bool enc_dec : {false, true}) {
        const auto shapes = pb::padded_shapes(b, {}, enc_dec);
        for (auto m : {pb::ordering_method::automatic, pb::ordering_method::sorted, pb::ordering_method::lexicographic,
                       pb::ordering_method::tour, pb::ordering_method::dataset}) {
            auto o = pb::order_samples(shapes, enc_dec, m);
            auto sorted = o;
            std::sort(sorted.begin(), sorted.end());
            for (int i = 0; i < 300; ++i) CHECK(sorted[static_cast<std::size_t>(i)] == i);
            if (m == pb::ordering_method::dataset) CHECK(o == sorted);
            if (!enc_dec && m != pb::ordering_method::dataset)
                for (std::size_t i = 1; i < o.size(); ++i)
                    CHECK(shapes[static_cast<std::size_t>(o[i])].seqlen_tokens <=
                          shapes[static_cast<std::size_t>(o[i - 1])].seqlen_tokens);
        }
        if (enc_dec) {
            const auto tour = pb::order_samples(shapes, true, pb::ordering_method::tour);
            const auto lex = pb::order_samples(shapes, true, pb::ordering_method::lexicographic);
            CHECK(shapes[static_cast<std::size_t>(tour[0])] .seqlen_tokens == shapes[static_cast<std::size_t>(lex[0])].seqlen_tokens);
            // The tour is no longer than the lexicographic path (L1 over consecutive shapes).
            const auto length = [&](const std::vector<int>& o) {
                long long d = 0;
                for (std::size_t i = 1; i < o.size(); ++i) {
                    const auto& x = shapes[static_cast<std::size_t>(o[i - 1])];
                    const auto& y = shapes[static_cast<std::size_t>(o[i])];
                    d += std::abs(x.seqlen_tokens - y.seqlen_tokens) + std::abs(x.dec_seqlen_tokens - y.dec_seqlen_tokens);
                }
                return d;
            };
            CHECK(length(tour) <= length(lex));
        }
    }
    CHECK(pb::parse_ordering_method("tour") == pb::ordering_method::tour);
    CHECK_THROWS_AS((void)pb::parse_ordering_method("random"), pipeplan::invalid_argument);
}

TEST_CASE("decoder bands: a permutation, bands of decoder length descending, encoder direction alternating") {
    std::mt19937_64 rng(11);
    std::vector<pb::sample> b;
    for (int i = 0; i < 400; ++i) b.push_back({1 + static_cast<int>(rng() % 900), static_cast<int>(rng() % 300)});
    const auto shapes = pb::padded_shapes(b, {}, true);
    for (const int width : {1, 48, 64, 1000}) {
        const auto o = pb::decoder_band_order(shapes, width);
        auto sorted = o;
        std::sort(sorted.begin(), sorted.end());
        for (int i = 0; i < 400; ++i) REQUIRE(sorted[static_cast<std::size_t>(i)] == i);
        const auto& first = shapes[static_cast<std::size_t>(o.front())];
        const int top = first.dec_seqlen_tokens / width;
        for (std::size_t i = 1; i < o.size(); ++i) {
            const auto& x = shapes[static_cast<std::size_t>(o[i - 1])];
            const auto& y = shapes[static_cast<std::size_t>(o[i])];
            const int bx = x.dec_seqlen_tokens / width, by = y.dec_seqlen_tokens / width;
            CHECK(by <= bx);
            if (bx == by && x.seqlen_tokens != y.seqlen_tokens)
                CHECK(((top - bx) % 2 == 0) == (x.seqlen_tokens > y.seqlen_tokens));
        }
        CHECK(o == pb::decoder_band_order(shapes, width));  // deterministic
    }
    // Width 1000 > every decoder length: one band, i.e. encoder length descending.
    const auto one = pb::decoder_band_order(shapes, 1000);
    for (std::size_t i = 1; i < one.size(); ++i)
        CHECK(shapes[static_cast<std::size_t>(one[i])].seqlen_tokens <= shapes[static_cast<std::size_t>(one[i - 1])].seqlen_tokens);
    CHECK_THROWS_AS((void)pb::decoder_band_order(shapes, 0), pipeplan::invalid_argument);
    const auto cands = pb::automatic_candidate_orders(shapes);
    REQUIRE(cands.size() == 5);
    CHECK(cands[0].ids == pb::order_samples(shapes, true, pb::ordering_method::lexicographic));
    CHECK(cands[2].ids == pb::order_samples(shapes, true, pb::ordering_method::tour));
    CHECK(cands[4].ids == pb::decoder_band_order(shapes, 64));
}
