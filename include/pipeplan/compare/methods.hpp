// pipeplan/compare/methods.hpp — the batching methods compared, each run on one global batch
// under one pipeline configuration, the same cost model, memory limit and simulator.
//
//   padding   samples in dataset order, `mbs` per micro-batch, padded to the longest; 1F1B in
//             that order (batching::split_fixed_mbs)
//   packing   Megatron-LM practice: samples concatenated in dataset order into rows of the
//             maximum sequence length, `rows` rows per micro-batch, priced as packed rows (the
//             profiles price a row as one sequence of that length: attention over the whole
//             row); 1F1B in that order (batching::split_pack_fixed)
//   tokens    a token budget per micro-batch over the length-sorted samples; 1F1B in that
//             order (batching::split_token_budget)
//   dynapipe  DynaPipe's method as pipeplan runs it: the exact split under the preferred
//             memory limit and the adaptive schedule with its order search (no other split,
//             schedule kind or polish)
//   pipeplan  the full planner (plan/planner.hpp: every candidate split and schedule), which
//             also plans the best baseline's micro-batches of the batch and keeps the faster
//             plan (it can always choose what the baselines do)
// Each baseline has knobs (micro-batch size, rows, token budget, and the recomputation mode)
// that compare/sweep.hpp grid-searches once per setting, as DynaPipe's artifact searched
// Megatron-LM's. A baseline's micro-batches run in their split's order under 1F1B (as a
// trainer runs them); their replicas are balanced over dp by batching::balance_result.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pipeplan/batching/baselines.hpp"
#include "pipeplan/batching/dp_balance.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/schedule/registry.hpp"

