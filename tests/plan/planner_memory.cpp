// The planner's memory promise: every rank of an accepted plan fits its arena (the lowered
// buffers) plus its model state in the device memory, and more device memory never gives a
// slower plan (the recomputation modes are compared, not taken first-fit).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "batching/real_batches.hpp"
#include "common.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/profile.hpp"
#include "pipeplan/plan/planner.hpp"
#include "profile_models.hpp"
#include "same_plan.hpp"
#include "support.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

namespace {

planner_options mem_options(int tp, int stages, int layers_per_stage, int hidden_size, double memory_mb) {
    planner_options o;
    o.config.stages = stages;
    o.config.layers_per_stage = layers_per_stage;
    o.config.tp = tp;
    o.config.device_memory_mb = memory_mb;
    o.hidden_size = hidden_size;
    return o;
}

/// Checks arena + model state <= the device memory on every rank; returns the largest sum.
double mem_check_fits(const plan_result& r, double memory_mb) {
    REQUIRE(r.arena_mb.size() == r.plan.programs.size());
    REQUIRE(r.model_state_mb.size() == r.plan.programs.size());
    double worst = 0.0;
    for (std::size_t k = 0; k < r.arena_mb.size(); ++k) {
        INFO("rank " << k << ": arena " << r.arena_mb[k] << " MB + model state " << r.model_state_mb[k] << " MB");
        CHECK(r.arena_mb[k] + r.model_state_mb[k] <= memory_mb);
        worst = std::max(worst, r.arena_mb[k] + r.model_state_mb[k]);
    }
    CHECK(r.budget_mb <= memory_mb);
    // The header records what the plan was made for, and the validator (what plan-check runs)
    // agrees that it fits: its memory rule holds on the stamped plan and on each rank's share.
    CHECK(r.plan.header.device_memory_mb == memory_mb);
    CHECK(r.plan.header.model_state_mb == r.model_state_mb);
    execution_plan stamped = r.plan;
    stamp_identity(stamped);
    const validation_report rep = validate(stamped);
    INFO(rep.to_string());
    CHECK(rep.ok());
    for (const auto& prog : stamped.programs) {
        CHECK(rank_memory_mb(stamped.header, prog) <= memory_mb);
        CHECK(validate_header(rank_plan{stamped.header, prog}).ok());
    }
    return worst;
}

/// Plans `batch` at every limit of `limits_mb` (ascending): every accepted plan fits, and (when
/// `monotone`) the makespan never grows by more than 0.5 % with more memory. Returns how many
/// plans were accepted.
template <class Model>
std::size_t mem_sweep(const Model& model, const std::vector<batching::sample>& batch, planner_options o,
                  const std::vector<double>& limits_mb, bool monotone = true) {
    double best_ms = 0.0;
    std::size_t accepted = 0;
    for (double limit : limits_mb) {
        o.config.device_memory_mb = limit;
        const plan_outcome q = try_plan_iteration(model, batch, o);
        if (!q.ok()) {
            INFO("limit " << limit << " MB refused after a plan at a smaller limit: " << q.error);
            CHECK(accepted == 0);  // a limit that allows a plan allows one at every larger limit
            continue;
        }
        const plan_result& r = *q.result;
        ++accepted;
        const double need = mem_check_fits(r, limit);
        MESSAGE("limit " << limit << " MB: " << r.makespan_ms << " ms, " << r.plan.header.microbatches.size()
                         << " micro-batches, " << to_string(r.split.recompute) << " recompute, needs " << need
                         << " MB, budget " << r.budget_mb << " MB (" << r.memory_attempts << " plans)");
        if (monotone && accepted > 1) {
            INFO("limit " << limit << " MB: " << r.makespan_ms << " ms after " << best_ms << " ms at a smaller limit");
            CHECK(r.makespan_ms <= best_ms * 1.005);
        }
        best_ms = accepted == 1 ? r.makespan_ms : std::min(best_ms, r.makespan_ms);
    }
    return accepted;
}

std::vector<double> mem_limits(double from_mb, double to_mb, double step_mb) {
    std::vector<double> v;
    for (double m = from_mb; m <= to_mb + 1e-9; m += step_mb) v.push_back(m);
    return v;
}

}  // namespace

