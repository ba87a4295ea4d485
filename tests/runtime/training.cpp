// End to end: plans of every schedule, executed by the CPU backend on the tiny model, give the
// reference's loss and gradients (1e-9 relative, double), for dp 1 and 2, S up to 8 and
// variable-size micro-batches; three optimizer steps keep matching; faults end steps cleanly.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/runtime/cpu/plans.hpp"
#include "pipeplan/runtime/cpu/split.hpp"
#include "pipeplan/runtime/cpu/trainer.hpp"
#include "batching/real_batches.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace pipeplan::runtime::cpu;
using namespace std::chrono_literals;

namespace {

model_config test_model() {
    model_config c;
    c.vocab = 16;
    c.hidden = 6;
    c.ffn = 8;
    c.blocks = 16;  // enough for S = 8 with 2 chunks
    c.seed = 7;
    return c;
}

struct test_batch {
    std::vector<std::size_t> lengths;
    replica_split split;
};

/// `samples` random lengths in [1, 12], sorted into micro-batches of 1-3 samples (variable
/// sizes and paddings), dealt to `dp` replicas.
test_batch random_batch(std::size_t samples, std::size_t dp, std::uint64_t seed) {
    splitmix64 rng(seed);
    test_batch b;
    for (std::size_t i = 0; i < samples; ++i) b.lengths.push_back(1 + rng.below(12));
    std::vector<std::uint32_t> order(samples);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) { return b.lengths[x] < b.lengths[y]; });
    b.split.resize(dp);
    std::size_t i = 0, k = 0;
    while (i < samples) {
        const std::size_t n = std::min<std::size_t>(1 + rng.below(3), samples - i);
        b.split[k % dp].push_back(std::vector<std::uint32_t>(order.begin() + long(i), order.begin() + long(i + n)));
        i += n;
        ++k;
    }
    return b;
}

std::vector<std::uint64_t> all_ids(std::size_t n) {
    std::vector<std::uint64_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0u);
    return ids;
}

const std::vector<schedule::schedule_name> every_schedule = {
    schedule::schedule_name::gpipe,      schedule::schedule_name::one_f_one_b, schedule::schedule_name::interleaved,
    schedule::schedule_name::adaptive,   schedule::schedule_name::zb_h1,       schedule::schedule_name::merak_early,
    schedule::schedule_name::merak_last, schedule::schedule_name::merak_critical};

}  // namespace

TEST_CASE("cpu backend: every schedule's plan gives the reference's loss and gradients (dp 1 and 2, S up to 8)") {
    const model_config c = test_model();
    const model_params init = init_params(c);
    int runs = 0;
    for (std::size_t dp : {1, 2})
        for (std::size_t devices : {2, 4, 8})
            for (auto name : every_schedule) {
                CAPTURE(dp);
                CAPTURE(devices);
                CAPTURE(schedule::to_string(name));
                const test_batch b = random_batch(devices * 3 * dp, dp, 100 * dp + devices);
                const step_result ref = reference_step(c, init, all_ids(b.lengths.size()), b.lengths);
                tiny_plan_options o;
                o.schedule = name;
                o.devices = devices;
                const plan::execution_plan p = plan_tiny(c, b.split, b.lengths, o);
                cpu_cluster cluster(c, p.programs.size(), sgd{0.1}, {10s});
                const iteration_result r = cluster.run(rank_plans(p), b.lengths);
                CHECK(std::abs(r.loss - ref.loss) <= 1e-9 * ref.loss);
                CHECK(max_relative_error(r.grads, ref.grads, whole_model(init)) <= 1e-9);
                CHECK(r.replica_divergence == 0.0);  // the all-reduce hands out identical bits
                ++runs;
            }
    CHECK(runs == 48);
}

TEST_CASE("cpu backend: real batches split exactly (and with a fixed mbs) train like the reference" * PIPEPLAN_NEEDS_DATA()) {
    const model_config c = test_model();
    const model_params init = init_params(c);
    for (std::uint64_t seed : {1, 2})
        for (std::size_t dp : {1, 2})
            for (std::size_t mbs : {0, 3}) {
                CAPTURE(seed);
                CAPTURE(dp);
                CAPTURE(mbs);
                const auto samples = test::draw_batch("superni_gpt.csv", 9000, seed);
                REQUIRE(samples.size() >= 8);
                tiny_split_options so;
                so.devices = 4;
                so.dp = dp;
                so.mbs = mbs;
                so.max_seqlen_tokens = 24;
                const tiny_batch b = split_for_tiny(c, samples, so);
                std::size_t mbs_total = 0, samples_total = 0, sizes_seen = 0;
                std::vector<std::size_t> sizes;
                for (const auto& r : b.split)
                    for (const auto& m : r) {
                        ++mbs_total;
                        samples_total += m.size();
                        sizes.push_back(m.size());
                    }
                std::sort(sizes.begin(), sizes.end());
                sizes_seen = std::size_t(std::unique(sizes.begin(), sizes.end()) - sizes.begin());
                CHECK(samples_total == samples.size());
                if (mbs == 0) CHECK(sizes_seen > 1);  // the exact split makes variable-size micro-batches
                const step_result ref = reference_step(c, init, all_ids(b.lengths_tokens.size()), b.lengths_tokens);
                for (auto name : every_schedule) {
                    CAPTURE(schedule::to_string(name));
                    tiny_plan_options o;
                    o.schedule = name;
                    o.devices = 4;
                    const plan::execution_plan p = plan_tiny(c, b.split, b.lengths_tokens, o);
                    cpu_cluster cluster(c, p.programs.size(), sgd{0.1}, {10s});
                    const iteration_result r = cluster.run(rank_plans(p), b.lengths_tokens);
                    CHECK(std::abs(r.loss - ref.loss) <= 1e-9 * ref.loss);
                    CHECK(max_relative_error(r.grads, ref.grads, whole_model(init)) <= 1e-9);
                }
                (void)mbs_total;
            }
}

