// PipeDream's optimizer: the known VGG-16 result, PipeDream's own numbers on the reference
// graphs, and brute force over every partition and replication of small random graphs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/partition/pipedream.hpp"
#include "support.hpp"

using namespace pipeplan::partition;

namespace {

/// A random DAG of `n` layers: a chain plus random forward skip edges, random profiles.
layer_graph random_graph(std::mt19937_64& rng, int n, bool with_input) {
    std::uniform_real_distribution<double> ms(0.1, 20.0), bytes(1e5, 5e8), params(0, 2e8);
    std::bernoulli_distribution skip(0.3);
    layer_graph g;
    if (with_input) add_layer(g, layer_node{"in", "Input", 3.0, 0.0, {bytes(rng)}, 0.0, {}});
    for (int i = 0; i < n; ++i) {
        const auto v = add_layer(g, layer_node{"n" + std::to_string(i), "L", ms(rng), ms(rng), {bytes(rng)}, params(rng), {}});
        if (i == 0 && with_input) add_dependency(g, 0, v);
        if (i > 0) add_dependency(g, v - 1, v);
        for (int j = 0; j + 1 < i; ++j)
            if (skip(rng)) add_dependency(g, v - static_cast<layer_vertex>(i - j), v);
    }
    return g;
}

/// PipeDream's cost of one candidate: stages ending at positions `ends` with `reps` workers
/// (one level, so the first stage's sync is not divided further). NaN when over memory.
double candidate_time(const antichain_dag& dag, const std::vector<std::size_t>& ends, const std::vector<int>& reps,
                      const pipedream_options& opt) {
    const auto& s = dag.states;
    const std::size_t n = s.size();
    const int W = opt.levels[0].workers;
    const double B = opt.levels[0].bandwidth_bytes_per_s, c = opt.activation_compression;
    double t = 0;
    int used = 0;
    for (std::size_t q = 0; q < ends.size(); ++q) {
        const std::size_t j = ends[q];
        const auto range = [&](double antichain_state::*f) { return s[j].*f - (q > 0 ? s[ends[q - 1]].*f : 0.0); };
        const double r = reps[q];
        used += reps[q];
        const double par = range(&antichain_state::parameter_bytes);
        if (opt.memory_limit_bytes &&
            (range(&antichain_state::activation_bytes) + par) * std::ceil(double(W - used) / r) > *opt.memory_limit_bytes)
            return std::numeric_limits<double>::quiet_NaN();
        t = std::max(t, (range(&antichain_state::compute_ms) / 1e3 + 4 * (r - 1) * par / (B * r)) / r);
        if (q > 0) t = std::max(t, 2 * s[ends[q - 1]].output_activation_bytes / (B * r) / c);
        if (q > 0 && j + 1 < n) t = std::max(t, 2 * s[j].output_activation_bytes / (B * r) / c);
    }
    return t;
}

/// The best time over every chain of cuts in the antichain DAG and every replication that
/// uses exactly W workers (one each when straight).
double brute_force(const antichain_dag& dag, const pipedream_options& opt) {
    const std::size_t n = dag.states.size();
    const int W = opt.levels[0].workers;
    double best = std::numeric_limits<double>::quiet_NaN();
    std::vector<std::size_t> ends;
    std::vector<int> reps;
    std::function<void(int)> extend = [&](int left) {
        const std::size_t last = ends.back();
        if (last == n - 1) {
            if (left != 0) return;
            const double t = candidate_time(dag, ends, reps, opt);
            if (!std::isnan(t) && (std::isnan(best) || t < best)) best = t;
            return;
        }
        for (std::size_t next = last + 1; next < n; ++next) {
            const auto& anc = dag.states[next].ancestors;
            if (std::find(anc.begin(), anc.end(), last) == anc.end()) continue;
            for (int r = 1; r <= (opt.straight_pipeline ? 1 : left); ++r) {
                ends.push_back(next);
                reps.push_back(r);
                extend(left - r);
                ends.pop_back();
                reps.pop_back();
            }
        }
    };
    for (std::size_t first = 0; first < n; ++first)
        for (int r = 1; r <= (opt.straight_pipeline ? 1 : W); ++r) {
            ends = {first};
            reps = {r};
            extend(W - r);
        }
    return best;
}

pipedream_options one_level(int workers, double bw) {
    pipedream_options o;
    o.levels = {{workers, bw}};
    return o;
}

}  // namespace