namespace pipeplan::compare {

/// The methods compared (the built-in table; compare/sweep.hpp runs them all).
enum class method : std::uint8_t { padding = 0, packing = 1, tokens = 2, dynapipe = 3, pipeplan = 4 };
inline constexpr std::array<method, 5> all_methods{method::padding, method::packing, method::tokens, method::dynapipe,
                                                   method::pipeplan};
inline constexpr std::size_t method_count = all_methods.size();

[[nodiscard]] constexpr auto enum_names(method) noexcept {
    return name_table<method, 5>{"method",
                                 {{{method::padding, "padding"},
                                   {method::packing, "packing"},
                                   {method::tokens, "tokens"},
                                   {method::dynapipe, "dynapipe"},
                                   {method::pipeplan, "pipeplan"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(method m) noexcept { return name_of(m); }
/// The baselines: padding, packing, tokens.
[[nodiscard]] constexpr bool is_baseline(method m) noexcept { return m <= method::tokens; }

/// The knobs the baselines are searched over.
struct knob_grid {
    std::vector<int> padding_mbs = {1, 2, 4, 8, 16};          ///< samples per micro-batch
    std::vector<int> packing_rows = {1, 2, 4, 8};             ///< rows per micro-batch
    std::vector<long long> token_budgets = {4096, 8192, 16384, 32768};  ///< padded tokens per micro-batch
    std::vector<recompute_mode> recompute = {recompute_mode::none, recompute_mode::selective, recompute_mode::full};
};

/// One setting of one baseline's knobs.
struct baseline_knobs {
    method kind = method::padding;
    int size = 1;             ///< padding: samples per micro-batch; packing: rows per micro-batch
    long long tokens = 0;     ///< tokens: the budget per micro-batch
    recompute_mode recompute = recompute_mode::none;
};

/// Every knob setting of baseline `m` in `g` (recomputation innermost).
[[nodiscard]] inline std::vector<baseline_knobs> knob_settings(method m, const knob_grid& g) {
    std::vector<baseline_knobs> out;
    const auto add = [&](int size, long long tokens) {
        for (recompute_mode r : g.recompute) out.push_back({m, size, tokens, r});
    };
    if (m == method::padding)
        for (int s : g.padding_mbs) add(s, 0);
    if (m == method::packing)
        for (int s : g.packing_rows) add(s, 0);
    if (m == method::tokens)
        for (long long t : g.token_budgets) add(0, t);
    return out;
}

/// A Gantt chart's inputs: one replica's scenario, schedule and simulation (timeline only;
/// compare/html.hpp simulates again with the memory curve).
struct gantt_chart {
    schedule::scenario scenario;
    schedule::pipeline_schedule schedule;
    schedule::simulation_result simulation;
};

/// One method on one batch under one configuration.
struct batch_run {
    bool feasible = false;
    std::string reason;            ///< why not, when infeasible
    double iteration_ms = 0;       ///< simulated makespan (slowest replica)
    double lower_bound_ms = 0;
    double peak_memory_mb = 0;     ///< max over ranks, simulated
    double planning_ms = 0;        ///< forming the micro-batches (and, for planners, the plan)
    long long computed_tokens = 0; ///< Σ rows × (seqlen + dec_seqlen) over the micro-batches
    std::string schedule;          ///< the schedule run
    std::string split;             ///< where the micro-batches came from
    recompute_mode recompute = recompute_mode::none;
    batching::split_result micro;  ///< the micro-batches (kept for baselines: pipeplan plans them too)
    std::optional<gantt_chart> chart;
};

namespace detail {

using clock = std::chrono::steady_clock;
inline double ms_since(clock::time_point t0) { return std::chrono::duration<double, std::milli>(clock::now() - t0).count(); }

/// Σ rows × (seqlen + dec_seqlen): the tokens the micro-batches compute, padding included.
[[nodiscard]] inline long long computed_tokens(const batching::split_result& s) {
    long long n = 0;
    for (const auto& m : s.per_microbatch)
        n += static_cast<long long>(m.shape.mbs) * (m.shape.seqlen_tokens + m.shape.dec_seqlen_tokens);
    return n;
}

}  // namespace detail

/// The split of baseline `k` (throws pipeplan::error when it fits under no memory rung).
template <cost_model Model>
[[nodiscard]] batching::split_result baseline_split(const Model& model, std::span<const batching::sample> batch,
                                                    const batching::pipeline_config& config,
                                                    batching::split_options options, const baseline_knobs& k) {
    options.recompute_ladder = {k.recompute};
    switch (k.kind) {
        case method::padding: return batching::split_fixed_mbs(model, batch, config, k.size, batching::fixed_order::dataset, options);
        case method::packing: return batching::split_pack_fixed(model, batch, config, k.size, 0, 0, options);
        case method::tokens: return batching::split_token_budget(model, batch, config, k.tokens, options);
        default: break;
    }
    throw invalid_argument("compare: '" + std::string(to_string(k.kind)) + "' is not a baseline");
}

/// Baseline `k` on `batch`: its split, then 1F1B in the split's order on every replica,
/// simulated by `planner` (whose configuration is the one compared).
template <cost_model Model>
[[nodiscard]] batch_run run_baseline(const Model& model, plan::planner<Model>& planner, std::span<const batching::sample> batch,
                                     const baseline_knobs& k, bool keep_chart) {
    batch_run out;
    out.schedule = "1f1b";
    out.split = std::string(to_string(k.kind));
    out.recompute = k.recompute;
    const auto t0 = detail::clock::now();
    try {
        out.micro = baseline_split(model, batch, planner.options().config, planner.options().split, k);
    } catch (const error& e) {
        out.reason = e.what();
        return out;
    }
    out.planning_ms = detail::ms_since(t0);
    auto sim = planner.simulate_split(out.micro, schedule::schedule_name::one_f_one_b, false);
    out.iteration_ms = sim.report.makespan_ms;
    out.peak_memory_mb = sim.report.peak_memory_mb;
    out.lower_bound_ms = sim.lower_bound_ms;
    out.computed_tokens = detail::computed_tokens(out.micro);
    out.feasible = sim.report.feasible;
    if (!out.feasible)
        out.reason = !sim.error.empty() ? sim.error
                                        : "1F1B peaks at " + std::to_string(sim.report.peak_memory_mb) +
                                              " MB, over the device memory (" +
                                              std::to_string(planner.options().config.device_memory_mb) + " MB)";
    if (keep_chart && out.feasible)
        out.chart = gantt_chart{std::move(sim.scenario), std::move(sim.schedule), std::move(sim.simulation)};
    return out;
}

/// A baseline's best knobs on one batch, and its run with them.
struct baseline_choice {
    baseline_knobs knobs;
    batch_run run;
};

/// Baseline `m`'s knob setting of `grid` with the shortest iteration on `batch` (ties: the
/// earlier setting); nullopt when none is feasible.
template <cost_model Model>
[[nodiscard]] std::optional<baseline_choice> best_knobs(const Model& model, plan::planner<Model>& planner,
                                                        std::span<const batching::sample> batch, method m,
                                                        const knob_grid& grid, bool keep_chart = false) {
    std::optional<baseline_choice> best;
    for (const baseline_knobs& k : knob_settings(m, grid)) {
        batch_run r = run_baseline(model, planner, batch, k, keep_chart);
        if (r.feasible && (!best || r.iteration_ms < best->run.iteration_ms)) best = baseline_choice{k, std::move(r)};
    }
    return best;
}

/// A baseline's knobs in words, e.g. "2048-token rows, 1 row per micro-batch, selective
/// recompute, 1F1B" (`row_tokens`: packing's row length).
[[nodiscard]] inline std::string describe(const baseline_knobs& k, int row_tokens) {
    const auto plural = [](long long n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
    std::string s;
    if (k.kind == method::padding) s = plural(k.size, "sample", "samples") + " per micro-batch, padded";
    if (k.kind == method::packing) s = std::to_string(row_tokens) + "-token rows, " + plural(k.size, "row", "rows") + " per micro-batch";
    if (k.kind == method::tokens) s = std::to_string(k.tokens) + " tokens per micro-batch";
    return s + ", " + std::string(to_string(k.recompute)) + " recompute, 1F1B";
}

/// A planned iteration as a batch_run.
inline batch_run from_plan(plan::plan_result&& r, double planning_ms, std::string split, bool keep_chart) {
    batch_run out;
    out.feasible = true;
    out.iteration_ms = r.makespan_ms;
    out.lower_bound_ms = r.lower_bound_ms;
    for (double p : r.peak_memory_mb) out.peak_memory_mb = std::max(out.peak_memory_mb, p);
    out.planning_ms = planning_ms;
    out.computed_tokens = detail::computed_tokens(r.split);
    out.schedule = r.plan.header.schedule;
    out.split = std::move(split);
    out.recompute = r.split.recompute;
    if (keep_chart) out.chart = gantt_chart{std::move(r.scenario), std::move(r.schedule), std::move(r.simulation)};
    return out;
}

/// The planner options of the `dynapipe` method derived from the full planner's: the exact
/// split under the preferred limit alone, the adaptive schedule (with its order search), no polish.
[[nodiscard]] inline plan::planner_options dynapipe_options(plan::planner_options o) {
    o.schedule = schedule::schedule_name::adaptive;
    o.compare_splits = false;
    o.alternative_splits = 0;
    o.fill_weights.clear();
    o.polish_evaluations = 0;
    return o;
}

/// The full planner's options for planning a baseline's micro-batches: that baseline's
/// recomputation mode alone (so they are priced under the rung the baseline ran under).
[[nodiscard]] inline plan::planner_options baseline_microbatch_options(plan::planner_options o, recompute_mode r) {
    o.split.recompute_ladder = {r};
    return o;
}

/// A planner method (`dynapipe` or `pipeplan`) on `batch`. For pipeplan, `baseline` (when
/// feasible) is the best baseline's run of the same batch: its micro-batches are planned too,
/// by `baseline_planner` (baseline_microbatch_options), and the faster plan is kept (ties: the
/// planner's own split).
template <cost_model Model>
[[nodiscard]] batch_run run_planner(plan::planner<Model>& planner, std::span<const batching::sample> batch,
                                    const batch_run* baseline, std::type_identity_t<plan::planner<Model>>* baseline_planner,
                                    bool keep_chart) {
    const auto t0 = detail::clock::now();
    plan::plan_outcome own = planner.try_plan(batch);
    std::optional<plan::plan_result> best;
    std::string split = "exact";
    std::string reason = own.error;
    if (own.ok()) best = std::move(own.result);
    if (baseline && baseline->feasible && baseline_planner) {
        const auto& m = baseline->micro;
        batching::packed_layout layout;
        for (const auto& rec : m.per_microbatch) {
            layout.rows.push_back(rec.rows);
            layout.row_tokens.push_back(rec.rows.empty() ? 0 : rec.shape.seqlen_tokens);
            layout.row_dec_tokens.push_back(rec.rows.empty() ? 0 : rec.shape.dec_seqlen_tokens);
        }
        plan::plan_outcome given = baseline_planner->try_plan_microbatches(batch, m.microbatches, std::move(layout));
        if (given.ok() && (!best || given.result->makespan_ms < best->makespan_ms)) {
            best = std::move(given.result);
            split = baseline->split + " micro-batches";
        }
    }
    const double planning_ms = detail::ms_since(t0);
    if (!best) {
        batch_run out;
        out.reason = reason;
        out.planning_ms = planning_ms;
        return out;
    }
    return from_plan(std::move(*best), planning_ms, std::move(split), keep_chart);
}

}  // namespace pipeplan::compare