TEST_CASE("planner memory: synthetic batches, a sweep of limits: arena + model state fit") {
    const analytic_cost_model gpt = make_analytic_model("gpt-6.7b");
    for (std::uint64_t seed : {1u, 2u}) {
        const auto batch = test::mixed_length_batch(32768, seed);
        INFO("seed " << seed);
        // fits everywhere; not monotone within one recomputation mode (docs/plans.md)
        const std::size_t n = mem_sweep(gpt, batch, mem_options(2, 4, 8, 4096, 0), mem_limits(10000, 24000, 1000), false);
        CHECK(n >= 8);
    }
}

TEST_CASE("planner memory: synthetic batches, generous limits: more memory is never slower") {
    // Seed 2 needs memory re-plans from 23500 to 28000 MB (5 to 9 plans; the plans need 300 to
    // 1500 MB over their budget); seed 1 none from 24000 MB.
    const analytic_cost_model gpt = make_analytic_model("gpt-6.7b");
    for (std::uint64_t seed : {1u, 2u}) {
        const auto batch = test::mixed_length_batch(32768, seed);
        INFO("seed " << seed);
        CHECK(mem_sweep(gpt, batch, mem_options(2, 4, 8, 4096, 0), mem_limits(24000, 48000, 2000)) == 13);
    }
}

TEST_CASE("planner memory: a limit is never refused when a smaller budget gives a plan that fits") {
    // Synthetic seed 2 at 28000 MB: the plan under the device memory needs 28100.8 MB, and each
    // budget lowered by the excess alone gives a plan that needs as much (e.g. 27194 MB: 28100.8
    // MB); the plan under 26000 MB needs 25782.1 MB. The search lowers the budget by at least
    // twice its last step until a plan fits, then bisects, and keeps the fastest plan that fits.
    const analytic_cost_model gpt = make_analytic_model("gpt-6.7b");
    const auto batch = test::mixed_length_batch(32768, 2);
    const plan_result r = plan_iteration(gpt, batch, mem_options(2, 4, 8, 4096, 28000));
    mem_check_fits(r, 28000);
    CHECK(r.memory_attempts >= 2);
    CHECK(r.memory_attempts <= 9);  // the first plan and planner_options::memory_replans (8) more
    CHECK(r.budget_mb < 28000);
    // Every limit from there up plans, and none slower (within 0.5 %) than a smaller one.
    CHECK(mem_sweep(gpt, batch, mem_options(2, 4, 8, 4096, 0), mem_limits(26000, 30000, 500)) == 9);
    // With no re-plan allowed, the plan over the limit is refused, naming what it needs.
    auto once = mem_options(2, 4, 8, 4096, 28000);
    once.memory_replans = 0;
    const plan_outcome q = try_plan_iteration(gpt, batch, once);
    REQUIRE_FALSE(q.ok());
    CHECK(q.error.find("arena + model state") != std::string::npos);
    CHECK(q.error.find("after 1 plan:") != std::string::npos);
}

TEST_CASE("planner memory: a plan over the device memory is made again under a smaller budget") {
    // The lowered plan holds message buffers the simulator does not count, and its arena wastes
    // some memory to fragmentation: at some limits the plan chosen by simulation does not fit.
    // There the planner without re-plans refuses (limit_exceeded) and with them finds one that fits.
    const analytic_cost_model gpt = make_analytic_model("gpt-6.7b");
    const auto batch = test::mixed_length_batch(32768, 3);
    // Where no plan fits (message buffers alone may not), the error is limit_exceeded.
    std::size_t replanned = 0;
    for (double limit : mem_limits(10000, 24000, 250)) {
        auto o = mem_options(2, 4, 8, 4096, limit);
        o.memory_replans = 0;
        const plan_outcome once = try_plan_iteration(gpt, batch, o);
        if (once.ok() || once.error.find("arena + model state") == std::string::npos) continue;
        INFO("limit " << limit << " MB: " << once.error);
        o.memory_replans = 8;
        try {
            const plan_result r = plan_iteration(gpt, batch, o);
            mem_check_fits(r, limit);
            CHECK(r.memory_attempts >= 2);
            CHECK(r.budget_mb < limit);
            ++replanned;
        } catch (const limit_exceeded& e) {
            MESSAGE("limit " << limit << " MB: no plan fits: " << std::string(e.what()));
        }
    }
    CHECK(replanned > 0);
}