TEST_CASE("PipeDream: VGG-16 on 4 workers at 1e9 B/s is (0,17)x3 + (17,40)x1, 0.2055 s, 2.84x" * PIPEPLAN_NEEDS_DATA()) {
    const auto g = read_layer_graph(*pipeplan::test::shared_data_dir() / "layer_graphs" / "vgg16.txt");
    const auto dag = build_antichain_dag(g);
    CHECK(dag.states.size() == 40);
    const auto r = optimize_pipedream(dag, one_level(4, 1e9));
    REQUIRE(r.levels.size() == 1);
    const auto& st = r.levels[0].stages;
    REQUIRE(st.size() == 2);
    CHECK(st[0].start == 0);
    CHECK(st[0].end == 17);
    CHECK(st[0].replicas == 3);
    CHECK(st[1].start == 17);
    CHECK(st[1].end == 40);
    CHECK(st[1].replicas == 1);
    // PipeDream prints: (0, 17) 0.514238 3 / (17, 40) 0.158297 1; Time per stage in pipeline:
    // 0.205520896; Throughput increase (compared to (4)-machine DP): 2.837698712640879.
    CHECK(st[0].compute_ms * 3 == doctest::Approx(514.238).epsilon(1e-12));
    CHECK(st[1].compute_ms == doctest::Approx(158.297).epsilon(1e-12));
    CHECK(r.time_per_minibatch_ms == doctest::Approx(205.520896).epsilon(1e-12));
    CHECK(r.data_parallel_ms == doctest::Approx(583.206382).epsilon(1e-12));
    CHECK(r.speedup_over_dp() == doctest::Approx(2.837698712640879).epsilon(1e-12));
    CHECK(r.levels[0].bottleneck_stage_ms == doctest::Approx(r.time_per_minibatch_ms).epsilon(1e-12));
}

