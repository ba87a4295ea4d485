// End to end: plans of every schedule, executed by the CPU backend on the tiny model, give the
// reference's loss and gradients (1e-9 relative, double), for dp 1 and 2, S up to 8 and
// variable-size micro-batches; three optimizer steps keep matching; faults end steps cleanly.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/plan/deadlock.hpp"
#include "pipeplan/runtime/cpu/plans.hpp"
#include "pipeplan/runtime/cpu/split.hpp"
#include "pipeplan/runtime/cpu/trainer.hpp"
#include "batching/real_batches.hpp"
#include "plan/common.hpp"
#include "runtime/tiny_fixture.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace pipeplan::runtime::cpu;
using namespace std::chrono_literals;
using test::all_ids;
using test::pipeline_test_model;

namespace {

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

const std::vector<schedule::schedule_name> every_schedule = {
    schedule::schedule_name::gpipe,      schedule::schedule_name::one_f_one_b, schedule::schedule_name::interleaved,
    schedule::schedule_name::adaptive,   schedule::schedule_name::zb_h1,       schedule::schedule_name::merak_early,
    schedule::schedule_name::merak_last, schedule::schedule_name::merak_critical, schedule::schedule_name::zb_v,
    schedule::schedule_name::v_half,     schedule::schedule_name::v_min,          schedule::schedule_name::dualpipe_v};

}  // namespace

TEST_CASE("cpu backend: every schedule's plan gives the reference's loss and gradients (dp 1 and 2, S up to 8)") {
    const model_config c = pipeline_test_model();
    const model_params init = init_params(c);
    int runs = 0;
    for (std::size_t dp : {1, 2})
        for (std::size_t devices : {2, 4, 8})
            for (auto name : every_schedule) {
                CAPTURE(dp);
                CAPTURE(devices);
                CAPTURE(schedule::to_string(name));
                const test_batch b = random_batch((devices * 3 + 6) * dp, dp, 100 * dp + devices);  // M >= 4 per replica
                const step_result ref = reference_step(c, init, all_ids(b.lengths.size()), b.lengths);
                tiny_plan_options o;
                o.schedule = name;
                o.devices = devices;
                o.overlap_factor = 0.5;  // dualpipe-v's plans then hold overlap_f_b pairs
                const plan::execution_plan p = plan_tiny(c, b.split, b.lengths, o);
                if (name == schedule::schedule_name::dualpipe_v) {
                    std::size_t pairs = 0;
                    for (const auto& prog : p.programs)
                        for (const auto& x : prog.instructions) pairs += x.kind == plan::instr_kind::overlap_f_b;
                    CHECK(pairs > 0);
                }
                cpu_cluster cluster(c, p.programs.size(), sgd{0.1}, {10s});
                const iteration_result r = cluster.run(rank_plans(p), b.lengths);
                CHECK(std::abs(r.loss - ref.loss) <= 1e-9 * ref.loss);
                CHECK(max_relative_error(r.grads, ref.grads, whole_model(init)) <= 1e-9);
                CHECK(r.replica_divergence == 0.0);  // the all-reduce hands out identical bits
                ++runs;
            }
    CHECK(runs == 72);
}

TEST_CASE("cpu backend: real batches split exactly (and with a fixed mbs) train like the reference" * PIPEPLAN_NEEDS_DATA()) {
    const model_config c = pipeline_test_model();
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
                    o.overlap_factor = 0.5;
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
    const model_config c = pipeline_test_model();
    const model_params init = init_params(c);
    test_batch b = random_batch(12, 1, 3);
    const step_result ref = reference_step(c, init, all_ids(b.lengths.size()), b.lengths);
    b.split[0].pop_back();
    tiny_plan_options o;
    o.devices = 4;
    // A plan whose table misses samples is refused (the header rules name the table) ...
    CHECK_THROWS_WITH_AS((void)plan_tiny(c, b.split, b.lengths, o), doctest::Contains("sample_ids"), pipeplan::plan::plan_error);
    // ... and one planned for the remaining samples alone runs, but does not match the whole batch.
    std::vector<std::size_t> kept_lengths;
    for (auto& mb : b.split[0])
        for (auto& id : mb) {
            kept_lengths.push_back(b.lengths[id]);
            id = static_cast<std::uint32_t>(kept_lengths.size() - 1);
        }
    const plan::execution_plan p = plan_tiny(c, b.split, kept_lengths, o);
    cpu_cluster cluster(c, p.programs.size(), sgd{0.1}, {10s});
    const iteration_result r = cluster.run(rank_plans(p), kept_lengths);
    CHECK(std::abs(r.loss - ref.loss) > 1e-6 * ref.loss);
}

