// Partition tier benchmarks (targets):
//   BM_PipeDream/vgg16/16            antichain DAG + hierarchical dynamic program, VGG-16, 16 workers   <= 10 ms
//   BM_PipeDream/<largest CNN>/16    the largest reference graphs on 16 workers
//   BM_PipeDreamResNet/<blocks>/<W>  a synthetic ResNet (33 blocks = ResNet-101's size,
//                                    ~346 layers) on W workers                           <= 100 ms at 33/16
//   BM_Shard/96/16                   exact time-balanced sharding, 96 layers, 16 stages      <= 1 ms
//   BM_RR/...                        1F1B-RR simulation of an optimizer partition
// Growth with nodes and workers: BM_PipeDreamResNet over blocks {4, 8, 16, 33} x workers {4, 8, 16, 32}.
// Run: build/benchmarks/bench_partition --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/partition/one_f_one_b_rr.hpp"
#include "pipeplan/partition/pipedream.hpp"
#include "pipeplan/partition/transformer.hpp"
#include "support.hpp"

namespace {

namespace pp = pipeplan::partition;

/// A ResNet-shaped layer graph: stem, `blocks` bottleneck blocks (three conv/bn/relu triples
/// with a skip edge into an add, a projection on every stage's first block), head. 33 blocks in
/// stages of 3, 4, 23, 3 is ResNet-101.
pp::layer_graph synthetic_resnet(int blocks, std::uint64_t seed) {
    pipeplan::splitmix64 rng(seed);
    const auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * static_cast<double>(rng() % 100000) / 1e5; };
    pp::layer_graph g;
    int id = 0;
    const auto layer = [&](const char* desc, double params) {
        return pp::add_layer(g, pp::layer_node{"node" + std::to_string(++id), desc, uniform(0.1, 3.0),
                                               uniform(0.2, 6.0), {uniform(1e6, 2e8)}, params, {}});
    };
    auto last = pp::add_layer(g, pp::layer_node{"node" + std::to_string(++id), "Input", 5.0, 0.0, {1.5e8}, 0.0, {}});
    const auto chain = [&](const char* desc, double params) {
        const auto v = layer(desc, params);
        pp::add_dependency(g, last, v);
        last = v;
        return v;
    };
    for (const char* d : {"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d"}) chain(d, 1e4);
    const int per_stage[4] = {3, 4, 23, 3};
    int in_stage = 0, stage = 0;
    for (int b = 0; b < blocks; ++b) {
        const auto input = last;
        for (int t = 0; t < 3; ++t) {
            chain("Conv2d", uniform(1e5, 1e7));
            chain("BatchNorm2d", 1e4);
            if (t < 2) chain("ReLU", 0);
        }
        auto skip = input;
        if (in_stage == 0) {  // projection shortcut
            const auto c = layer("Conv2d", uniform(1e5, 1e7));
            pp::add_dependency(g, input, c);
            skip = layer("BatchNorm2d", 1e4);
            pp::add_dependency(g, c, skip);
        }
        const auto add = chain("Add", 0);
        pp::add_dependency(g, skip, add);
        chain("ReLU", 0);
        if (++in_stage == per_stage[stage % 4]) {
            in_stage = 0;
            ++stage;
        }
    }
    for (const char* d : {"AdaptiveAvgPool2d", "View", "Linear"}) chain(d, d[0] == 'L' ? 8e6 : 0);
    return g;
}

pp::pipedream_options workers(int w) {
    pp::pipedream_options o;
    o.levels = {{w, 1e9}};
    return o;
}

/// Times the whole optimizer (antichain DAG + dynamic program) on `g`.
void time_optimizer(benchmark::State& st, const pp::layer_graph& g, const pp::pipedream_options& opt) {
    std::size_t states = 0;
    for (auto _ : st) {
        const auto dag = pp::build_antichain_dag(g);
        auto r = pp::optimize_pipedream(dag, opt);
        states = r.states;
        benchmark::DoNotOptimize(r.time_per_minibatch_ms);
    }
    st.counters["layers"] = static_cast<double>(boost::num_vertices(g));
    st.counters["states"] = static_cast<double>(states);
}