namespace {

/// PipeDream's own output (optimizer_graph_hierarchical.py under Debian's python3): time per
/// minibatch and data parallelism. Stage positions where partitions tie are compared in
/// pipedream_ties.cpp.
struct pipedream_golden {
    const char* model;
    std::vector<int> workers;
    std::vector<double> bandwidths;
    bool straight;
    double compression;
    double memory_bytes;  // 0: no limit
    double time_per_minibatch_s, data_parallel_s;
};

const std::vector<pipedream_golden> goldens{
    {"alexnet", {4}, {1e+09}, false, 1, 0, 0.034217141333333333, 0.20463276999999999},
    {"alexnet", {16}, {1e+09}, false, 1, 0, 0.018874367999999999, 0.062614600000000006},
    {"alexnet", {4,4}, {1e+10,1e+09}, false, 1, 0, 0.018874367999999999, 0.055740755500000003},
    {"alexnet", {4}, {1e+09}, true, 1, 0, 0.066453503999999997, 0.20463276999999999},
    {"alexnet", {8}, {1e+09}, false, 4, 0, 0.015737779555555553, 0.11759159499999999},
    {"alexnet", {4}, {1e+09}, false, 1, 2e+09, 0.034217141333333333, 0.20463276999999999},
    {"vgg16", {4}, {1e+09}, false, 1, 0, 0.20552089600000001, 0.58320638199999997},
    {"vgg16", {16}, {1e+09}, false, 1, 0, 0.056529767384615383, 0.17174363500000001},
    {"vgg16", {4,4}, {1e+10,1e+09}, false, 1, 0, 0.06974994146666666, 0.15617841129999999},
    {"vgg16", {4}, {1e+09}, true, 1, 0, 0.41104179200000002, 0.58320638199999997},
    {"vgg16", {8}, {1e+09}, false, 4, 0, 0.102760448, 0.32619257699999998},
    {"vgg16", {4}, {1e+09}, false, 1, 2e+09, 0.58320638199999997, 0.58320638199999997},
    {"resnet18", {4}, {1e+09}, false, 1, 0, 0.100004036, 0.100004036},
    {"resnet18", {16}, {1e+09}, false, 1, 0, 0.025690112000000001, 0.0271927925},
    {"resnet18", {4,4}, {1e+10,1e+09}, false, 1, 0, 0.025246633999999987, 0.025877722399999994},
    {"resnet18", {4}, {1e+09}, true, 1, 0, 0.20160099999999997, 0.10000403599999999},
    {"resnet18", {8}, {1e+09}, false, 4, 0, 0.038535168000000002, 0.052924395999999999},
    {"resnet18", {4}, {1e+09}, false, 1, 2e+09, 0.10000403599999999, 0.10000403599999999},
    {"resnet50", {4}, {1e+09}, false, 1, 0, 0.16288092400000001, 0.187525846},
    {"resnet50", {16}, {1e+09}, false, 1, 0, 0.047801345306122456, 0.051673405000000006},
    {"resnet50", {4,4}, {1e+10,1e+09}, false, 1, 0, 0.047042023999999988, 0.048798238899999999},
    {"resnet50", {4}, {1e+09}, true, 1, 0, 0.25814899999999996, 0.187525846},
    {"resnet50", {8}, {1e+09}, false, 4, 0, 0.062784839111111115, 0.10015218099999999},
    {"resnet50", {4}, {1e+09}, false, 1, 2e+09, 0.187525846, 0.187525846},
    {"densenet121", {4}, {1e+09}, false, 1, 0, 0.08997599999999967, 0.10547531799999993},
    {"densenet121", {16}, {1e+09}, false, 1, 0, 0.024545866666666666, 0.02786486499999999},
};

}  // namespace

TEST_CASE("PipeDream: its own numbers on the reference CNNs" * PIPEPLAN_NEEDS_DATA()) {
    for (const auto& gd : goldens) {
        const std::string model = gd.model;
        CAPTURE(model);
        CAPTURE(gd.workers.size());
        CAPTURE(gd.workers.front());
        CAPTURE(gd.straight);
        CAPTURE(gd.compression);
        CAPTURE(gd.memory_bytes);
        const auto g = read_layer_graph(*pipeplan::test::shared_data_dir() / "layer_graphs" / (std::string(gd.model) + ".txt"));
        const auto dag = build_antichain_dag(g);
        pipedream_options opt;
        for (std::size_t l = 0; l < gd.workers.size(); ++l) opt.levels.push_back({gd.workers[l], gd.bandwidths[l]});
        opt.straight_pipeline = gd.straight;
        opt.activation_compression = gd.compression;
        if (gd.memory_bytes > 0) opt.memory_limit_bytes = gd.memory_bytes;
        const auto r = optimize_pipedream(dag, opt);
        CHECK(r.time_per_minibatch_ms == doctest::Approx(1e3 * gd.time_per_minibatch_s).epsilon(1e-9));
        CHECK(r.data_parallel_ms == doctest::Approx(1e3 * gd.data_parallel_s).epsilon(1e-9));
        // Each level's stages cover every state and use all its workers once per stage above.
        for (std::size_t l = 0; l < r.levels.size(); ++l) {
            int used = 0;
            for (const auto& s : r.levels[l].stages) used += s.replicas;
            const std::size_t above = l + 1 < r.levels.size() ? r.levels[l + 1].stages.size() : 1;
            CHECK(used == r.levels[l].workers * static_cast<int>(above));
            CHECK(r.levels[l].stages.back().end == dag.states.size());
        }
    }
}