TEST_CASE("cpu backend: three iterations with SGD and with Adam keep matching the reference's parameters") {
    const model_config c = pipeline_test_model();
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

namespace {
/// The tiny model's plan of a seeded 12-sample batch on 2 devices (the rejection tests' plan).
struct two_device_job {
    model_config c = pipeline_test_model();
    test_batch b = random_batch(12, 1, 11);
    plan::execution_plan plan() const {
        tiny_plan_options o;
        o.devices = 2;
        return plan_tiny(c, b.split, b.lengths, o);
    }
};
}  // namespace

TEST_CASE("cpu backend: a corrupted plan is rejected by the validator before anything runs") {
    const two_device_job job;
    const model_config& c = job.c;
    const test_batch& b = job.b;
    plan::execution_plan p = job.plan();
    // Drop a receive's wait on rank 1: the executor's own check refuses the rank's plan.
    auto& prog = p.programs[1].instructions;
    prog.erase(std::find_if(prog.begin(), prog.end(), [](const auto& i) { return i.kind == plan::instr_kind::recv_activation_wait; }));
    CHECK_FALSE(plan::validate(p).ok());
    cpu_cluster cluster(c, 2, sgd{0.1}, {2s});
    CHECK_THROWS_AS((void)cluster.run(rank_plans(p), b.lengths), rejected_plan_error);
    CHECK(cluster.rank(1).loss() == 0.0);
}

TEST_CASE("cpu backend: a plan that deadlocks under its send rule is refused before anything runs") {
    // An interleaved plan on 4 devices (wrap-around messages) with a receive (start and wait)
    // moved earlier on one rank: the first such seeded move that the plan tier accepts under
    // buffered sends (rank rules, pairing, no deadlock) and that deadlocks under blocking starts.
    const two_device_job job;
    const model_config& c = job.c;
    const test_batch& b = job.b;
    tiny_plan_options o;
    o.schedule = schedule::schedule_name::interleaved;
    o.devices = 4;
    plan::execution_plan p = plan_tiny(c, b.split, b.lengths, o);
    cpu_cluster plain(c, 4, sgd{0.1}, {10s});
    const double loss = plain.run(rank_plans(p), b.lengths).loss;
    splitmix64 rng(9);
    bool moved = false;
    for (int t = 0; t < 20000 && !moved; ++t) {
        plan::execution_plan q = p;
        if (!test::move_receive_earlier(q, rng)) continue;
        q.header.sends = plan::send_rule::buffered;
        if (!plan::validate(q).ok() || plan::find_deadlock(q, plan::send_rule::blocking).empty()) continue;
        p = std::move(q);
        moved = true;
    }
    REQUIRE(moved);
    p.header.sends = plan::send_rule::buffered;
    cpu_cluster buffered(c, 4, sgd{0.1}, {10s});
    CHECK(buffered.run(rank_plans(p), b.lengths).loss == doctest::Approx(loss).epsilon(1e-12));
    p.header.sends = plan::send_rule::blocking;
    cpu_cluster blocking(c, 4, sgd{0.1}, {10s});
    CHECK_THROWS_WITH_AS((void)blocking.run(rank_plans(p), b.lengths),
                         doctest::Contains("the plan deadlocks under its send rule 'blocking': rank "),
                         rejected_plan_error);
    CHECK(blocking.rank(0).loss() == 0.0);
    CHECK(blocking.rank(1).loss() == 0.0);
}

namespace {
/// A rank that dies cannot warn anybody: its transport's abort does nothing.
struct dying_transport : thread_transport {
    using thread_transport::thread_transport;
    void abort(const std::string&) {}
};
struct rank_died : std::runtime_error {
    rank_died() : std::runtime_error("rank died") {}
};

/// Runs the 4 ranks of a tiny-model plan with real trainers; rank 2's third forward throws
/// rank_died. With `dies`, rank 2 cannot abort the others (a crashed process); otherwise its
/// executor aborts the step (a handler error). Returns each rank's error, prefixed by its type.
std::vector<std::string> run_with_fault(bool dies, timeout_ms timeout) {
    const model_config c = pipeline_test_model();
    const test_batch b = random_batch(16, 1, 21);
    tiny_plan_options o;
    o.devices = 4;
    const auto plans = rank_plans(plan_tiny(c, b.split, b.lengths, o));
    thread_hub hub(4);
    std::vector<std::string> err(4);
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < 4; ++r)
        ts.emplace_back([&, r] {
            rank_trainer trainer(c, init_params(c), sgd{0.1});
            trainer.begin(plans[r], b.lengths);
            handler_registry h = trainer.handlers();
            if (r == 2) {
                auto inner = h[plan::instr_kind::forward];
                auto forwards = std::make_shared<int>(0);
                h.on(plan::instr_kind::forward, [inner, forwards](const plan::instruction& in, step_context& ctx) {
                    if (++*forwards == 3) throw rank_died();
                    inner(in, ctx);
                });
            }
            try {
                if (r == 2 && dies) {
                    dying_transport t(hub, r);
                    executor<dying_transport>(t, h, {timeout}).run(plans[r]);
                } else {
                    thread_transport t(hub, r);
                    executor<thread_transport>(t, h, {timeout}).run(plans[r]);
                }
            } catch (const timeout_error& e) {
                err[r] = std::string("timeout: ") + e.what();
            } catch (const aborted_error& e) {
                err[r] = std::string("aborted: ") + e.what();
            } catch (const std::exception& e) {
                err[r] = std::string("other: ") + e.what();
            }
        });
    for (auto& t : ts) t.join();
    return err;
}
}  // namespace