void BM_PipeDream(benchmark::State& st, const char* model) {
    const auto dir = pipeplan::test::shared_data_dir();
    if (!dir) {
        st.SkipWithError("../shared/data/layer_graphs not found (set PIPEPLAN_DATA_DIR)");
        return;
    }
    const auto g = pp::read_layer_graph(*dir / "layer_graphs" / (std::string(model) + ".txt"));
    const auto opt = workers(static_cast<int>(st.range(0)));
    try {
        (void)pp::build_antichain_dag(g);
    } catch (const pipeplan::error& e) {  // Inception's branches: too many antichains
        st.SkipWithError(e.what());
        return;
    }
    time_optimizer(st, g, opt);
}
BENCHMARK_CAPTURE(BM_PipeDream, vgg16, "vgg16")->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PipeDream, resnet50, "resnet50")->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PipeDream, inception_v3, "inception_v3")->Arg(16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PipeDream, densenet121, "densenet121")->Arg(16)->Unit(benchmark::kMillisecond);

void BM_PipeDreamResNet(benchmark::State& st) {
    const auto g = synthetic_resnet(static_cast<int>(st.range(0)), 101);
    const auto opt = workers(static_cast<int>(st.range(1)));
    time_optimizer(st, g, opt);
}
BENCHMARK(BM_PipeDreamResNet)
    ->ArgsProduct({{4, 8, 16, 33}, {4, 8, 16, 32}})
    ->Unit(benchmark::kMillisecond);

// The antichain DAG alone and the dynamic program alone (ResNet-101 size, 16 workers).
void BM_AntichainDag(benchmark::State& st) {
    const auto g = synthetic_resnet(33, 101);
    for (auto _ : st) benchmark::DoNotOptimize(pp::build_antichain_dag(g).states.size());
}
BENCHMARK(BM_AntichainDag)->Unit(benchmark::kMillisecond);

void BM_DpOnly(benchmark::State& st) {
    const auto dag = pp::build_antichain_dag(synthetic_resnet(33, 101));
    const auto opt = workers(static_cast<int>(st.range(0)));
    for (auto _ : st) benchmark::DoNotOptimize(pp::optimize_pipedream(dag, opt).time_per_minibatch_ms);
}
BENCHMARK(BM_DpOnly)->Arg(16)->Unit(benchmark::kMillisecond);

void BM_Shard(benchmark::State& st) {
    pp::transformer_parts t;
    pipeplan::splitmix64 rng(5);
    t.encoder_layers = static_cast<int>(st.range(0));
    t.parts.push_back({pipeplan::component::embedding, 0.5, 0.5, 4e8, 1});
    for (int i = 0; i < t.encoder_layers; ++i)
        t.parts.push_back({pipeplan::component::encoder, 10.0 + static_cast<double>(rng() % 100) / 50, 20.0, 4e8, 1});
    t.parts.push_back({pipeplan::component::postprocess, 12.0, 24.0, 4e8, 1});
    const int S = static_cast<int>(st.range(1));
    for (auto _ : st) benchmark::DoNotOptimize(pp::shard_transformer(t, S, pp::shard_method::time).bottleneck_ms());
}
BENCHMARK(BM_Shard)->Args({96, 16})->Unit(benchmark::kMicrosecond);

void BM_RR(benchmark::State& st) {
    const auto dag = pp::build_antichain_dag(synthetic_resnet(33, 101));
    const auto r = pp::optimize_pipedream(dag, workers(static_cast<int>(st.range(0))));
    const auto stages = pp::rr_stages(dag, r.levels[0]);
    for (auto _ : st) benchmark::DoNotOptimize(pp::simulate_1f1b_rr(stages).steady_time_per_minibatch_ms);
}
BENCHMARK(BM_RR)->Arg(16)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
