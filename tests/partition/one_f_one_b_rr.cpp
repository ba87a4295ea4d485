// 1F1B-RR with weight stashing: steady state against the optimizer, memory, staleness, flush.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "pipeplan/partition/one_f_one_b_rr.hpp"
#include "support.hpp"

using namespace pipeplan::partition;

namespace {

layer_graph random_chainy_graph(std::mt19937_64& rng, int n) {
    std::uniform_real_distribution<double> ms(0.5, 30.0), bytes(1e5, 5e8), params(0, 2e8);
    std::bernoulli_distribution skip(0.25);
    layer_graph g;
    for (int i = 0; i < n; ++i) {
        const auto v = add_layer(g, layer_node{"n" + std::to_string(i), "L", ms(rng), ms(rng), {bytes(rng)}, params(rng), {}});
        if (i > 0) add_dependency(g, v - 1, v);
        if (i > 1 && skip(rng)) add_dependency(g, v - 2, v);
    }
    return g;
}

/// Optimizer on free communication, then the simulator on its partition.
void check_against_optimizer(const antichain_dag& dag, int workers, bool straight) {
    pipedream_options opt;
    opt.levels = {{workers, 1e30}};
    opt.straight_pipeline = straight;
    const auto r = optimize_pipedream(dag, opt);
    const auto stages = rr_stages(dag, r.levels[0]);
    const auto sim = simulate_1f1b_rr(stages);
    CHECK(sim.workers == workers);
    CHECK(sim.predicted_time_per_minibatch_ms == doctest::Approx(r.time_per_minibatch_ms).epsilon(1e-9));
    CHECK(sim.steady_time_per_minibatch_ms == doctest::Approx(r.time_per_minibatch_ms).epsilon(1e-9));
    for (std::size_t k = 0; k < stages.size(); ++k) {
        CHECK(sim.stages[k].max_in_flight == sim.stages[k].warmup + 1);
        CHECK(sim.stages[k].weight_versions == sim.stages[k].warmup + 1);
        CHECK(sim.stages[k].staleness == sim.stages[k].warmup);
    }
}

}  // namespace

TEST_CASE("1F1B-RR: steady state equals the optimizer's prediction with free communication") {
    std::mt19937_64 rng(11);
    for (int trial = 0; trial < 60; ++trial) {
        CAPTURE(trial);
        const auto g = random_chainy_graph(rng, 4 + trial % 9);
        const auto dag = build_antichain_dag(g);
        const int workers = 1 + trial % 8;
        if (trial % 3 == 0 && static_cast<std::size_t>(workers) > dag.states.size()) continue;
        check_against_optimizer(dag, workers, trial % 3 == 0);
    }
}

TEST_CASE("1F1B-RR: the reference CNNs on 4, 8 and 16 workers" * PIPEPLAN_NEEDS_DATA()) {
    for (const char* m : {"vgg16", "resnet18", "alexnet"}) {
        CAPTURE(m);
        const auto g = read_layer_graph(*pipeplan::test::shared_data_dir() / "layer_graphs" / (std::string(m) + ".txt"));
        const auto dag = build_antichain_dag(g);
        for (int w : {4, 8, 16}) {
            CAPTURE(w);
            check_against_optimizer(dag, w, false);
        }
        check_against_optimizer(dag, 4, true);
    }
}

TEST_CASE("1F1B-RR: closed forms on a straight pipeline of equal stages") {
    const int S = 4;
    const double f = 2, b = 3, P = 1000, A = 10;
    std::vector<rr_stage> st(S, rr_stage{f, b, 1, 0, 0, P, A});
    const auto async = simulate_1f1b_rr(st);
    CHECK(async.noam == S);
    CHECK(async.steady_time_per_minibatch_ms == doctest::Approx(f + b));
    for (int k = 0; k < S; ++k) {
        CHECK(async.stages[k].warmup == S - 1 - k);
        CHECK(async.stages[k].weight_versions == S - k);  // one stashed version per minibatch in flight
        CHECK(async.stages[k].memory_bytes == doctest::Approx((S - k) * (P + A)));
        CHECK(async.stages[k].staleness == S - 1 - k);
    }
    CHECK(async.vertical_sync_staleness == S - 1);
    // Flushed: each group of S minibatches takes (S + S - 1)(f + b); one weight version.
    rr_options flush;
    flush.flush = true;
    const auto sync = simulate_1f1b_rr(st, flush);
    CHECK(sync.steady_time_per_minibatch_ms == doctest::Approx((2.0 * S - 1) * (f + b) / S));
    for (int k = 0; k < S; ++k) {
        CHECK(sync.stages[k].weight_versions == 1);
        CHECK(sync.stages[k].staleness == 0);
        CHECK(sync.stages[k].memory_bytes == doctest::Approx(P + (S - k) * A));
    }
}

TEST_CASE("1F1B-RR: round robin over replicas and NOAM") {
    // 3 replicas of a 6 ms stage feeding one 2 ms stage: NOAM = ceil(4 / 3) = 2.
    std::vector<rr_stage> st{{2, 4, 3, 0, 0, 100, 1}, {1, 1, 1, 0, 0, 100, 1}};
    const auto r = simulate_1f1b_rr(st);
    CHECK(r.noam == 2);
    CHECK(r.stages[0].warmup == 1);
    CHECK(r.stages[1].warmup == 0);
    CHECK(r.steady_time_per_minibatch_ms == doctest::Approx(2.0));
    CHECK(r.predicted_time_per_minibatch_ms == doctest::Approx(2.0));
    CHECK_THROWS_AS((void)simulate_1f1b_rr({}), pipeplan::invalid_argument);
    st[0].replicas = 0;
    CHECK_THROWS_AS((void)simulate_1f1b_rr(st), pipeplan::invalid_argument);
}
