// Transformer parts, their layer graph, and Merak-style sharding against brute force.
#include <doctest/doctest.h>

#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/partition.hpp"  // the umbrella: compiled here

using namespace pipeplan;
using namespace pipeplan::partition;

namespace {

/// A cost model with a time per component (the embedding unpriced, as in the profiles).
struct fixed_model {
    bool enc_dec = false;
    [[nodiscard]] layer_cost evaluate(const layer_query& q) const {
        layer_cost c;
        const double scale = q.mbs * q.seqlen_tokens / 1024.0;
        switch (q.comp) {
            case component::encoder: c.forward_ms = 1.0 * scale; c.backward_ms = 2.0 * scale; break;
            case component::decoder: c.forward_ms = 1.5 * scale; c.backward_ms = 3.0 * scale; break;
            case component::postprocess: c.forward_ms = 2.0 * scale; c.backward_ms = 2.5 * scale; break;
            case component::embedding:
                c.forward_ms = estimate<double>::failed(estimate_status::unsupported);
                c.backward_ms = estimate<double>::failed(estimate_status::unsupported);
                break;
        }
        return c;
    }
    [[nodiscard]] estimate<double> parameter_mb(component c, int, recompute_mode) const {
        return c == component::embedding ? 400.0 : c == component::decoder ? 300.0 : 200.0;
    }
    [[nodiscard]] bool is_encoder_decoder() const { return enc_dec; }
};

transformer_parts random_parts(std::mt19937_64& rng, int layers) {
    std::uniform_real_distribution<double> t(0.5, 10.0), p(1e6, 1e8);
    transformer_parts tp;
    tp.encoder_layers = layers;
    tp.parts.push_back({component::embedding, t(rng), t(rng), p(rng), 1});
    for (int i = 0; i < layers; ++i) tp.parts.push_back({component::encoder, t(rng), t(rng), p(rng), 1});
    tp.parts.push_back({component::postprocess, t(rng), t(rng), p(rng), 1});
    return tp;
}

/// Min over every composition of the layers into S non-empty stages of the max stage weight.
double brute_min_max(const std::vector<double>& w, int S) {
    double best = std::numeric_limits<double>::infinity();
    std::function<void(std::size_t, int, double)> go = [&](std::size_t from, int left, double worst) {
        if (left == 0) {
            if (from == w.size()) best = std::min(best, worst);
            return;
        }
        double sum = 0;
        for (std::size_t to = from; to + static_cast<std::size_t>(left - 1) < w.size(); ++to) {
            sum += w[to];
            go(to + 1, left - 1, std::max(worst, sum));
        }
    };
    go(0, S, 0);
    return best;
}

}  // namespace

TEST_CASE("transformer parts: decoder-only and encoder-decoder, priced by the model") {
    transformer_shape gpt = find_transformer_shape("gpt-6.7b");
    layer_query q;
    q.mbs = 2;
    q.seqlen_tokens = 1024;
    const auto t = transformer_layers(fixed_model{}, gpt, q);
    REQUIRE(t.parts.size() == 34);
    CHECK(t.layers() == 32);
    CHECK(t.parts[0].comp == component::embedding);
    CHECK(t.parts[0].time_ms() == 0.0);  // unpriced embedding costs nothing
    CHECK(t.parts[0].parameter_bytes == 400e6);
    CHECK(t.parts[1].time_ms() == doctest::Approx(6.0));
    CHECK(t.parts[1].activation_bytes == 2.0 * 2 * 1024 * 4096);
    CHECK(t.parts.back().time_ms() == doctest::Approx(9.0));
    const auto t5 = transformer_layers(fixed_model{true}, find_transformer_shape("t5-11b"), q);
    CHECK(t5.parts.size() == 1 + 24 + 1 + 24 + 1);
    CHECK(t5.decoder_layers == 24);
    // The chain graph: every part a node, PipeDream's optimizer runs on it.
    const auto g = transformer_layer_graph(t);
    CHECK(boost::num_vertices(g) == 34);
    CHECK(boost::num_edges(g) == 33);
    CHECK(g[0].id == "embedding");
    CHECK(g[33].id == "head");
    pipedream_options opt;
    opt.levels = {{4, 1e30}};
    opt.straight_pipeline = true;
    const auto r = optimize_pipedream(build_antichain_dag(g), opt);
    CHECK(r.levels[0].stages.size() == 4);
}