TEST_CASE("PipeDream: the dynamic program equals brute force on small random graphs") {
    std::mt19937_64 rng(20261122);
    int cases = 0;
    for (int trial = 0; trial < 300; ++trial) {
        const int n = 2 + trial % 5;
        const auto g = random_graph(rng, n, trial % 3 == 0);
        const auto dag = build_antichain_dag(g);
        auto opt = one_level(1 + static_cast<int>(rng() % 4), std::uniform_real_distribution<double>(1e8, 1e11)(rng));
        opt.straight_pipeline = trial % 4 == 1;
        if (trial % 5 == 2) opt.activation_compression = 3.5;
        if (trial % 7 == 3) opt.memory_limit_bytes = std::uniform_real_distribution<double>(5e8, 3e9)(rng);
        CAPTURE(trial);
        const double expect = brute_force(dag, opt);
        if (std::isnan(expect)) {
            CHECK_THROWS_AS((void)optimize_pipedream(dag, opt), pipeplan::error);
            continue;
        }
        const auto r = optimize_pipedream(dag, opt);
        CHECK(r.time_per_minibatch_ms == doctest::Approx(1e3 * expect).epsilon(1e-12));
        // The reported stages cover the states, use every worker and cost what the DP says.
        const auto& st = r.levels[0].stages;
        std::vector<std::size_t> ends;
        std::vector<int> reps;
        int workers = 0;
        for (std::size_t q = 0; q < st.size(); ++q) {
            CHECK(st[q].start == (q == 0 ? 0 : st[q - 1].end));
            ends.push_back(st[q].end - 1);
            reps.push_back(st[q].replicas);
            workers += st[q].replicas;
            if (opt.straight_pipeline) CHECK(st[q].replicas == 1);
        }
        CHECK(st.back().end == dag.states.size());
        CHECK(workers == opt.levels[0].workers);
        CHECK(candidate_time(dag, ends, reps, opt) == doctest::Approx(expect).epsilon(1e-12));
        ++cases;
    }
    CHECK(cases > 200);
}

TEST_CASE("PipeDream: closed forms on a chain") {
    // Four equal layers, free communication: 4 workers -> 4 stages of one layer, or one stage
    // replicated 4 times; both 1/4 of the total.
    layer_graph g;
    for (int i = 0; i < 4; ++i) {
        add_layer(g, layer_node{"n" + std::to_string(i), "L", 100.0, 200.0, {1.0}, 0.0, {}});
        if (i > 0) add_dependency(g, static_cast<layer_vertex>(i - 1), static_cast<layer_vertex>(i));
    }
    const auto dag = build_antichain_dag(g);
    auto opt = one_level(4, 1e18);
    CHECK(optimize_pipedream(dag, opt).time_per_minibatch_ms == doctest::Approx(300.0));
    CHECK(optimize_pipedream(dag, opt).data_parallel_ms == doctest::Approx(300.0));
    opt.straight_pipeline = true;
    const auto r = optimize_pipedream(dag, opt);
    CHECK(r.time_per_minibatch_ms == doctest::Approx(300.0));
    CHECK(r.levels[0].stages.size() == 4);
    opt.levels[0].workers = 5;  // more stages than states
    CHECK_THROWS_AS((void)optimize_pipedream(dag, opt), pipeplan::error);
    opt.levels[0].workers = 0;
    CHECK_THROWS_AS((void)optimize_pipedream(dag, opt), pipeplan::invalid_argument);
}

TEST_CASE("PipeDream: stage ids written into the graph follow the stages") {
    std::mt19937_64 rng(7);
    auto g = random_graph(rng, 6, true);
    const auto dag = build_antichain_dag(g);
    auto opt = one_level(3, 1e12);
    opt.straight_pipeline = true;
    const auto r = optimize_pipedream(dag, opt);
    assign_stages(g, dag, r);
    for (auto v : boost::make_iterator_range(boost::vertices(g))) {
        REQUIRE(g[v].stage_id.has_value());
        CHECK(*g[v].stage_id < 3);
    }
    // an edge never goes back to an earlier stage
    for (auto [e, end] = boost::edges(g); e != end; ++e)
        CHECK(*g[boost::source(*e, g)].stage_id <= *g[boost::target(*e, g)].stage_id);
    CHECK(format_layer_graph(g).find(" -- stage_id=2") != std::string::npos);
}
