// The bridge from a split to a schedule scenario (bridge/split_to_scenario.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "pipeplan/batching.hpp"
#include "pipeplan/bridge/split_to_scenario.hpp"
#include "pipeplan/schedule.hpp"
#include "batching/table_model.hpp"

namespace pb = pipeplan::batching;
namespace ps = pipeplan::schedule;
using pipeplan::test::table_cost_model;

namespace {
std::vector<pb::sample> make_batch(std::uint64_t seed, int n) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> len(5.0, 0.8);
    std::vector<pb::sample> b;
    for (int i = 0; i < n; ++i) {
        pb::sample s;
        s.input_tokens = std::clamp(static_cast<int>(len(rng)), 1, 2000);
        s.target_tokens = std::clamp(static_cast<int>(len(rng) / 8), 1, 500);
        b.push_back(s);
    }
    return b;
}
}  // namespace

TEST_CASE("to_scenario: chunk costs add up to the split's micro-batch costs") {
    for (const bool enc_dec : {false, true}) {
        for (const int chunks : {1, 2}) {
            table_cost_model model;
            model.encoder_decoder = enc_dec;
            model.time_noise = 0.1;
            pb::pipeline_config cfg;
            cfg.stages = 4;
            cfg.virtual_chunks = chunks;
            cfg.layers_per_stage = 2;
            cfg.device_memory_mb = 8000;
            const auto batch = make_batch(7 + static_cast<std::uint64_t>(chunks), 120);
            const auto split = pb::exact_split(model, batch, cfg);
            const ps::scenario sc = pipeplan::bridge::make_scenario_from_split(model, split, cfg, {.hidden_size = 64});
            INFO("enc_dec " << enc_dec << " chunks " << chunks);
            REQUIRE(sc.stages == static_cast<std::size_t>(cfg.stages * chunks));
            REQUIRE(sc.microbatches == split.per_microbatch.size());
            CHECK_NOTHROW(sc.validate());
            for (std::size_t j = 0; j < sc.microbatches; ++j) {
                // Per device (chunks k with k mod S = d): the sums are the split's t and stored.
                std::vector<double> t(static_cast<std::size_t>(cfg.stages)), st(t.size());
                for (std::size_t k = 0; k < sc.stages; ++k) {
                    t[k % t.size()] += sc.fwd(j, k) + sc.bwd(j, k);
                    st[k % t.size()] += sc.stored(j, k);
                    CHECK(sc.peak(j, k) >= sc.stored(j, k));
                }
                const auto& rec = split.per_microbatch[j];
                CHECK(*std::max_element(t.begin(), t.end()) == doctest::Approx(rec.cost.time_ms));
                CHECK(*std::max_element(st.begin(), st.end()) == doctest::Approx(rec.cost.stored_mb));
                CHECK(sc.activation(j) ==
                      doctest::Approx(rec.shape.mbs * rec.shape.seqlen_tokens * 64 * 2.0 / 1e6));
            }
            // The scenario simulates: 1F1B (C = 1) or interleaved 1F1B (C = 2) respects the bound.
            const ps::simulation_result r =
                chunks == 1 ? ps::simulate(sc, ps::one_f_one_b{}) : ps::simulate(sc, ps::interleaved_1f1b{2});
            CHECK(r.makespan_ms >= r.lower_bound_ms * (1 - 1e-9));
            CHECK(r.makespan_ms >= split.tmax_ms);
        }
    }
}

TEST_CASE("to_scenario: model states per chunk and errors") {
    table_cost_model model;  // encoder 10 MB, embedding 5 MB (fp16) at tp 1
    pb::pipeline_config cfg;
    cfg.stages = 2;
    cfg.layers_per_stage = 3;
    cfg.device_memory_mb = 8000;
    const auto batch = make_batch(3, 40);
    const auto split = pb::exact_split(model, batch, cfg);
    const auto sc = pipeplan::bridge::make_scenario_from_split(model, split, cfg);
    REQUIRE(sc.model_state_mb.size() == 2);
    // chunk 0: embedding + 3 layers; chunk 1: 3 layers + LM head (tied embedding copy); × 8.
    CHECK(sc.model_state_mb[0] == doctest::Approx((5.0 + 30.0) * 8));
    CHECK(sc.model_state_mb[1] == doctest::Approx((5.0 + 30.0) * 8));
    CHECK(sc.activation_mb.empty());  // no hidden size: messages are pure dependencies

    pb::split_options dyn;
    dyn.accounting = pb::accounting_mode::dynapipe;
    const auto dsplit = pb::exact_split(model, batch, cfg, dyn);
    CHECK_THROWS_WITH_AS((void)pipeplan::bridge::make_scenario_from_split(model, dsplit, cfg),
                         doctest::Contains("'dynapipe' accounting"), pipeplan::invalid_argument);
    pb::split_result empty;
    CHECK_THROWS_AS((void)pipeplan::bridge::make_scenario_from_split(model, empty, cfg), pipeplan::invalid_argument);
}
