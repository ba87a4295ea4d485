// Typed errors: empty batch, a sample longer than the model supports, model states that do not
// fit, no feasible split; nothing partial is returned.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "batching/common.hpp"
#include "batching/table_model.hpp"
#include "pipeplan/batching.hpp"

namespace pb = pipeplan::batching;
using pipeplan::test::table_cost_model;

namespace {
pb::pipeline_config two_stage_config() { return pipeplan::test::make_config(2, 2, 8000); }
}  // namespace

TEST_CASE("empty batch") {
    table_cost_model model;
    const std::vector<pb::sample> none;
    try {
        (void)pb::exact_split(model, none, two_stage_config());
        FAIL("expected split_error");
    } catch (const pb::split_error& e) {
        CHECK(e.kind() == pb::split_failure::empty_batch);
        CHECK(std::string(e.what()).find("no samples") != std::string::npos);
    }
    CHECK_THROWS_AS((void)pb::split_fixed_mbs(model, none, two_stage_config(), 2), pb::split_error);
    CHECK_THROWS_AS((void)pb::split_token_budget(model, none, two_stage_config(), 100), pb::split_error);
    CHECK_THROWS_AS((void)pb::split_pack_fixed(model, none, two_stage_config(), 2, 64), pb::split_error);
}

TEST_CASE("a sample longer than the model supports, and truncation as the remedy") {
    table_cost_model model;  // prices lengths up to 4096 tokens
    const std::vector<pb::sample> b{{100, 0}, {5000, 3}, {20, 1}};
    try {
        (void)pb::exact_split(model, b, two_stage_config());
        FAIL("expected split_error");
    } catch (const pb::split_error& e) {
        CHECK(e.kind() == pb::split_failure::sample_too_long);
        CHECK(e.sample() == 1);
        CHECK(e.required() == 5008);
        CHECK(e.limit() == 4096);
        CHECK(e.excess() == 912);
        CHECK(e.unit() == "tokens");
        CHECK(std::string(e.what()).find("over by 912 tokens") != std::string::npos);
    }
    pb::split_options opt;
    opt.lengths.max_seqlen_tokens = 4096;
    const auto r = pb::exact_split(model, b, two_stage_config(), opt);
    CHECK(r.microbatches.size() >= 1);
    // Encoder-decoder: the decoder length is checked too.
    table_cost_model t5;
    t5.encoder_decoder = true;
    const std::vector<pb::sample> long_target{{10, 2000}};
    try {
        (void)pb::exact_split(t5, long_target, two_stage_config());
        FAIL("expected split_error");
    } catch (const pb::split_error& e) {
        CHECK(e.kind() == pb::split_failure::sample_too_long);
        CHECK(std::string(e.what()).find("decoder length is 2008") != std::string::npos);
        CHECK(e.limit() == 1024);
    }
}

TEST_CASE("model states that do not fit in the device") {
    table_cost_model model;  // 10 MB per layer, 5 MB embedding: (2 x 10 + 5) x 8 = 200 MB
    auto cfg = two_stage_config();
    cfg.device_memory_mb = 150;
    try {
        (void)pb::exact_split(model, std::vector<pb::sample>{{10, 0}}, cfg);
        FAIL("expected split_error");
    } catch (const pb::split_error& e) {
        CHECK(e.kind() == pb::split_failure::model_states);
        CHECK(e.required() == doctest::Approx(200));
        CHECK(e.limit() == doctest::Approx(150));
        CHECK(std::string(e.what()).find("over by 50.0 MB") != std::string::npos);
    }
    // ZeRO-3 over dp = 4 shards everything: 50 MB.
    cfg.zero_stage = 3;
    cfg.dp = 4;
    const auto r = pb::exact_split(model, std::vector<pb::sample>{{10, 0}}, cfg);
    CHECK(r.model_state_mb == doctest::Approx(50));
    CHECK(r.available_mb == doctest::Approx(100));
}

TEST_CASE("no feasible split: the smallest sample's peak against the available memory") {
    table_cost_model model;
    model.stored_mb_per_token = 1.0;
    auto cfg = two_stage_config();
    cfg.device_memory_mb = 400;  // 200 MB model states; 200 MB available
    // One 512-token sample: stored 2 x 512 / 3 = 341 MB even under full recomputation.
    try {
        (void)pb::exact_split(model, std::vector<pb::sample>{{8, 0}, {512, 0}}, cfg);
        FAIL("expected split_error");
    } catch (const pb::split_error& e) {
        CHECK(e.kind() == pb::split_failure::peak_memory);
        CHECK(e.sample() == 1);
        CHECK(e.limit() == doctest::Approx(200));
        CHECK(e.required() > 341);
        CHECK(std::string(e.what()).find("full recomputation") != std::string::npos);
    }
}

TEST_CASE("invalid options are invalid_argument") {
    table_cost_model model;
    const std::vector<pb::sample> b{{10, 0}};
    pb::split_options o;
    o.preferred_fraction = 1.5;
    CHECK_THROWS_AS((void)pb::exact_split(model, b, two_stage_config(), o), pipeplan::invalid_argument);
    o = {};
    o.recompute_ladder.clear();
    CHECK_THROWS_AS((void)pb::exact_split(model, b, two_stage_config(), o), pipeplan::invalid_argument);
    o = {};
    o.relative_tolerance = -1;
    CHECK_THROWS_AS((void)pb::exact_split(model, b, two_stage_config(), o), pipeplan::invalid_argument);
    auto cfg = two_stage_config();
    cfg.tp = 0;
    CHECK_THROWS_AS((void)pb::exact_split(model, b, cfg), pipeplan::invalid_argument);
}
