// batching/ordering.hpp: orderings are permutations; sorted, tour and decoder-band orders.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/batching/ordering.hpp"
#include "pipeplan/batching/sample.hpp"

namespace pb = pipeplan::batching;

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