TEST_CASE("planner memory: real GPT-6.7B and T5-11B batches over many limits" * PIPEPLAN_NEEDS_DATA()) {
    const auto& gpt = test::profile_model("gpt_6.7b", interpolation_mode::recommended);
    // Monotone across the change of recomputation mode (full below ~18000 MB, selective above;
    // docs/plans.md): the first mode that fits is not taken blindly. Seed 2 at 17250 MB: zb-v
    // is feasible there but cannot beat zb-h1's lower bound, so zb-h1 screens the extra splits and
    // keeps fill weight 0.25 (3021.8 ms, as at 17000 MB); screened with zb-v it kept 0.5, on which
    // zb-h1 takes 3043.7 ms (+0.73 %).
    for (std::uint64_t seed : {1u, 2u, 4u}) {
        INFO("GPT seed " << seed);
        const auto batch = test::draw_batch("superni_gpt.csv", 65536, seed);
        CHECK(mem_sweep(gpt, batch, mem_options(2, 4, 8, 4096, 0), mem_limits(15000, 18750, 250)) >= 14u);
    }
    // Fits everywhere up to 40000 MB; within one recomputation mode, and where a memory re-plan
    // lowers the budget, the makespan is not monotone (docs/plans.md).
    for (std::uint64_t seed : {1u, 3u}) {
        INFO("GPT seed " << seed);
        const auto batch = test::draw_batch("superni_gpt.csv", 65536, seed);
        CHECK(mem_sweep(gpt, batch, mem_options(2, 4, 8, 4096, 0), mem_limits(19000, 40000, 1500), false) >= 14);
    }
    // Where the first mode (none) fits the makespan is monotone within 0.5 % (docs/plans.md,
    // "More memory never slower: what holds"): GPT seeds 2 and 3 from 26500 MB, seeds 1 and 4
    // from 28000 MB (below, within the memory re-plans, seed 1 rises 0.61 % at 28000 MB and seed 4
    // 0.72 % at 27500 MB), through the memory re-plans (up to 30500 MB) to where the first plan fits.
    for (std::uint64_t seed : {1u, 2u, 3u, 4u}) {
        INFO("GPT seed " << seed);
        std::vector<double> limits = mem_limits(seed == 2 || seed == 3 ? 26500 : 28000, 32000, 500);
        for (double m : mem_limits(33000, 40000, 1000)) limits.push_back(m);
        const auto batch = test::draw_batch("superni_gpt.csv", 65536, seed);
        CHECK(mem_sweep(gpt, batch, mem_options(2, 4, 8, 4096, 0), limits) == limits.size());
    }
    const auto& t5 = test::profile_model("t5_11b", interpolation_mode::recommended);
    // T5-11B from 10000 to 78000 MB, on SuperNI and with 25 % long-target samples: across the
    // change from full recomputation to none (the later modes are compared while the stored limit
    // holds the split back) and the reweighted splits screened with the leading V kind.
    for (double long_share : {0.0, 0.25})
        for (std::uint64_t seed : {1u, 2u, 3u}) {
            INFO("T5 seed " << seed << ", long-target share " << long_share);
            const auto batch = test::draw_mixed_batch("superni_llama.csv", 65536, seed, long_share);
            CHECK(mem_sweep(t5, batch, mem_options(4, 4, 6, 1024, 0), mem_limits(10000, 78000, 4000)) == 18);
        }
    for (std::uint64_t seed : {1u, 2u}) {
        INFO("T5 seed " << seed);
        const auto batch = test::draw_batch("superni_llama.csv", 65536, seed);
        CHECK(mem_sweep(t5, batch, mem_options(4, 4, 6, 1024, 0), mem_limits(12000, 36000, 3000), false) >= 8);
    }
}