TEST_CASE("sharding: exact min-max by time and parameters equals brute force; layer counts") {
    std::mt19937_64 rng(3);
    for (int trial = 0; trial < 200; ++trial) {
        CAPTURE(trial);
        const int L = 1 + trial % 9, S = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(L));
        const auto t = random_parts(rng, L);
        std::vector<double> time, params;
        for (std::size_t i = 1; i + 1 < t.parts.size(); ++i) {
            time.push_back(t.parts[i].time_ms());
            params.push_back(t.parts[i].parameter_bytes);
        }
        time.front() += t.parts.front().time_ms();
        time.back() += t.parts.back().time_ms();
        params.front() += t.parts.front().parameter_bytes;
        params.back() += t.parts.back().parameter_bytes;
        const auto by_time = shard_transformer(t, S, shard_method::time);
        CHECK(by_time.bottleneck_ms() == doctest::Approx(brute_min_max(time, S)).epsilon(1e-12));
        const auto by_params = shard_transformer(t, S, shard_method::parameters);
        CHECK(*std::max_element(by_params.stage_parameter_bytes.begin(), by_params.stage_parameter_bytes.end()) ==
              doctest::Approx(brute_min_max(params, S)).epsilon(1e-12));
        const auto by_layers = shard_transformer(t, S, shard_method::layers);
        CHECK(by_layers.layers_per_stage == equal_layer_counts(L, S));
        const auto [lo, hi] = std::minmax_element(by_layers.layers_per_stage.begin(), by_layers.layers_per_stage.end());
        CHECK(*hi - *lo <= 1);                                                     // equal counts
        CHECK(std::is_sorted(by_layers.layers_per_stage.rbegin(), by_layers.layers_per_stage.rend()));  // remainder first
        for (const auto& r : {by_time, by_params, by_layers}) {
            REQUIRE(r.layers_per_stage.size() == static_cast<std::size_t>(S));
            int sum = 0;
            for (int n : r.layers_per_stage) {
                CHECK(n >= 1);
                sum += n;
            }
            CHECK(sum == L);
            CHECK(by_time.bottleneck_ms() <= r.bottleneck_ms() + 1e-9);
        }
        CHECK(*std::max_element(by_layers.layers_per_stage.begin(), by_layers.layers_per_stage.end()) -
                  *std::min_element(by_layers.layers_per_stage.begin(), by_layers.layers_per_stage.end()) <=
              1);
    }
    const auto t = random_parts(rng, 4);
    CHECK_THROWS_AS((void)shard_transformer(t, 5, shard_method::time), invalid_argument);
    CHECK_THROWS_AS((void)shard_transformer(t, 0, shard_method::time), invalid_argument);
    CHECK(parse_shard_method("time") == shard_method::time);
    CHECK_THROWS_AS((void)parse_shard_method("flops"), invalid_argument);
}

TEST_CASE("sharding: closed form with a heavy LM head; GPT-6.7B (analytic) never worse than uniform") {
    // 8 layers of 3 ms and a 4.5 ms head on 4 stages: uniform 2+2+2+2 -> 6 + 4.5 = 10.5 ms;
    // the best is 9 ms (three layers on one stage, one layer with the head).
    transformer_shape small = find_transformer_shape("gpt-6.7b");
    small.layers = 8;
    layer_query q;
    q.mbs = 1;
    q.seqlen_tokens = 1024;
    const auto t = transformer_layers(fixed_model{}, small, q);
    CHECK(shard_transformer(t, 4, shard_method::layers).bottleneck_ms() == doctest::Approx(10.5));
    const auto best = shard_transformer(t, 4, shard_method::time);
    CHECK(best.bottleneck_ms() == doctest::Approx(9.0));
    CHECK(best.layers_per_stage.back() == 1);

    const auto model = make_analytic_model("gpt-6.7b");
    q.seqlen_tokens = 2048;
    const auto gpt = transformer_layers(model, find_transformer_shape("gpt-6.7b"), q);
    for (int S : {4, 8}) {
        const auto uniform = shard_transformer(gpt, S, shard_method::layers);
        CHECK(uniform.layers_per_stage == std::vector<int>(static_cast<std::size_t>(S), 32 / S));
        CHECK(shard_transformer(gpt, S, shard_method::time).bottleneck_ms() <= uniform.bottleneck_ms());
    }
}