TEST_CASE("cpu backend: a plan with a micro-batch dropped or run twice does not match") {
    // The comparison is sharp: leaving one micro-batch out (a lost micro-batch) moves the loss.
    const model_config c = test_model();
    const model_params init = init_params(c);
    test_batch b = random_batch(12, 1, 3);
    const step_result ref = reference_step(c, init, all_ids(b.lengths.size()), b.lengths);
    b.split[0].pop_back();
    tiny_plan_options o;
    o.devices = 4;
    const plan::execution_plan p = plan_tiny(c, b.split, b.lengths, o);
    cpu_cluster cluster(c, p.programs.size(), sgd{0.1}, {10s});
    const iteration_result r = cluster.run(rank_plans(p), b.lengths);
    CHECK(std::abs(r.loss - ref.loss) > 1e-6 * ref.loss);
}

TEST_CASE("cpu backend: three iterations with SGD and with Adam keep matching the reference's parameters") {
    const model_config c = test_model();
    for (int use_adam = 0; use_adam < 2; ++use_adam)
        for (auto name : {schedule::schedule_name::interleaved, schedule::schedule_name::zb_h1, schedule::schedule_name::merak_early}) {
            CAPTURE(use_adam);
            CAPTURE(schedule::to_string(name));
            adam a;
            a.lr = 0.01;
            const optimizer opt = use_adam ? optimizer(a) : optimizer(sgd{0.2});
            optimizer ref_opt = opt;
            model_params ref_params = init_params(c);
            tiny_plan_options o;
            o.schedule = name;
            o.devices = 4;
            cpu_cluster cluster(c, 8, opt, {10s});
            for (std::uint64_t it = 0; it < 3; ++it) {
                const test_batch b = random_batch(14, 2, 50 + it);  // a new batch every iteration
                o.iteration = it;
                const step_result ref = reference_step(c, ref_params, all_ids(b.lengths.size()), b.lengths);
                std::visit([&](auto& x) { x.step(ref_params, ref.grads, std::vector{whole_model(ref_params)}); }, ref_opt);
                const iteration_result r = cluster.run(rank_plans(plan_tiny(c, b.split, b.lengths, o)), b.lengths);
                CHECK(std::abs(r.loss - ref.loss) <= 1e-9 * ref.loss);
                for (std::size_t rank = 0; rank < cluster.ranks(); ++rank)
                    for (const auto& l : cluster.rank(rank).owned())
                        CHECK(max_relative_error(cluster.rank(rank).params(), ref_params, l) <= 1e-9);
            }
        }
}

TEST_CASE("cpu backend: a handler that throws ends its rank's step with that error and aborts the others") {
    const model_config c = test_model();
    const test_batch b = random_batch(12, 1, 9);
    tiny_plan_options o;
    o.devices = 4;
    auto plans = rank_plans(plan_tiny(c, b.split, b.lengths, o));
    // Rank 2's copy of the micro-batch table says the last micro-batch is padded to 1 token,
    // shorter than its samples: the data handler of its forward throws.
    const std::size_t last = b.split[0].size() - 1;
    REQUIRE(padded_length(b.split[0][last], b.lengths) > 1);
    plans[2].header.microbatches[last].shape.seqlen = 1;
    cpu_cluster cluster(c, 4, sgd{0.1}, {20s});
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS((void)cluster.run(plans, b.lengths), pipeplan::error);
    CHECK(std::chrono::steady_clock::now() - start < 10s);
    CHECK(cluster.errors[2].find("does not fit the padded length") != std::string::npos);
    CHECK(cluster.errors[2].find("rank 2: instruction #") != std::string::npos);
    for (std::size_t r : {0, 1, 3}) {
        CAPTURE(r);
        CHECK(cluster.errors[r].find("aborted") != std::string::npos);
    }
}

TEST_CASE("cpu backend: a corrupted plan is rejected by the validator before anything runs") {
    const model_config c = test_model();
    const test_batch b = random_batch(12, 1, 11);
    tiny_plan_options o;
    o.devices = 2;
    plan::execution_plan p = plan_tiny(c, b.split, b.lengths, o);
    // Drop a receive's wait on rank 1: the executor's own check refuses the rank's plan.
    auto& prog = p.programs[1].instructions;
    prog.erase(std::find_if(prog.begin(), prog.end(), [](const auto& i) { return i.kind == plan::instr_kind::recv_activation_wait; }));
    CHECK_FALSE(plan::validate(p).ok());
    cpu_cluster cluster(c, 2, sgd{0.1}, {2s});
    CHECK_THROWS_AS((void)cluster.run(rank_plans(p), b.lengths), rejected_plan_error);
    CHECK(cluster.rank(1).loss() == 0.0);
}