TEST_CASE("cpu backend: a rank that stops mid-iteration makes every other rank fail with a timeout, not hang") {
    const auto start = std::chrono::steady_clock::now();
    const auto err = run_with_fault(true, 300ms);
    CHECK(std::chrono::steady_clock::now() - start < 10s);
    CHECK(err[2].find("rank died") != std::string::npos);
    for (std::size_t r : {0, 1, 3}) {
        CAPTURE(err[r]);
        CHECK(err[r].rfind("timeout: rank " + std::to_string(r) + ": instruction #", 0) == 0);
        CHECK(err[r].find("peer") != std::string::npos);
        CHECK(err[r].find("micro-batch") != std::string::npos);
    }
}

TEST_CASE("cpu backend: a handler that throws ends its rank's step with that error and aborts the others") {
    const auto start = std::chrono::steady_clock::now();
    const auto err = run_with_fault(false, 20s);
    CHECK(std::chrono::steady_clock::now() - start < 10s);  // not the 20 s timeout
    CHECK(err[2].rfind("other: rank 2: instruction #", 0) == 0);
    CHECK(err[2].find("forward") != std::string::npos);
    CHECK(err[2].find("rank died") != std::string::npos);
    for (std::size_t r : {0, 1, 3}) {
        CAPTURE(err[r]);
        CHECK(err[r].rfind("aborted: rank " + std::to_string(r), 0) == 0);
        CHECK(err[r].find("rank died") != std::string::npos);
    }
}

TEST_CASE("cpu backend: set_frequency reaches the trainer's handler in order; training is unchanged") {
    const model_config c = pipeline_test_model();
    const model_params init = init_params(c);
    const test_batch b = random_batch(18, 1, 77);
    tiny_plan_options o;
    o.schedule = schedule::schedule_name::one_f_one_b;
    o.devices = 4;
    const plan::execution_plan base = plan_tiny(c, b.split, b.lengths, o);
    // A seeded clock per compute op; a set_frequency wherever the clock changes (as
    // plan/frequency.hpp inserts them), and the sequence each rank should record.
    splitmix64 rng(5);
    plan::execution_plan p = base;
    std::vector<std::vector<std::uint64_t>> want(p.programs.size());
    for (std::size_t r = 0; r < p.programs.size(); ++r) {
        std::vector<plan::instruction> out;
        std::uint64_t current = 0;
        for (const auto& x : base.programs[r].instructions) {
            if (plan::is_compute(x.kind)) {
                const auto mhz = static_cast<std::uint32_t>(210 + 15 * rng.below(3));
                if (mhz != current) {
                    out.push_back(plan::make_set_frequency(mhz, x));
                    want[r].push_back(mhz);
                }
                current = mhz;
            }
            out.push_back(x);
        }
        p.programs[r].instructions = std::move(out);
    }
    REQUIRE(plan::validate(p).ok());
    cpu_cluster with(c, p.programs.size(), sgd{0.1}, {10s}), without(c, base.programs.size(), sgd{0.1}, {10s});
    const iteration_result r1 = with.run(rank_plans(p), b.lengths);
    const iteration_result r0 = without.run(rank_plans(base), b.lengths);
    CHECK(r1.loss == r0.loss);
    for (std::size_t r = 0; r < p.programs.size(); ++r) {
        CHECK(with.rank(r).clocks_mhz() == want[r]);
        CHECK_FALSE(want[r].empty());
        CHECK(without.rank(r).clocks_mhz().empty());
    }
    // An executor without a set_frequency handler accepts the plan and skips them (default clock).
    handler_registry h;
    for (const auto& k : plan::builtin_kinds)
        if (!plan::is_message(k.kind) && k.kind != plan::instr_kind::set_frequency)
            h.on(k.kind, [](const plan::instruction&, step_context&) {});
    CHECK_NOTHROW((void)check_rank_plan(rank_plans(p)[0], p.programs.size(), h));
}
