// batching/sample.hpp: padded shapes (rounding, truncation, decoder extra tokens) and the
// shape of a micro-batch.
#include <doctest/doctest.h>

#include <string>
#include <vector>

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