TEST_CASE("planner memory: real GPT-6.7B seed 2 at 31000 MB plans, as at 30500 and 31500 MB" * PIPEPLAN_NEEDS_DATA()) {
    // The plan under 31000 MB needs 31089.0 MB (arena + model state), and so do the plans under
    // budgets down to 30287.8 MB: lowering the budget by the excess alone (89 MB) never reaches
    // one that fits. The plan under 29634.9 MB needs 30492.0 MB.
    const auto& gpt = test::profile_model("gpt_6.7b", interpolation_mode::recommended);
    const auto batch = test::draw_batch("superni_gpt.csv", 65536, 2);
    const plan_result r = plan_iteration(gpt, batch, mem_options(2, 4, 8, 4096, 31000));
    mem_check_fits(r, 31000);
    CHECK(r.memory_attempts >= 2);
    CHECK(r.budget_mb < 31000);
    const plan_result below = plan_iteration(gpt, batch, mem_options(2, 4, 8, 4096, 30500));
    mem_check_fits(below, 30500);
    CHECK(r.makespan_ms <= below.makespan_ms * 1.005);
}

TEST_CASE("planner memory: real T5-11B, later recomputation modes compared when the stored limit binds" * PIPEPLAN_NEEDS_DATA()) {
    // With 25 % long-target samples (seed 2) the plan at 10000 MB recomputes fully (21
    // micro-batches, 1260.4 ms); at 11500 MB a split without recomputation exists, but the stored
    // limit holds it back (its largest micro-batch stores within 1 % of the limit) and its best
    // schedule takes 1654.5 ms: the full-recomputation splits are candidates too, and win.
    const auto& t5 = test::profile_model("t5_11b", interpolation_mode::recommended);
    for (std::uint64_t seed : {2u, 3u}) {
        INFO("T5 seed " << seed << ", long-target share 0.25");
        const auto batch = test::draw_mixed_batch("superni_llama.csv", 65536, seed, 0.25);
        const plan_result low = plan_iteration(t5, batch, mem_options(4, 4, 6, 1024, 10000));
        const plan_result high = plan_iteration(t5, batch, mem_options(4, 4, 6, 1024, 11500));
        mem_check_fits(high, 11500);
        CHECK(high.makespan_ms <= low.makespan_ms * 1.005);
        const bool full_compared = std::any_of(high.candidates.begin(), high.candidates.end(),
                                               [](const candidate_report& c) { return c.split.rfind("full ", 0) == 0; });
        CHECK(full_compared);
        auto first_only = mem_options(4, 4, 6, 1024, 11500);
        first_only.compare_recompute = false;
        CHECK(high.makespan_ms <= plan_iteration(t5, batch, first_only).makespan_ms);
    }
    // Where the stored limit does not bind (GPT-6.7B 65k at 36000 MB) only the first mode is split.
    const auto& gpt = test::profile_model("gpt_6.7b", interpolation_mode::recommended);
    const plan_result r = plan_iteration(gpt, test::draw_batch("superni_gpt.csv", 65536, 1), mem_options(2, 4, 8, 4096, 36000));
    for (const candidate_report& c : r.candidates) CHECK(c.split.rfind("full ", 0) != 0);
    for (const candidate_report& c : r.candidates) CHECK(c.split.rfind("selective ", 0) != 0);
}

TEST_CASE("planner memory: real T5-11B, the recomputation modes' splits on worker threads give the same plan" * PIPEPLAN_NEEDS_DATA()) {
    // At 11500 MB (25 % long targets, seed 2) the selective and full modes are both split: with
    // threads > 1 the first mode's available split and the full mode's two splits run on the
    // workers (split_modes), each worker with its own shape-cost cache.
    const auto& t5 = test::profile_model("t5_11b", interpolation_mode::recommended);
    const auto batch = test::draw_mixed_batch("superni_llama.csv", 65536, 2, 0.25);
    const plan_result one = plan_iteration(t5, batch, mem_options(4, 4, 6, 1024, 11500));
    REQUIRE(std::any_of(one.candidates.begin(), one.candidates.end(),
                        [](const candidate_report& c) { return c.split.rfind("full ", 0) == 0; }));
    for (std::size_t threads : {2u, 3u}) {
        auto o = mem_options(4, 4, 6, 1024, 11500);
        o.threads = threads;
        planner<std::remove_cvref_t<decltype(t5)>> p(t5, o);
        for (int run = 0; run < 2; ++run) {  // the second with the workers' caches filled
            const plan_result many = p.plan(batch);
            INFO("threads " << threads << ", run " << run);
            test::check_same_plan(one, many);
        }
    }
}

