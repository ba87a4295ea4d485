// Non-uniform layers per stage: batching::layout_from_layer_counts and its pricing.
#include <doctest/doctest.h>

#include <vector>

#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/stage_cost.hpp"
#include "table_model.hpp"

using namespace pipeplan;
using namespace pipeplan::batching;

TEST_CASE("layout_from_layer_counts: decoder-only and encoder-decoder layouts") {
    const auto d = layout_from_layer_counts({3, 2, 4}, false);
    REQUIRE(d.size() == 3);
    CHECK(d[0] == stage_layout{3, 0, true, false});
    CHECK(d[1] == stage_layout{2, 0, false, false});
    CHECK(d[2] == stage_layout{4, 0, false, true});
    // 8 layers, 4 encoder: chunk 1 holds encoder layers 3 and 4 and decoder layer 1 (+ its embedding).
    const auto e = layout_from_layer_counts({2, 3, 3}, true);
    CHECK(e[0] == stage_layout{2, 0, true, false});
    CHECK(e[1] == stage_layout{2, 1, true, false});
    CHECK(e[2] == stage_layout{0, 3, false, true});
    // The uniform layout, spelled out, is the uniform layout.
    pipeline_config u;
    u.stages = 4;
    u.layers_per_stage = 6;
    CHECK(layout_from_layer_counts({6, 6, 6, 6}, true) == u.layout(true));
    CHECK(layout_from_layer_counts({6, 6, 6, 6}, false) == u.layout(false));
    CHECK_THROWS_AS((void)layout_from_layer_counts({}, false), invalid_argument);
    CHECK_THROWS_AS((void)layout_from_layer_counts({2, 0}, false), invalid_argument);
    CHECK_THROWS_AS((void)layout_from_layer_counts({1}, true), invalid_argument);
}

TEST_CASE("v_layout_of: each device's even layer count in two halves placed as a V") {
    // decoder-only 4, 2, 6: halves 2 1 3 | 3 1 2 (chunk d and 2S - 1 - d on device d)
    const auto v = v_layout_of(layout_from_layer_counts({4, 2, 6}, false));
    REQUIRE(v.has_value());
    CHECK(*v == layout_from_layer_counts({2, 1, 3, 3, 1, 2}, false));
    CHECK(v->front().embedding);
    CHECK(v->back().postprocess);
    // the uniform layout: the uniform layout of half the layers on twice the chunks
    pipeline_config u;
    u.stages = 4;
    u.layers_per_stage = 6;
    pipeline_config h = u;
    h.layers_per_stage = 3;
    h.virtual_chunks = 2;
    for (const bool ed : {false, true}) CHECK(v_layout_of(u.layout(ed)) == h.layout(ed));
    // encoder-decoder 4, 4 with 3 encoder layers: halves 2 2 | 2 2, the boundary inside chunk 1
    const auto e = v_layout_of(layout_from_layer_counts({4, 4}, true, 3));
    REQUIRE(e.has_value());
    CHECK(*e == layout_from_layer_counts({2, 2, 2, 2}, true, 3));
    CHECK((*e)[1] == stage_layout{1, 1, true, false});
    // no V: an odd count, one layer, or a layout that is not layout_from_layer_counts()'s
    CHECK_FALSE(v_layout_of(layout_from_layer_counts({4, 3}, false)).has_value());
    CHECK_FALSE(v_layout_of(layout_from_layer_counts({2, 1, 1}, false)).has_value());
    auto odd_flags = layout_from_layer_counts({4, 4}, false);
    odd_flags[1].embedding = true;
    CHECK_FALSE(v_layout_of(odd_flags).has_value());
    CHECK_FALSE(v_layout_of({}).has_value());
}

TEST_CASE("non-uniform stages: the bottleneck device is the one with most layers") {
    test::table_cost_model model;
    model.time_noise = 0;
    pipeline_config cfg;
    cfg.stages = 3;
    cfg.layers_per_stage = 1;
    cfg.device_memory_mb = 1e9;
    const microbatch_shape s{2, 512, 0};
    layer_query q;
    q.mbs = 2;
    q.seqlen_tokens = 512;
    const auto layer = model.evaluate(q);
    const double per_layer = layer.forward_ms.value() + layer.backward_ms.value();
    cfg.chunks = layout_from_layer_counts({2, 7, 3}, false);
    const stage_cost_evaluator ev(model, cfg, accounting_mode::pipeplan);
    const auto c = ev.evaluate(s, recompute_mode::none);
    REQUIRE(c.ok());
    CHECK(c.value().time_ms == doctest::Approx(7 * per_layer));
}