TEST_CASE("planner memory: real GPT-6.7B, the later V kinds' candidates run ahead on idle workers: same candidates" * PIPEPLAN_NEEDS_DATA()) {
    // 65k at 36000 MB: zb-v wins on its extra split, and v-half and v-min are pruned by their
    // lower bounds. With threads > 1 their candidates whose bound is below the fastest so far
    // run ahead on the idle worker (planner::run_rounds) and are discarded: the reports, the
    // choice and the plan are those of one kind after the other.
    const auto& gpt = test::profile_model("gpt_6.7b", interpolation_mode::recommended);
    for (const unsigned seed : {1u, 2u}) {
        const auto batch = test::draw_batch("superni_gpt.csv", 65536, seed);
        const plan_result one = plan_iteration(gpt, batch, mem_options(2, 4, 8, 4096, 36000));
        REQUIRE(std::none_of(one.candidates.begin(), one.candidates.end(),
                             [](const candidate_report& c) { return c.name == "v-half" || c.name == "v-min"; }));
        for (std::size_t threads : {2u, 3u}) {
            auto o = mem_options(2, 4, 8, 4096, 36000);
            o.threads = threads;
            INFO("seed " << seed << ", threads " << threads);
            test::check_same_plan(one, plan_iteration(gpt, batch, o));
        }
    }
}

TEST_CASE("planner memory: real T5-11B, the extra splits are screened with the leading kind" * PIPEPLAN_NEEDS_DATA()) {
    // The reweighted splits (fill weights 0.5 and 0.25) are screened by one quick simulation each
    // and one is scheduled in full. A V kind leads these plans; screened with it, the screen keeps
    // the split that scheduling both in full would choose (T5 seed 2 at 27000 MB: fill weight
    // 0.25, 898.4 ms; screened with zb-h1 it kept 0.5, 958.9 ms).
    const auto& t5 = test::profile_model("t5_11b", interpolation_mode::recommended);
    for (const auto& [seed, limit_mb] : {std::pair{2u, 27000.0}, std::pair{3u, 25500.0}}) {
        INFO("T5 seed " << seed << " at " << limit_mb << " MB");
        const auto batch = test::draw_batch("superni_llama.csv", 65536, seed);
        const plan_result screened = plan_iteration(t5, batch, mem_options(4, 4, 6, 1024, limit_mb));
        auto all = mem_options(4, 4, 6, 1024, limit_mb);
        all.scheduled_extra_splits = 2;
        const plan_result scheduled = plan_iteration(t5, batch, all);
        CHECK(screened.makespan_ms == scheduled.makespan_ms);
        CHECK(screened.candidates[screened.chosen].split == scheduled.candidates[scheduled.chosen].split);
    }
}

TEST_CASE("planner memory: the re-plans stop once bisecting cannot gain more than memory_replan_gain") {
    // Synthetic seed 2 needs memory re-plans from 23500 to 28000 MB; its plans have 30-60
    // micro-batches, fewer than memory_replan_gain_microbatches, so by default they bisect to
    // 0.5 % of the device memory as with the gain rule off. With the rule on for them too, the
    // search makes no more plans, its plan fits, and a gain of 1 (100 %) stops sooner still.
    const analytic_cost_model gpt = make_analytic_model("gpt-6.7b");
    const auto batch = test::mixed_length_batch(32768, 2);
    std::size_t fewer = 0;
    for (double limit : mem_limits(24000, 28000, 1000)) {
        INFO("limit " << limit << " MB");
        planner_options full = mem_options(2, 4, 8, 4096, limit);
        full.memory_replan_gain = 0.0;
        const plan_result all = plan_iteration(gpt, batch, full);
        mem_check_fits(all, limit);
        const plan_result by_default = plan_iteration(gpt, batch, mem_options(2, 4, 8, 4096, limit));
        CHECK(by_default.memory_attempts == all.memory_attempts);
        CHECK(by_default.makespan_ms == all.makespan_ms);
        CHECK(to_binary(by_default.plan) == to_binary(all.plan));
        planner_options o = full;
        o.memory_replan_gain = 0.001;
        o.memory_replan_gain_microbatches = 1;
        const plan_result r = plan_iteration(gpt, batch, o);
        mem_check_fits(r, limit);
        MESSAGE("limit " << limit << " MB: " << r.memory_attempts << " plans, " << r.makespan_ms << " ms; bisecting to 0.5 %: "
                         << all.memory_attempts << " plans, " << all.makespan_ms << " ms");
        CHECK(r.memory_attempts <= all.memory_attempts);
        fewer += r.memory_attempts < all.memory_attempts ? 1 : 0;
        o.memory_replan_gain = 1.0;
        const plan_result first = plan_iteration(gpt, batch, o);
        mem_check_fits(first, limit);
        CHECK(first.memory_attempts <= r.memory_attempts);
    }
    CHECK(fewer > 0);
    planner_options bad = mem_options(2, 4, 8, 4096, 28000);
    for (double g : {-0.001, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
        bad.memory_replan_gain = g;
        CHECK_THROWS_AS(plan_iteration(gpt, batch, bad), invalid_argument);
    }
}

TEST_CASE("planner memory: memory probes keep a faster plan that fits, only where memory binds") {
    // Synthetic seed 2 needs memory re-plans from 23500 to 28000 MB (30-60 micro-batches): there
    // the probes (planner_options::memory_probe_shares, and by default memory_replan_probe_shares)
    // plan under budgets below the kept plan's and keep the fastest that fits, so the plan is
    // never slower than without them; at 48000 MB memory does not bind, no probe runs and the
    // plan is the one made without probes.
    const analytic_cost_model gpt = make_analytic_model("gpt-6.7b");
    const auto batch = test::mixed_length_batch(32768, 2);
    const std::vector<double> shares = planner_options::recommended_memory_probe_shares();
    const std::size_t replan_probes = planner_options{}.memory_replan_probe_shares.size();
    std::size_t probed = 0;
    for (double limit : {24000.0, 26000.0, 28000.0, 48000.0}) {
        INFO("limit " << limit << " MB");
        planner_options on = mem_options(2, 4, 8, 4096, limit);
        on.memory_probe_shares = shares;
        const plan_result r = plan_iteration(gpt, batch, on);
        mem_check_fits(r, limit);
        planner_options off = mem_options(2, 4, 8, 4096, limit);
        off.memory_replan_probe_shares.clear();
        const plan_result without = plan_iteration(gpt, batch, off);
        const plan_result by_default = plan_iteration(gpt, batch, mem_options(2, 4, 8, 4096, limit));
        mem_check_fits(by_default, limit);
        CHECK(without.memory_probes == 0);
        CHECK(r.makespan_ms <= without.makespan_ms);
        CHECK(by_default.makespan_ms <= without.makespan_ms);
        CHECK(r.memory_attempts == without.memory_attempts);
        CHECK(by_default.memory_attempts == without.memory_attempts);
        if (limit < 48000) {
            CHECK(r.memory_probes == shares.size());
            CHECK(by_default.memory_probes == replan_probes);
            probed += r.makespan_ms < without.makespan_ms ? 1 : 0;
        } else {
            CHECK(r.memory_probes == 0);
            CHECK(by_default.memory_probes == 0);
            CHECK(to_binary(r.plan) == to_binary(without.plan));
            CHECK(to_binary(by_default.plan) == to_binary(without.plan));
        }
    }
    MESSAGE(probed << " of 3 plans where memory binds got faster with the probes");
    planner_options bad = mem_options(2, 4, 8, 4096, 28000);
    for (double share : {0.0, 1.0, -0.01, std::numeric_limits<double>::quiet_NaN()}) {
        bad.memory_probe_shares = {share};
        CHECK_THROWS_AS(plan_iteration(gpt, batch, bad), invalid_argument);
        bad.memory_probe_shares.clear();
        bad.memory_replan_probe_shares = {share};
        CHECK_THROWS_AS(plan_iteration(gpt, batch, bad), invalid_argument);
        bad.memory_replan_probe_shares.clear();
    }
}

TEST_CASE("planner memory: real GPT-6.7B, more memory is not slower across the memory re-plans" * PIPEPLAN_NEEDS_DATA()) {
    // Without the memory probes these limits rise by more than 0.5 % (docs/plans.md, "More memory
    // never slower: what holds", cause 2): seed 1 27500 -> 28000 MB +0.61 %, seed 2 21000 ->
    // 21500 MB +0.92 %, seed 3 25000 -> 25500 MB +0.72 %, seed 4 27000 -> 27500 MB +0.72 %; the
    // plan at the larger limit did not try the budget that gave the smaller limit its plan. The
    // default probes (memory_replan_probe_shares) run where the memory re-plans ran (seeds 1, 2
    // and 4's larger limits) and where a plan fits at once within their reach of the limit (seed
    // 3 at 25500 MB needs 25488.7 MB): each pair is within 0.5 %. Seed 4 needs the probe's bar to
    // leave the screening kind alone: its 2 % probe under 26248.5 MB, barred by the kept plan's
    // 2199.3 ms, pruned zb-v's leading candidate, screened with zb-h1 and kept fill weight 0.5
    // (2196.9 ms, +0.60 %); screened with zb-v, as the plan under that budget is, it keeps fill
    // weight 0.25 (2182.7 ms).
    const auto& gpt = test::profile_model("gpt_6.7b", interpolation_mode::recommended);
    for (const auto& [seed, low_mb] :
         {std::pair{1u, 27500.0}, std::pair{2u, 21000.0}, std::pair{3u, 25000.0}, std::pair{4u, 27000.0}}) {
        INFO("GPT seed " << seed << " from " << low_mb << " MB");
        const auto batch = test::draw_batch("superni_gpt.csv", 65536, seed);
        planner_options o = mem_options(2, 4, 8, 4096, 0);
        CHECK(mem_sweep(gpt, batch, o, {low_mb, low_mb + 500}) == 2);
        o.memory_replan_probe_shares.clear();
        o.config.device_memory_mb = low_mb + 500;
        const plan_result off = plan_iteration(gpt, batch, o);
        CHECK(off.memory_probes == 0);
        o.config.device_memory_mb = low_mb;
        CHECK(off.makespan_ms > plan_iteration(gpt, batch, o).makespan_ms * 1.005);
    }
}

TEST_CASE("planner memory: real GPT-6.7B, a plan that fits at once is probed only within the probes' reach" * PIPEPLAN_NEEDS_DATA()) {
    // Seed 3 at 25500 MB: the first plan fits, needing 25488.7 MB, within 2 % (the largest of
    // memory_replan_probe_shares) of the limit: the default probes run. At 36000 MB the plans
    // need at most 88 % of the limit: no probe, the same plan as with the probes off.
    const auto& gpt = test::profile_model("gpt_6.7b", interpolation_mode::recommended);
    const std::size_t shares = planner_options{}.memory_replan_probe_shares.size();
    const plan_result near = plan_iteration(gpt, test::draw_batch("superni_gpt.csv", 65536, 3), mem_options(2, 4, 8, 4096, 25500));
    CHECK(near.memory_attempts == 1);
    CHECK(near.memory_probes == shares);
    for (std::uint64_t seed : {1u, 3u}) {
        INFO("GPT seed " << seed << " at 36000 MB");
        const auto batch = test::draw_batch("superni_gpt.csv", 65536, seed);
        const plan_result r = plan_iteration(gpt, batch, mem_options(2, 4, 8, 4096, 36000));
        CHECK(r.memory_attempts == 1);
        CHECK(r.memory_probes == 0);
        planner_options off = mem_options(2, 4, 8, 4096, 36000);
        off.memory_replan_probe_shares.clear();
        CHECK(to_binary(r.plan) == to_binary(plan_iteration(gpt, batch, off).plan));
    }
}
