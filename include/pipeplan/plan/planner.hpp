// pipeplan/plan/planner.hpp — one training iteration planned end to end:
// split → candidate schedules → pick the fastest simulated under the memory limit → lower →
// validate.
//
//   pipeplan::plan::planner_options o;          // cluster, pipeline, model facts
//   o.config = {...}; o.hidden_size = 4096;
//   pipeplan::plan::planner<Model> p(model, o);  // reusable across iterations
//   plan_result r = p.plan(batch);               // throws pipeplan::error
//   plan_outcome q = p.try_plan(batch);          // never throws: result or error text
//
// Steps (each option is documented once, at its planner_options member; docs/plans.md):
// - Split: the exact split of batching/exact_split.hpp (in the accounting asked for), and as
//   candidates too the split under the available memory (compare_splits), splits with a lighter
//   fill term (fill_weights) and runner-ups (alternative_splits), the extras screened
//   (scheduled_extra_splits); under recomputation, the splits of later modes (compare_recompute).
// - Scenario: bridge/split_to_scenario.hpp prices each micro-batch per pipeline chunk; messages
//   are micro-batch size × sequence length × hidden size × dtype bytes over `cluster`'s links.
// - Candidates: the named schedule, or the registry's candidate rows (kinds()), each with its
//   micro-batch order searched, and each (split, kind) scheduled only when its lower bound is
//   below the fastest candidate so far (choose()); the V schedules run on each device's layers
//   split into two chunks placed as a V (v_config()). The fastest candidate whose simulated
//   peak fits the budget wins (ties: the earlier one), polished when far from its bound.
// - dp > 1: micro-batches balanced over the replicas (batching/dp_balance.hpp), each replica
//   scheduled alone, the kind judged by the slowest replica; rank = replica · S + device.
// - Lowering and validation of the winner alone; its arena plus model state must fit the device
//   memory on every rank, else plans are made under smaller budgets and the fastest that fits
//   wins (memory_replans).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/batching/cost_cache.hpp"
#include "pipeplan/batching/dp_balance.hpp"
#include "pipeplan/batching/exact_split.hpp"
#include "pipeplan/bridge/split_to_scenario.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/parallel.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/schedule/adaptive.hpp"
#include "pipeplan/schedule/interleaved.hpp"
#include "pipeplan/schedule/memory_bound.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"
#include "pipeplan/schedule/order_search.hpp"
#include "pipeplan/schedule/registry.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/zero_bubble.hpp"

namespace pipeplan::plan {

/// The links between pipeline neighbours.
struct cluster_options {
    double bandwidth_gbps = 100.0;  ///< inter-node link (Gbit/s); DynaPipe's uniform cluster
    double latency_us = 0.0;        ///< inter-node latency per message
    std::uint32_t devices_per_node = 1;        ///< > 1: neighbours within a node use the figures below
    double intra_node_bandwidth_gbps = 0.0;    ///< 0 = same as bandwidth_gbps
    double intra_node_latency_us = -1.0;       ///< < 0 = same as latency_us

    [[nodiscard]] schedule::network_model network() const {
        if (!(bandwidth_gbps > 0.0) || !(latency_us >= 0.0) || devices_per_node == 0)
            throw invalid_argument("cluster: bandwidth must be > 0 Gbit/s, latency >= 0 us, devices per node >= 1");
        schedule::network_model n;
        n.bandwidth_gbps = bandwidth_gbps;
        n.latency_ms = latency_us / 1000.0;
        n.devices_per_node = devices_per_node;
        n.intra_node_bandwidth_gbps = intra_node_bandwidth_gbps > 0.0 ? intra_node_bandwidth_gbps : bandwidth_gbps;
        n.intra_node_latency_ms = (intra_node_latency_us >= 0.0 ? intra_node_latency_us : latency_us) / 1000.0;
        return n;
    }
};

struct planner_options {
    /// Stages, chunks, layers per stage, tp, dp, ZeRO, device memory. Non-uniform layers per
    /// stage: `config.chunks = batching::layout_from_layer_counts(layers, encoder_decoder)` with
    /// `config.stages` = layers.size() / `config.virtual_chunks` (pipeplan accounting only).
    batching::pipeline_config config;
    batching::split_options split;         ///< accounting, length rules, ...
    cluster_options cluster;
    int hidden_size = 0;                   ///< the model's hidden size (message sizes); required
    dtype type = dtype::fp16;              ///< activation / gradient element type
    /// The send rule of the transport the plan is for (send_rule.hpp: buffered for CPU threads
    /// and gloo, blocking or grouped for NCCL): recorded in the header, validated under.
    send_rule sends = send_rule::buffered;
    /// A built-in or registered schedule (schedule/registry.hpp); nullopt: choose (see the file comment).
    std::optional<schedule::schedule_id> schedule;
    std::size_t order_search_evaluations = 24;        ///< per adaptive candidate
    /// The price of an overlapped forward/backward for the schedules that overlap them
    /// (dualpipe-v: schedule::named_schedule_options::overlap_factor): 1 = no overlap benefit,
    /// the default, since how much two micro-batches' forward and backward hide each other is
    /// the model's and kernels' property; set it from a measurement. Below 1 the rows that
    /// overlap pairs (schedule_traits::overlaps_pairs: dualpipe-v) become candidates too.
    double overlap_factor = 1.0;
    /// The V schedules (zb-v, v-half, v-min): weight gradients a device may leave pending before
    /// it runs one first (named_schedule_options::max_pending_w; 0 = W only fills waits).
    std::size_t max_pending_w = 0;
    std::uint64_t seed = 1;
    std::uint64_t iteration = 0;
    bool compare_splits = true;            ///< also schedule the available-memory split
    /// Also schedule up to this many runner-up splits of the preferred limit (splits the
    /// exact split solved on its way, next best by objective: batching::exact_split's alternatives).
    std::size_t alternative_splits = 0;
    /// Also split with these weights of the fill term (batching::split_options::fill_weights):
    /// the exact split's (S − 1) · t_max / C overprices fill and drain when the order search puts light
    /// micro-batches at the pipeline's ends, so fewer, larger micro-batches may run faster.
    std::vector<double> fill_weights = {0.5, 0.25};
    /// How many extra splits (fill weights, runner-ups) are scheduled with every candidate kind
    /// besides the preferred and available ones. When there are more, each extra split is first
    /// screened by one quick simulation (on the order search's structured starts only) with the
    /// kind of the fastest candidate so far — the first V kind runs on the preferred and
    /// available splits before the screen, so a V kind screens when a V leads and no kind on the
    /// configuration itself can beat it by its lower bound (else zb-h1 screens) — and the best by
    /// that makespan are kept (ties: the earlier split).
    std::size_t scheduled_extra_splits = 1;
    /// Polish: when the chosen candidate's simulated makespan is more than this factor over its
    /// lower bound (per replica), its order search continues from its best order for
    /// polish_evaluations more simulations, and the result is kept when faster. Few large
    /// micro-batches of unequal stage loads (T5 on long samples) need more than
    /// order_search_evaluations to find an order without idle gaps; near-tight plans pay nothing.
    double polish_above_ratio = 1.04;
    std::size_t polish_evaluations = 96;  ///< 0 = no polish
    /// Pruning by lower bounds: a candidate (split, kind) is scheduled only if its lower bound is
    /// below the fastest makespan so far by more than this share, so the plan is within it of the
    /// fastest candidate the exact search finds (at most 1 / (1 - share) times its makespan, under
    /// one budget). In [0, 0.01); 0 = the exact rule: prune only candidates that cannot beat, or
    /// tie from an earlier place in the fixed order, the fastest so far (the default). A candidate
    /// kept within the tolerance may need more memory once lowered than the one the exact search
    /// picks, and then the memory re-plans cost far more than the pruning saved (the 1M-sample
    /// plan with 1e-4: +0.33 %, 3x the time; with 2e-5 the same plan, two of six V candidates
    /// saved; docs/plans.md), so it is off by default.
    double bound_tolerance = 0.0;
    /// Worker threads (>= 1) for the splits after the first (split_modes()), the candidate
    /// schedules and the per-rank buffer planning. The plan does not depend on it: splits are
    /// grouped and candidates compared in a fixed order (split, then kind) and ties go to the
    /// earlier one, so any thread count gives byte-identical plans.
    std::size_t threads = 1;
    /// When the preferred split needed recomputation, or its largest micro-batch stores within
    /// 1 % of its stored-activation limit (memory held the split back): also split under every
    /// later mode of split_options::recompute_ladder (e.g. full after selective), each mode with
    /// its own preferred, available and reweighted splits, and schedule each such split whose
    /// lower bound is below the fastest candidate so far. The first mode under which a split
    /// exists is not always the fastest: more recomputation allows fewer, larger micro-batches.
    /// (Not when memory does not hold the first mode back: the later modes' splits would triple
    /// the split time of a GPT-6.7B 65k plan at 36000 MB and not win.)
    bool compare_recompute = true;
    /// How many plans under smaller budgets the planner makes at most when the lowered plan's
    /// arena plus model state exceeds the device memory on some rank: it lowers the budget until a
    /// plan fits, then bisects between the largest budget whose plan fits and the smallest whose
    /// plan does not, and keeps the fastest plan that fits (plan_result::memory_attempts).
    std::size_t memory_replans = 8;
    /// The memory re-plans stop once no budget left to try can give a plan faster, by more than
    /// this share of the makespan, than the fastest plan that fits: while the plans made so far
    /// have at least memory_replan_gain_microbatches micro-batches each and are no faster under
    /// smaller budgets, the plan under the smallest budget whose plan did not fit bounds what
    /// bisecting below it can gain. 0 = bisect until the budgets are 0.5 % of the device memory apart.
    double memory_replan_gain = 0.001;
    /// The fewest micro-batches of the plans for which memory_replan_gain applies: plans of
    /// thousands of micro-batches (GPT-6.7B, 250k–1M samples) get slower step by step as the
    /// budget falls, while plans of tens (65k tokens) may plan 0.7 % faster under a budget
    /// 1000 MB lower, where the bound does not hold.
    std::size_t memory_replan_gain_microbatches = 1000;
    /// Memory probes: where memory binds the plan (it needed memory re-plans, its split
    /// recomputes, or its largest micro-batch stores at least 90 % of its stored limit) and it
    /// has fewer than memory_replan_gain_microbatches micro-batches, plans are also made under
    /// budgets these shares below the kept plan's budget, and the fastest that fits wins. The
    /// plan under a budget is not monotone in it (the split, the candidates and the re-plans'
    /// budgets move with it), so a smaller limit may have found a faster plan under a budget a
    /// larger limit's search never tries; the probes try some. A probe schedules only candidates
    /// whose lower bound beats the fastest plan so far (plan_result::memory_probes). Empty (the
    /// default) = only memory_replan_probe_shares' probes; recommended_memory_probe_shares() is the
    /// set measured in docs/plans.md. Off by default: where they run, a plan costs 1.8-2.9x as
    /// much on GPT-6.7B 65k and ~8x on T5-11B 65k (each probe re-splits).
    std::vector<double> memory_probe_shares = {};
    /// Where the memory re-plans ran (the plan under the device memory needed more than it), or
    /// the plan fits at once but needs more than the largest of these shares below the device
    /// memory (a limit that much smaller would have re-planned it), and memory_probe_shares is
    /// empty, plans are also made under budgets these shares below the kept plan's budget, as
    /// memory_probe_shares' probes are. The re-plans try budgets that depend on the limit, so a
    /// budget that gave a smaller limit a faster plan that fits is not tried at a larger one;
    /// probes within 2 % recover most such plans (docs/plans.md, "More memory never slower").
    /// Other plans that fit at once never probe. Empty = off.
    std::vector<double> memory_replan_probe_shares = {0.005, 0.01, 0.02};

    /// The memory probes' shares measured in docs/plans.md ("Memory probes"): 0.5, 1, 2, 4, 8,
    /// 16 and 32 % below the kept plan's budget (`pipeplan plan --memory-probes`).
    [[nodiscard]] static std::vector<double> recommended_memory_probe_shares() {
        return {0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32};
    }
};

/// One schedule tried.
struct candidate_report {
    std::string name;
    std::string split;  ///< which split ("preferred" / "available" limit)
    double makespan_ms = 0.0;
    double peak_memory_mb = 0.0;  ///< max over ranks
    bool feasible = false;
    bool polished = false;  ///< the chosen candidate after the polish (planner_options::polish_above_ratio)
};

struct planning_times {
    double split_ms = 0.0, schedule_ms = 0.0, lower_ms = 0.0, validate_ms = 0.0, total_ms = 0.0;
};

/// What plan() returns.
struct plan_result {
    execution_plan plan;
    std::vector<candidate_report> candidates;
    std::size_t chosen = 0;  ///< index in `candidates` of the plan's candidate (its polished report when polished)
    batching::split_result split;             ///< the split of the chosen plan
    double makespan_ms = 0.0;                 ///< simulated (slowest replica)
    double lower_bound_ms = 0.0;              ///< of the chosen split and placement
    std::vector<double> peak_memory_mb;       ///< per rank, simulated
    std::vector<double> arena_mb;             ///< per rank, planned arena
    std::vector<double> live_peak_mb;         ///< per rank, largest simultaneously-live set
    std::vector<double> model_state_mb;       ///< per rank, the model state of its stages
    /// The memory budget the plan was made under (MB): the device memory, or less when the plan
    /// made under the device memory needed more (arena + model state) than the device has.
    double budget_mb = 0.0;
    std::size_t memory_attempts = 1;          ///< plans made to find one within the device memory
    std::size_t memory_probes = 0;            ///< plans made under smaller budgets to find a faster one (the memory probes)
    planning_times times;
    /// Replica 0's scenario, schedule and simulation (for traces and charts).
    schedule::scenario scenario;
    schedule::pipeline_schedule schedule;
    schedule::simulation_result simulation;
    /// Every replica's simulation (replica k's timeline drives rank k · S + d in traces).
    std::vector<schedule::simulation_result> simulations;
};

/// The non-throwing form's value: a result or the error's text.
struct plan_outcome {
    std::optional<plan_result> result;
    std::string error;
    [[nodiscard]] bool ok() const noexcept { return result.has_value(); }
};

namespace detail {

/// One replica's scheduled candidate (order[i] = micro-batch of the replica's split list).
using scheduled = schedule::ordered_schedule;

using clock = std::chrono::steady_clock;
inline double ms_since(clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
}

}  // namespace detail

/// The reusable planner (see the file comment). Keeps the options and the simulator's scratch
/// memory between iterations; the cost model is held by reference and must outlive it.
template <cost_model Model>
class planner {
public:
    planner(const Model& model, planner_options options) : model_(model), opt_(std::move(options)) {
        if (opt_.hidden_size <= 0)
            throw invalid_argument("planner: the model's hidden size is needed for the message sizes (got " +
                                   std::to_string(opt_.hidden_size) + ")");
        if (opt_.config.device_memory_mb <= 0) throw invalid_argument("planner: device memory must be > 0 MB");
        if (!opt_.config.chunks.empty() && opt_.split.accounting != batching::accounting_mode::pipeplan)
            throw invalid_argument("planner: an explicit chunk layout (non-uniform layers per stage) needs the pipeplan "
                                   "accounting (dynapipe's assumes uniform stages)");
        (void)opt_.cluster.network();  // validates
        if (opt_.threads < 1) throw invalid_argument("planner: threads must be >= 1 (got 0)");
        if (opt_.schedule) (void)config_of(opt_.schedule->traits());  // a V needs v_config()
        if (!(opt_.overlap_factor >= 0.0 && opt_.overlap_factor <= 1.0))
            throw invalid_argument("planner: the overlap factor must lie in [0, 1] (got " + std::to_string(opt_.overlap_factor) + ")");
        if (opt_.alternative_splits > 64) throw invalid_argument("planner: alternative splits must be <= 64");
        if (!(opt_.memory_replan_gain >= 0.0 && std::isfinite(opt_.memory_replan_gain)))
            throw invalid_argument("planner: the memory re-plans' gain must be finite and >= 0 (got " +
                                   std::to_string(opt_.memory_replan_gain) + ")");
        for (const std::vector<double>* shares : {&opt_.memory_probe_shares, &opt_.memory_replan_probe_shares})
            for (double p : *shares)
                if (!(p > 0.0 && p < 1.0))
                    throw invalid_argument("planner: memory probe shares must lie in (0, 1) (got " + std::to_string(p) + ")");
        if (!(opt_.bound_tolerance >= 0.0 && opt_.bound_tolerance < 0.01))
            throw option_error("bound_tolerance", "planner: {} must lie in [0, 0.01) (got " + std::to_string(opt_.bound_tolerance) + ")");
        if (std::isnan(opt_.polish_above_ratio))
            throw invalid_argument("planner: the polish ratio must not be NaN (infinity = never polish)");
        for (double w : opt_.fill_weights)
            if (!(w >= 0) || !std::isfinite(w))
                throw invalid_argument("planner: fill weights must be finite and >= 0 (got " + std::to_string(w) + ")");
    }

    [[nodiscard]] const planner_options& options() const noexcept { return opt_; }
    /// Sets the iteration number the next plans carry in their header (planner_options::iteration).
    void set_iteration(std::uint64_t iteration) noexcept { opt_.iteration = iteration; }

    /// Plans one iteration of `batch`; throws pipeplan::error when no valid plan exists:
    /// split_error (a sample or the model states do not fit), invalid_argument (bad input),
    /// limit_exceeded (no candidate schedule fits the device memory), plan_error.
    /// The plan's arena plus model state fits the device memory on every rank: when the plan made
    /// under the device memory needs more, plans are made under smaller budgets and the fastest
    /// that fits is returned (planner_options::memory_replans; plan_result::budget_mb says which).
    [[nodiscard]] plan_result plan(std::span<const batching::sample> batch) {
        return within_memory([&] { return plan_under_budget(batch); });
    }

    /// plan() without exceptions: the result, or the error's message.
    [[nodiscard]] plan_outcome try_plan(std::span<const batching::sample> batch) noexcept {
        plan_outcome out;
        try {
            out.result = plan(batch);
        } catch (const std::exception& e) {
            out.error = e.what();
        } catch (...) {
            out.error = "unknown error";
        }
        return out;
    }

private:
    /// plan() with schedules under budget_mb_: the splits of the first
    /// recomputation mode that fits, then (planner_options::compare_recompute, when that mode
    /// recomputes or its stored limit binds: stored_limit_binds()) those of each later mode of the
    /// ladder, each mode's splits one group (choose()). With threads > 1 the splits that do not
    /// wait for another (split_modes()) run on the workers; the splits are the same.
    [[nodiscard]] plan_result plan_under_budget(std::span<const batching::sample> batch) {
        const auto t0 = detail::clock::now();
        std::vector<mode_splits> modes(1);
        modes[0].base = opt_.split;
        solve_preferred(batch, modes[0], costs_);
        const auto& ladder = opt_.split.recompute_ladder;
        const auto first = std::find(ladder.begin(), ladder.end(), modes[0].pref->recompute);
        if (opt_.compare_recompute && first != ladder.end() && (first != ladder.begin() || stored_limit_binds(*modes[0].pref)))
            for (auto r = first + 1; r != ladder.end(); ++r) {
                modes.emplace_back().base = opt_.split;
                modes.back().base.recompute_ladder = {*r};
            }
        split_modes(batch, modes);
        std::vector<named_split> splits;
        std::vector<split_group> groups;
        for (std::size_t k = 0; k < modes.size(); ++k) {
            mode_splits& m = modes[k];
            if (m.pref_error) {  // a later mode without a split is left out, as is its available split
                try {
                    std::rethrow_exception(m.pref_error);
                } catch (const error&) {
                    continue;
                }
            }
            if (m.alt_error) std::rethrow_exception(m.alt_error);
            add_group(m, splits, groups);
        }
        return finish(std::move(splits), std::move(groups), t0);
    }

    /// Whether the exact split was held back by its stored-activation limit: its largest
    /// micro-batch stores at least `share` of the limit (by default within 1 %:
    /// memory_binds_share). Then a mode with more recomputation stores less per micro-batch and
    /// may run fewer, larger ones faster.
    [[nodiscard]] static bool stored_limit_binds(const batching::split_result& s, double share = memory_binds_share) {
        double stored_mb = 0.0;
        for (const batching::microbatch_record& m : s.per_microbatch) stored_mb = std::max(stored_mb, m.cost.stored_mb);
        return s.memory_limit_mb > 0.0 && stored_mb >= share * s.memory_limit_mb;
    }
    static constexpr double memory_binds_share = 0.99;

    using named_split = std::pair<std::string, batching::split_result>;
    /// Splits [begin, end) of one recomputation mode; the first `always` are scheduled in full,
    /// the others after screening (screen()).
    struct split_group {
        std::size_t begin = 0, always = 0, end = 0;
    };

    /// The exact splits of one recomputation mode (one group): the preferred split with its
    /// reweighted splits and runner-ups, and the available-memory split (compare_splits). An
    /// exception of either solve is kept and rethrown where the one-thread order would meet it.
    struct mode_splits {
        batching::split_options base;
        std::optional<batching::split_result> pref, alt;
        std::vector<batching::split_result> runner_ups, reweighted;
        std::exception_ptr pref_error, alt_error;
    };

    /// The preferred split of `m.base`'s modes, with its reweighted splits and runner-ups.
    void solve_preferred(std::span<const batching::sample> batch, mode_splits& m, batching::shape_cost_cache& cache) {
        batching::split_options so = m.base;
        so.alternative_splits = static_cast<int>(opt_.alternative_splits);
        so.fill_weights = opt_.fill_weights;
        m.pref = batching::exact_split(model_, batch, opt_.config, so, nullptr, &cache,
                                       opt_.alternative_splits > 0 ? &m.runner_ups : nullptr,
                                       opt_.fill_weights.empty() ? nullptr : &m.reweighted, &orders_);
    }

    /// Whether a mode's available-memory search is bounded by its preferred split's objective
    /// (available_split()): only when that split took the preferred limit without recomputation.
    [[nodiscard]] static bool available_bounded(const batching::split_result& preferred) noexcept {
        return preferred.limit == batching::memory_limit_kind::preferred && preferred.recompute == recompute_mode::none;
    }

    /// The splits of `modes` that plan_under_budget() still needs: modes[0]'s available split
    /// (its preferred one is solved), both splits of each later mode. One thread: in that order.
    /// More: as tasks on the workers, each with its worker's shape-cost cache (the splits do not
    /// depend on a cache), the available splits first. A later mode's available split waits for
    /// its preferred split only where the latter could bound it (the mode is `none`); else the
    /// two run apart.
    void split_modes(std::span<const batching::sample> batch, std::vector<mode_splits>& modes) {
        struct split_task {
            std::size_t mode;
            bool pref, alt;
        };
        std::vector<split_task> tasks;
        if (opt_.compare_splits) tasks.push_back({0, false, true});
        for (std::size_t k = 1; k < modes.size(); ++k) {
            const bool apart = opt_.threads > 1 && modes[k].base.recompute_ladder.front() != recompute_mode::none;
            if (!apart) {
                tasks.push_back({k, true, opt_.compare_splits});
                continue;
            }
            tasks.push_back({k, true, false});
            if (opt_.compare_splits) tasks.push_back({k, false, true});
        }
        // More threads: the larger tables first (the available limit is above the preferred
        // one, and later modes store less per sample: longer rows), so the workers finish together.
        const auto larger = [](const split_task& x, const split_task& y) { return x.alt != y.alt ? x.alt : x.mode > y.mode; };
        if (opt_.threads > 1) std::stable_sort(tasks.begin(), tasks.end(), larger);
        const std::size_t workers = parallel_workers(tasks.size(), opt_.threads);
        if (extra_costs_.size() + 1 < workers) extra_costs_.resize(workers - 1);
        parallel_for(tasks.size(), opt_.threads, [&](std::size_t t, std::size_t worker) {
            mode_splits& m = modes[tasks[t].mode];
            batching::shape_cost_cache& cache = worker == 0 ? costs_ : extra_costs_[worker - 1];
            if (tasks[t].pref) {
                try {
                    solve_preferred(batch, m, cache);
                } catch (...) {
                    m.pref_error = std::current_exception();
                    return;  // (one thread: the mode's available split is not solved)
                }
            }
            if (!tasks[t].alt) return;
            try {
                const bool solved = tasks[t].pref || tasks[t].mode == 0;  // the preferred split is known
                m.alt = available_split(batch, m.base, solved ? &*m.pref : nullptr, cache);
            } catch (...) {
                m.alt_error = std::current_exception();
            }
        });
        for (std::size_t k = 0; k < modes.size(); ++k)  // the filters that need the preferred split
            if (modes[k].pref && modes[k].alt && !keep_available(*modes[k].alt, *modes[k].pref)) modes[k].alt.reset();
    }

    /// Appends mode `m`'s splits as one group: the exact DP's (named by its recomputation mode
    /// when not the first group), the available-memory split, the reweighted splits and
    /// runner-ups; a split already in `splits` (same micro-batches and mode) is left out.
    void add_group(mode_splits& m, std::vector<named_split>& splits, std::vector<split_group>& groups) {
        split_group g{splits.size(), 0, 0};
        const std::string prefix = groups.empty() ? "" : std::string(to_string(m.base.recompute_ladder.front())) + " ";
        const auto add = [&](std::string name, batching::split_result&& s) {
            for (std::size_t k = 0; k < splits.size(); ++k)  // (in this group: the same micro-batches)
                if (splits[k].second.microbatches == s.microbatches && (k >= g.begin || splits[k].second.recompute == s.recompute))
                    return;
            splits.emplace_back(prefix + name, std::move(s));
        };
        add("preferred", std::move(*m.pref));
        if (m.alt) add("available", std::move(*m.alt));
        g.always = splits.size() - g.begin;  // scheduled in full; the extras below are screened
        for (std::size_t k = 0; k < m.reweighted.size(); ++k)
            add("fill weight " + format_weight(opt_.fill_weights[k]), std::move(m.reweighted[k]));
        for (std::size_t k = 0; k < m.runner_ups.size(); ++k) add("runner-up " + std::to_string(k + 1), std::move(m.runner_ups[k]));
        g.end = splits.size();
        if (g.end > g.begin) groups.push_back(g);
    }

public:

    /// Plans the given micro-batches of `batch` (sample ids, each sample in exactly one) instead
    /// of splitting it: they are priced under the first rung of the memory ladder where all fit
    /// and scheduled like a split (e.g. to price another planner's split with this one). Packed
    /// micro-batches (`layout`, batching/packing.hpp) are priced as their rows, and the plan's
    /// micro-batch table keeps the rows (microbatch_entry::row_sizes).
    /// Throws invalid_argument (bad ids, rows that do not hold the micro-batch's samples) or
    /// split_error (the micro-batches fit under no rung).
    [[nodiscard]] plan_result plan_microbatches(std::span<const batching::sample> batch,
                                                std::vector<std::vector<int>> microbatches,
                                                batching::packed_layout layout = {}) {
        check_microbatches(batch.size(), microbatches, layout);
        return within_memory([&] {
            const auto t0 = detail::clock::now();
            const batching::split_context<Model> ctx(model_, batch, opt_.config, opt_.split);
            std::vector<named_split> splits;
            splits.emplace_back("given", ctx.assemble_first_fitting("given", microbatches, layout));
            return finish(std::move(splits), {split_group{0, 1, 1}}, t0);
        });
    }

    /// What simulate_split() returns: the split's schedule simulated per replica (no lowering).
    struct split_simulation {
        candidate_report report;          ///< makespan (slowest replica), max peak, feasible
        std::string error;                ///< why it cannot run at all (e.g. a replica without micro-batches)
        double lower_bound_ms = 0.0;      ///< max over replicas
        schedule::scenario scenario;      ///< replica 0's (in the order scheduled)
        schedule::pipeline_schedule schedule;
        schedule::simulation_result simulation;
    };

    /// Schedules a finished split (e.g. a baseline's) with `kind` on every replica (balanced over
    /// dp first when the split is not) and simulates it, without lowering: the quick way to price
    /// many splits under the planner's timing model. `search_order`: the planner's order search
    /// (false: the micro-batches run in the split's order, as a trainer runs a fixed split).
    [[nodiscard]] split_simulation simulate_split(batching::split_result split, schedule::schedule_name kind,
                                                  bool search_order) {
        const int dp = std::max(1, opt_.config.dp);
        if (dp > 1 && split.dp_groups.empty()) batching::balance_result(split, dp);
        if (ws_.empty()) ws_.resize(1);
        split_simulation out;
        std::vector<schedule::scenario> scs;
        try {
            const batching::pipeline_config cfg = config_of(schedule::traits_of(kind));
            for (std::size_t r = 0; r < static_cast<std::size_t>(dp); ++r)
                scs.push_back(replica_scenario(split, replica_mbs(split, r), cfg));
        } catch (const invalid_argument& e) {  // e.g. fewer micro-batches than replicas
            out.report = candidate_report{std::string(schedule::to_string(kind)), "given",
                                          std::numeric_limits<double>::infinity(), 0.0, false};
            out.error = e.what();
            return out;
        }
        candidate_run c = run_candidate(schedule::traits_of(kind), "given", scs, ws_.front(), search_order ? opt_.order_search_evaluations : 0);
        out.report = c.report;
        if (c.replicas.empty()) return out;
        for (const auto& rep : c.replicas) out.lower_bound_ms = std::max(out.lower_bound_ms, rep.sim.lower_bound_ms);
        out.scenario = std::move(c.replicas.front().sc);
        out.schedule = std::move(c.replicas.front().sched);
        out.simulation = std::move(c.replicas.front().sim);
        return out;
    }

    /// plan_microbatches() without exceptions.
    [[nodiscard]] plan_outcome try_plan_microbatches(std::span<const batching::sample> batch,
                                                     std::vector<std::vector<int>> microbatches,
                                                     batching::packed_layout layout = {}) noexcept {
        plan_outcome out;
        try {
            out.result = plan_microbatches(batch, std::move(microbatches), std::move(layout));
        } catch (const std::exception& e) {
            out.error = e.what();
        } catch (...) {
            out.error = "unknown error";
        }
        return out;
    }

private:
    /// Throws invalid_argument unless every sample of a batch of `n` is in exactly one of the
    /// micro-batches, and each packed micro-batch's rows hold exactly its samples.
    static void check_microbatches(std::size_t n, const std::vector<std::vector<int>>& microbatches,
                                   const batching::packed_layout& layout) {
        std::vector<int> seen(n, 0);
        for (std::size_t k = 0; k < microbatches.size(); ++k) {
            if (microbatches[k].empty())
                throw invalid_argument("plan: given micro-batch " + std::to_string(k) + " is empty");
            for (int id : microbatches[k]) {
                if (id < 0 || static_cast<std::size_t>(id) >= n)
                    throw invalid_argument("plan: given micro-batch " + std::to_string(k) + " names sample " +
                                           std::to_string(id) + ", but the batch has " + std::to_string(n) + " samples");
                if (seen[static_cast<std::size_t>(id)]++)
                    throw invalid_argument("plan: sample " + std::to_string(id) + " is in more than one given micro-batch");
            }
            if (k >= layout.rows.size() || layout.rows[k].empty()) continue;
            std::vector<int> in_rows;
            for (const auto& row : layout.rows[k]) {
                if (row.empty()) throw invalid_argument("plan: given micro-batch " + std::to_string(k) + " has an empty row");
                in_rows.insert(in_rows.end(), row.begin(), row.end());
            }
            std::vector<int> members = microbatches[k];
            std::sort(in_rows.begin(), in_rows.end());
            std::sort(members.begin(), members.end());
            if (in_rows != members)
                throw invalid_argument("plan: the rows of given micro-batch " + std::to_string(k) +
                                       " do not hold exactly its samples");
        }
        if (layout.rows.size() > microbatches.size())
            throw invalid_argument("plan: rows are given for " + std::to_string(layout.rows.size()) + " micro-batches, but there are " +
                                   std::to_string(microbatches.size()));
        for (std::size_t i = 0; i < seen.size(); ++i)
            if (!seen[i]) throw invalid_argument("plan: sample " + std::to_string(i) + " is in no given micro-batch");
    }

    /// Balances the splits over the replicas, chooses, lowers and validates (plan()'s common part).
    /// Each group's first `always` splits are scheduled in full, the others after screening.
    [[nodiscard]] plan_result finish(std::vector<named_split> splits, std::vector<split_group> groups,
                                     detail::clock::time_point t0) {
        plan_result res;
        const int dp = std::max(1, opt_.config.dp);
        if (dp > 1) balance_over_replicas(splits, groups, dp);
        res.times.split_ms = detail::ms_since(t0);

        const auto t1 = detail::clock::now();
        choice c = choose(splits, groups, res.candidates);
        std::vector<detail::scheduled>& best = c.replicas;
        if (best.empty()) throw limit_exceeded("plan: no candidate schedule fits in " +
                                                 std::to_string(budget_mb_) + " MB per device" +
                                                 describe(res.candidates));
        res.chosen = polish(*c.kind, splits[c.split].first, best, res.candidates) ? res.candidates.size() - 1 : c.report;
        res.times.schedule_ms = detail::ms_since(t1);

        const auto t2 = detail::clock::now();
        res.split = std::move(splits[c.split].second);
        res.plan = assemble(res.split, best);
        res.times.lower_ms = detail::ms_since(t2);

        const auto t3 = detail::clock::now();
        validate_or_throw(res.plan);
        res.times.validate_ms = detail::ms_since(t3);
        summarize(res, best);
        res.times.total_ms = detail::ms_since(t0);
        return res;
    }

    /// Balances every split's micro-batches over the `dp` replicas; a split with fewer
    /// micro-batches than replicas is no candidate (the groups keep the others, an emptied group
    /// is dropped). Throws invalid_argument when no split gives every replica work.
    static void balance_over_replicas(std::vector<named_split>& splits, std::vector<split_group>& groups, int dp) {
        std::vector<named_split> kept;
        std::vector<split_group> kept_groups;
        for (const split_group& g : groups) {
            split_group h{kept.size(), 0, 0};
            for (std::size_t k = g.begin; k < g.end; ++k) {
                batching::balance_result(splits[k].second, dp);
                const auto& parts = splits[k].second.dp_groups;
                if (std::any_of(parts.begin(), parts.end(), [](const auto& p) { return p.empty(); })) continue;
                h.always += k < g.begin + g.always ? 1 : 0;
                kept.push_back(std::move(splits[k]));
            }
            h.end = kept.size();
            if (h.end > h.begin) kept_groups.push_back(h);
        }
        if (kept.empty())
            throw invalid_argument("plan: the batch splits into " + std::to_string(splits.front().second.microbatches.size()) +
                                   " micro-batches, which leave a replica of " + std::to_string(dp) + " without work");
        splits = std::move(kept);
        groups = std::move(kept_groups);
    }

    const Model& model_;
    planner_options opt_;
    std::vector<schedule::simulation_workspace> ws_;  ///< one per worker thread
    batching::shape_cost_cache costs_;  ///< shape costs shared by the splits of every iteration
    std::vector<batching::shape_cost_cache> extra_costs_;  ///< workers 1.. of split_modes(): their own
    /// The splits' initial sample orders of the batch last split. split_modes()'s workers share
    /// it: the first preferred split (on the calling thread) fills it, and the later splits of the
    /// same batch pad the same shapes, so they only read it.
    batching::order_memo orders_;
    /// The schedules' memory limit: the device memory, or less while within_memory() re-plans.
    double budget_mb_ = opt_.config.device_memory_mb;
    /// The makespan a candidate must beat to be scheduled (choose()): infinite, or while a memory
    /// probe runs the fastest plan so far (probe_below()).
    double beat_ms_ = std::numeric_limits<double>::infinity();

    /// The split under the available memory alone (nullopt: none). When `preferred` (the
    /// mode's preferred split, if solved before) needed no recomputation (available_bounded()),
    /// its micro-batches also fit the available rung at the same costs, so only strictly better
    /// objectives are searched for (the bound prunes the exact split); keep_available() then
    /// drops a split that is the preferred one or not strictly better.
    [[nodiscard]] std::optional<batching::split_result> available_split(std::span<const batching::sample> batch,
                                                                       const batching::split_options& base,
                                                                       const batching::split_result* preferred,
                                                                       batching::shape_cost_cache& cache) {
        batching::split_options so = base;
        so.limit_ladder = {batching::memory_limit_kind::available};
        if (preferred && available_bounded(*preferred)) so.objective_bound_ms = preferred->objective_ms;
        try {
            return batching::exact_split(model_, batch, opt_.config, so, nullptr, &cache, nullptr, nullptr, &orders_);
        } catch (const error&) {
            return std::nullopt;  // no split under the available memory alone: keep the preferred one
        }
    }
    /// Whether the available split `alt` is a candidate beside `preferred`: it differs, and
    /// beats it when the search was bounded by it.
    [[nodiscard]] static bool keep_available(const batching::split_result& alt, const batching::split_result& preferred) {
        if (alt.microbatches == preferred.microbatches) return false;
        return !available_bounded(preferred) || alt.objective_ms < preferred.objective_ms;
    }

    /// The memory re-plans' search over budgets (within_memory()). Below the device memory, a
    /// budget either gave a plan that fits (arena + model state within the device memory), a
    /// plan that does not, or no plan. Until one fits, each budget lies below the smallest that
    /// did not fit by the excess seen, at least twice the previous step (the need does not always
    /// fall with the budget: a plan may need as much under a budget 700 MB lower), or halfway
    /// between that and the largest budget without a plan when the step would pass the latter;
    /// once one fits, the next budget bisects between the largest that fit and the smallest that
    /// did not, until they are replan_tolerance of the device memory apart, or, while the plans
    /// made so far are `monotone`, until no budget between them can give a plan more than `gain`
    /// (a share) faster than the fastest that fits (planner_options::memory_replan_gain): then a
    /// budget below `over_mb` is taken to give no plan faster than the plan `over_mb` gave, so
    /// bisecting cannot gain more than that plan's lead.
    struct budget_search {
        double device_mb;
        double gain;
        double over_mb;             ///< the smallest budget whose plan did not fit
        double over_ms;             ///< the makespan of the plan under the smallest such budget that gave one
        double under_mb = 0.0;      ///< the largest budget whose plan fits, or (until one fits) without a plan
        bool fitted = false;
        double step_mb = 0.0;
        /// every plan so far had memory_replan_gain_microbatches micro-batches or more, and none
        /// was faster than a plan made under a larger budget
        bool monotone = true;
        std::vector<std::pair<double, double>> seen{};  ///< (budget, makespan) of every plan made

        /// Records the plan made under `budget_mb`; `large`: it has enough micro-batches for the bound.
        void saw(double budget_mb, double makespan_ms, bool large) {
            monotone = monotone && large;
            for (const auto& [b, ms] : seen)
                if ((b < budget_mb && ms < makespan_ms) || (b > budget_mb && ms > makespan_ms)) monotone = false;
            seen.emplace_back(budget_mb, makespan_ms);
        }

        /// The budget to try next, `best_ms` the fastest plan that fits so far; nullopt when the
        /// search is done.
        [[nodiscard]] std::optional<double> next(double excess_mb, double best_ms) {
            const double tolerance_mb = replan_tolerance * device_mb;
            if (over_mb - under_mb <= tolerance_mb) return std::nullopt;
            if (gain > 0.0 && fitted && monotone && best_ms - over_ms <= gain * best_ms) return std::nullopt;
            if (!fitted) {
                step_mb = std::max({excess_mb, 2.0 * step_mb, 1e-3 * device_mb});
                if (over_mb - step_mb > under_mb) return over_mb - step_mb;
            }
            return 0.5 * (under_mb + over_mb);
        }
    };
    /// How close (a share of the device memory) the memory re-plans bring the largest budget
    /// whose plan fits to the smallest whose plan does not.
    static constexpr double replan_tolerance = 0.005;

    /// Runs `plan_once` under the device memory and, when its plan's arena plus model state
    /// exceeds the device memory on some rank, under smaller budgets (budget_search; each the
    /// split's device memory and the schedules' limit, budget_mb_, both, or when no plan exists so
    /// the schedules' limit alone: replan()), planner_options::memory_replans more plans at most,
    /// and keeps the fastest plan that fits (ties: the earlier). Throws limit_exceeded when none fits.
    template <class F>
    plan_result within_memory(F&& plan_once) {
        const auto t0 = detail::clock::now();
        const double device_mb = opt_.config.device_memory_mb;
        struct restore {
            double& split;
            double& schedules;
            double device;
            ~restore() { split = schedules = device; }
        } guard{opt_.config.device_memory_mb, budget_mb_, device_mb};
        plan_result first = plan_once();
        double need_mb = stamp_memory(first, device_mb);
        if (need_mb <= device_mb) {
            probe_below(plan_once, device_mb, first, near_limit(need_mb, device_mb));
            first.times.total_ms = detail::ms_since(t0);
            return first;
        }
        std::optional<plan_result> best;
        budget_search s{device_mb, opt_.memory_replan_gain, device_mb, first.makespan_ms};
        const auto large = [&](const plan_result& r) {
            return r.plan.header.microbatches.size() >= opt_.memory_replan_gain_microbatches;
        };
        s.saw(device_mb, first.makespan_ms, large(first));
        std::string last = "the plan under a budget of " + std::to_string(device_mb) + " MB needs " + std::to_string(need_mb) +
                           " MB (arena + model state) on some rank";
        std::size_t attempts = 1;
        for (std::optional<double> b; attempts <= opt_.memory_replans && (b = s.next(need_mb - device_mb, best ? best->makespan_ms : 0.0)); ++attempts) {
            budget_mb_ = *b;
            try {
                plan_result r = replan(plan_once, device_mb);
                need_mb = stamp_memory(r, device_mb);
                s.saw(*b, r.makespan_ms, large(r));
                if (need_mb > device_mb) {
                    s.over_mb = *b;
                    s.over_ms = r.makespan_ms;
                    last = "the plan under a budget of " + std::to_string(*b) + " MB needs " + std::to_string(need_mb) +
                           " MB (arena + model state) on some rank";
                    continue;
                }
                s.under_mb = *b;
                s.fitted = true;
                if (!best || r.makespan_ms < best->makespan_ms) best = std::move(r);
            } catch (const error& e) {
                if (s.fitted) s.over_mb = *b; else s.under_mb = *b;  // no plan here: search above
                last = e.what();
            }
        }
        if (!best)
            throw limit_exceeded("plan: no plan fits in " + std::to_string(device_mb) + " MB per device after " +
                                 std::to_string(attempts) + (attempts == 1 ? " plan: " : " plans: ") + last);
        best->memory_attempts = attempts;
        probe_below(plan_once, device_mb, *best, true);
        best->times.total_ms = detail::ms_since(t0);
        return std::move(*best);
    }

    /// Whether a plan that fits at once, needing `need_mb` (arena + model state), lies within the
    /// reach of the memory re-plans' probes of the device memory: it needs more than the largest
    /// of memory_replan_probe_shares below it, so a limit that much smaller would re-plan it
    /// (and a smaller limit's re-plans may have found a faster plan under a smaller budget).
    [[nodiscard]] bool near_limit(double need_mb, double device_mb) const {
        const auto& shares = opt_.memory_replan_probe_shares;
        return !shares.empty() && need_mb > (1.0 - *std::max_element(shares.begin(), shares.end())) * device_mb;
    }

    /// Whether memory binds plan `r` (planner_options::memory_probe_shares): it needed memory
    /// re-plans or fits at once near the limit (`replanned`: near_limit()), its split recomputes,
    /// or its largest micro-batch stores at least probe_binds_share of the split's stored limit.
    [[nodiscard]] static bool memory_binds(const plan_result& r, bool replanned) {
        return replanned || r.split.recompute != recompute_mode::none || stored_limit_binds(r.split, probe_binds_share);
    }
    static constexpr double probe_binds_share = 0.9;

    /// The memory probes (planner_options::memory_probe_shares; when that is empty and `kept` came
    /// from the memory re-plans or fits at once near the limit, `replanned`: memory_replan_probe_shares):
    /// where memory binds `kept` and it has fewer than memory_replan_gain_microbatches
    /// micro-batches, plans under each budget the shares below kept's (split's device memory and
    /// schedules' limit both), each scheduling only candidates that may beat the fastest plan so
    /// far (beat_ms_, choice::bar_ms), and keeps the fastest that fits.
    template <class F>
    void probe_below(F& plan_once, double device_mb, plan_result& kept, bool replanned) {
        const std::vector<double>& shares =
            opt_.memory_probe_shares.empty() && replanned ? opt_.memory_replan_probe_shares : opt_.memory_probe_shares;
        if (shares.empty() || kept.plan.header.microbatches.size() >= opt_.memory_replan_gain_microbatches ||
            !memory_binds(kept, replanned))
            return;
        struct reset {
            double& beat;
            ~reset() { beat = std::numeric_limits<double>::infinity(); }
        } guard{beat_ms_};
        const double from_mb = kept.budget_mb;
        const std::size_t attempts = kept.memory_attempts;
        std::size_t probes = 0;
        for (double share : shares) {
            budget_mb_ = opt_.config.device_memory_mb = from_mb * (1.0 - share);
            beat_ms_ = kept.makespan_ms;
            ++probes;
            // Under a probe budget "no plan here" is expected: no split fits it (split_error), no
            // candidate beats the kept plan or fits (limit_exceeded), or the smaller budget gives
            // a split the configuration refuses (invalid_argument, e.g. fewer micro-batches than
            // replicas: the inputs are the kept plan's but for the budget). Anything else (an
            // internal error) propagates.
            try {
                plan_result r = plan_once();
                if (stamp_memory(r, device_mb) <= device_mb && r.makespan_ms < kept.makespan_ms) kept = std::move(r);
            } catch (const batching::split_error&) {
            } catch (const limit_exceeded&) {
            } catch (const invalid_argument&) {
            }
        }
        kept.memory_attempts = attempts;
        kept.memory_probes = probes;
    }

    /// Records the device memory and model state in `r`'s plan header (what validate()'s memory
    /// rule checks) and the budget it was made under; returns the most any rank needs (arena +
    /// model state).
    double stamp_memory(plan_result& r, double device_mb) const {
        r.plan.header.device_memory_mb = device_mb;
        r.plan.header.model_state_mb = r.model_state_mb;
        r.budget_mb = budget_mb_;
        double need_mb = 0.0;
        for (const rank_program& prog : r.plan.programs) need_mb = std::max(need_mb, rank_memory_mb(r.plan.header, prog));
        return need_mb;
    }

    /// plan_once() with the split's device memory at budget_mb_, or when that finds no plan, at
    /// `device_mb` (the schedules' limit alone lowered).
    template <class F>
    plan_result replan(F& plan_once, double device_mb) {
        opt_.config.device_memory_mb = budget_mb_;
        try {
            return plan_once();
        } catch (const error&) {
            opt_.config.device_memory_mb = device_mb;
        }
        try {
            return plan_once();
        } catch (const error& e) {
            throw limit_exceeded("under a budget of " + std::to_string(budget_mb_) + " MB no plan exists: " + e.what());
        }
    }

    /// A fill weight as a split's name shows it (shortest exact decimal, e.g. 0.75).
    static std::string format_weight(double w) {
        char buf[32];
        for (int digits = 1; digits <= 17; ++digits) {
            std::snprintf(buf, sizeof buf, "%.*g", digits, w);
            if (std::strtod(buf, nullptr) == w) break;
        }
        return buf;
    }

    static std::string describe(const std::vector<candidate_report>& cs) {
        std::string s;
        for (const auto& c : cs)
            s += "; " + c.name + " (" + c.split + " split) peaks at " + std::to_string(c.peak_memory_mb) + " MB";
        return s;
    }

    /// The split's micro-batches of one replica (all when dp = 1).
    [[nodiscard]] std::vector<int> replica_mbs(const batching::split_result& s, std::size_t replica) const {
        if (!s.dp_groups.empty()) {
            if (s.dp_groups[replica].empty())
                throw invalid_argument("plan: " + std::to_string(s.microbatches.size()) + " micro-batch(es) leave a replica of dp " +
                                       std::to_string(s.dp_groups.size()) + " without work (give more samples or fewer data-parallel replicas, config.dp)");
            return s.dp_groups[replica];
        }
        std::vector<int> all(s.microbatches.size());
        for (std::size_t j = 0; j < all.size(); ++j) all[j] = static_cast<int>(j);
        return all;
    }

    /// Replica `mbs` of split `s` priced chunk by chunk under configuration `cfg` (opt_.config or v_config()).
    [[nodiscard]] schedule::scenario replica_scenario(const batching::split_result& s, const std::vector<int>& mbs,
                                                      const batching::pipeline_config& cfg) const {
        batching::split_result sub = s;
        sub.accounting = batching::accounting_mode::pipeplan;  // per-chunk pricing of the same shapes
        sub.microbatches.clear();
        sub.per_microbatch.clear();
        for (int j : mbs) {
            sub.microbatches.push_back(s.microbatches[std::size_t(j)]);
            sub.per_microbatch.push_back(s.per_microbatch[std::size_t(j)]);
        }
        bridge::scenario_options so;
        so.hidden_size = opt_.hidden_size;
        so.bytes_per_value = static_cast<double>(dtype_bytes(opt_.type));
        so.network = opt_.cluster.network();
        return bridge::make_scenario_from_split(model_, sub, cfg, so);
    }

    using kind_t = const schedule::schedule_traits*;

    /// The configuration the V schedules run on: the configuration itself when it places a V;
    /// else each device's layers in two chunks placed as a V: one chunk per device with an even
    /// layer count on every device (uniform: two chunks of L / 2; an explicit layout as
    /// batching::layout_from_layer_counts() makes it: batching::v_layout_of()'s halves), or two
    /// uniform chunks per device (the same chunks); nullopt otherwise (an odd count, more chunks,
    /// explicit chunks of C = 2).
    [[nodiscard]] std::optional<batching::pipeline_config> v_config() const {
        batching::pipeline_config cfg = opt_.config;
        if (cfg.v_shape) return cfg;
        if (!cfg.chunks.empty()) {
            auto halves = cfg.virtual_chunks == 1 ? batching::v_layout_of(cfg.chunks) : std::nullopt;
            if (!halves) return std::nullopt;
            cfg.chunks = std::move(*halves);
            cfg.layers_per_stage = 1;  // only a bound with explicit chunks: the largest half
            for (const batching::stage_layout& c : cfg.chunks)
                cfg.layers_per_stage = std::max(cfg.layers_per_stage, c.encoder_layers + c.decoder_layers);
        } else if (cfg.virtual_chunks == 1) {
            if (cfg.layers_per_stage % 2 != 0) return std::nullopt;
            cfg.layers_per_stage /= 2;
        } else if (cfg.virtual_chunks != 2) {
            return std::nullopt;
        }
        cfg.virtual_chunks = 2;
        cfg.v_shape = true;
        return cfg;
    }

    /// The configuration schedule `t` runs on: 0 = opt_.config, 1 = v_config().
    [[nodiscard]] std::size_t config_index(const schedule::schedule_traits& t) const {
        return schedule::places_v(t) && !opt_.config.v_shape ? 1 : 0;
    }
    [[nodiscard]] batching::pipeline_config config_at(std::size_t index) const {
        return index == 0 ? opt_.config : *v_config();
    }
    /// The configuration schedule `t` runs on; throws invalid_argument when it places a V and
    /// there is no v_config().
    [[nodiscard]] batching::pipeline_config config_of(const schedule::schedule_traits& t) const {
        if (config_index(t) == 1 && !v_config())
            throw invalid_argument("planner: schedule '" + t.name +
                                   "' places two chunks per device as a V: it needs an even number of layers per device "
                                   "(one chunk per device, uniform or as config.chunks lays them out) or two uniform chunks "
                                   "per device");
        return config_at(config_index(t));
    }

    /// A candidate schedule kind and the configuration it runs on (config_index()).
    struct candidate_kind {
        kind_t kind = nullptr;
        std::size_t config = 0;
    };

    /// The candidate kinds: the named schedule, or the registry's candidate rows
    /// (schedule_traits::candidate_rank) that run on this configuration: with one chunk per
    /// device those that run one stage per device, with more those that split into chunks, the
    /// ones that run as placed always, and the V schedules whenever v_config() exists.
    [[nodiscard]] std::vector<candidate_kind> kinds() const {
        if (opt_.schedule) {
            const schedule::schedule_traits& t = opt_.schedule->traits();
            return {{&t, config_index(t)}};
        }
        const int C = opt_.config.virtual_chunks;
        const bool v = v_config().has_value();
        std::vector<candidate_kind> out;
        for (kind_t t : schedule::schedules().candidates()) {
            if (t->overlaps_pairs && !(opt_.overlap_factor < 1.0)) continue;  // a pair saves nothing at 1
            bool runs = false;
            if (schedule::places_v(*t)) runs = v;
            else if (t->chunks == schedule::chunk_rule::runs_placed) runs = true;
            else if (t->chunks == schedule::chunk_rule::one_stage_per_device) runs = C == 1;
            else runs = C > 1 && !opt_.config.v_shape;
            if (runs) out.push_back({t, config_index(*t)});
        }
        return out;
    }

    /// The named-schedule options of every kind on scenario `sc` (its placement): the memory
    /// limit, its chunks per device and placement, and in-flight limit `inflight` (0 = none).
    [[nodiscard]] schedule::named_schedule_options schedule_options(const schedule::scenario& sc, std::size_t inflight = 0) const {
        schedule::named_schedule_options no;
        const schedule::stage_placement pl = schedule::placement_of(sc);
        no.chunks = pl.chunks();
        no.placement = pl.kind();
        no.memory_limit_mb = budget_mb_;
        no.inflight_limit = inflight;
        no.overlap_factor = opt_.overlap_factor;
        no.max_pending_w = opt_.max_pending_w;
        return no;
    }

    /// The order search for `kind` on `sc` with `evaluations` simulations, from the structured
    /// starts or, when given, from `start` alone: the best order found (the identity, and
    /// in-flight limit 0, when nothing feasible was found) and the in-flight limit.
    std::pair<std::vector<std::uint32_t>, std::size_t> searched_order(const schedule::schedule_traits& kind,
                                                                       const schedule::scenario& sc, std::size_t evaluations,
                                                                       std::vector<std::uint32_t> start = {}) const {
        std::vector<std::uint32_t> order(sc.microbatches);
        std::iota(order.begin(), order.end(), 0u);
        if (sc.microbatches < 2 || evaluations == 0 || !kind.searchable_order) return {order, 0};
        schedule::order_search_options so;
        so.memory_limit_mb = budget_mb_;
        so.seed = opt_.seed;
        so.max_evaluations = evaluations;
        so.start = std::move(start);
        so.simulate_winner = false;  // schedule_in_order() simulates it
        const auto r = schedule::search_named_order(kind, sc, schedule_options(sc), so);
        if (!r.feasible) return {order, 0};
        return {r.order, r.inflight_limit};
    }

    /// `kind` on `sc` in micro-batch order `order` (relative to sc) with that in-flight limit, simulated.
    detail::scheduled schedule_in_order(const schedule::schedule_traits& kind, const schedule::scenario& sc,
                                        std::vector<std::uint32_t> order, std::size_t inflight,
                                        schedule::simulation_workspace& ws) const {
        schedule::simulation_options simo;
        simo.record_memory_curve = false;
        return schedule::schedule_in_order(kind, sc, schedule_options(sc, inflight), std::move(order), simo, ws);
    }

    /// Schedules one replica's scenario with `kind`: the micro-batch order (and the in-flight
    /// limit) by order search of `evaluations` simulations, then the schedule in that order.
    detail::scheduled run_kind(const schedule::schedule_traits& kind, const schedule::scenario& sc,
                               schedule::simulation_workspace& ws, std::size_t evaluations) const {
        auto [order, inflight] = searched_order(kind, sc, evaluations);
        return schedule_in_order(kind, sc, std::move(order), inflight, ws);
    }

    /// One candidate: a schedule kind on every replica of one split.
    struct candidate_run {
        candidate_report report;
        std::vector<detail::scheduled> replicas;
        std::exception_ptr error{};  ///< run_candidates(): what scheduling it threw (rethrown where it is reported)
    };

    /// Schedules `kind` on every replica scenario `scs` of a split (its name in the report), each
    /// with an order search of `evaluations` simulations.
    candidate_run run_candidate(const schedule::schedule_traits& kind, const std::string& split_name,
                                const std::vector<schedule::scenario>& scs, schedule::simulation_workspace& ws,
                                std::size_t evaluations) const {
        candidate_run c;
        c.report = candidate_report{kind.name, split_name, 0.0, 0.0, true};
        const auto infeasible = [&c] {
            c.report.feasible = false;
            c.report.makespan_ms = std::numeric_limits<double>::infinity();
        };
        try {
            for (const auto& sc : scs) {
                c.replicas.push_back(run_kind(kind, sc, ws, evaluations));
                const auto& sim = c.replicas.back().sim;
                c.report.makespan_ms = std::max(c.report.makespan_ms, sim.makespan_ms);
                for (double p : sim.peak_memory_mb) c.report.peak_memory_mb = std::max(c.report.peak_memory_mb, p);
            }
        } catch (const invalid_argument&) {
            infeasible();  // the generator cannot meet the memory limit
        } catch (const limit_exceeded&) {
            infeasible();  // a micro-batch alone does not fit (e.g. on a V's device 0)
        }
        c.report.feasible = c.report.feasible && c.report.peak_memory_mb <= budget_mb_;
        return c;
    }

    /// The chosen candidate: its replicas, split (index), kind, report (index) and place in the
    /// candidates' fixed order (task::rank).
    struct choice {
        std::vector<detail::scheduled> replicas;  ///< empty when no candidate is feasible
        std::size_t split = 0;
        kind_t kind = nullptr;
        std::size_t report = 0;
        double makespan_ms = std::numeric_limits<double>::infinity();
        std::uint64_t rank = std::numeric_limits<std::uint64_t>::max();
        /// A memory probe's bar (beat_ms_; infinite otherwise): the candidates that cannot beat it
        /// are pruned (may_win()), but `kind`, `makespan_ms` and `rank` follow every candidate run,
        /// so the kind that screens the extra splits (screen_leader()) is the one the plan under
        /// the same budget without a bar has; choose() drops a choice slower than the bar.
        double bar_ms = std::numeric_limits<double>::infinity();
    };

    /// A (split, kind) to schedule and its place in the candidates' fixed order: group by group,
    /// the kinds on the configuration itself (split-major), then the V kinds (kind-major). Of
    /// equally fast candidates the one of the lower rank wins, whatever order they ran in.
    struct task {
        std::size_t split = 0;
        candidate_kind kind;
        std::uint64_t rank = 0;
    };

    /// Replica scenarios per configuration (config_index()), split and replica; a split's
    /// scenarios of configuration 1 are made when first needed (scenarios_of()).
    using scenario_sets = std::vector<std::vector<std::vector<schedule::scenario>>>;

    /// The replica scenarios of split `k` under configuration `config`, made on first use.
    const std::vector<schedule::scenario>& scenarios_of(const std::vector<named_split>& splits, scenario_sets& scs,
                                                        std::size_t config, std::size_t k) const {
        auto& out = scs[config][k];
        if (out.empty()) {
            const batching::pipeline_config cfg = config_at(config);
            const std::size_t dp = static_cast<std::size_t>(std::max(1, opt_.config.dp));
            for (std::size_t r = 0; r < dp; ++r) out.push_back(replica_scenario(splits[k].second, replica_mbs(splits[k].second, r), cfg));
        }
        return out;
    }

    /// Tries every candidate kind on every replica of every split (in parallel over
    /// opt_.threads workers) and returns the fastest feasible one (ties: the lower task::rank).
    /// Group by group (one per recomputation mode), the kinds on v_config() first, one kind at a
    /// time, then those on the configuration itself; each (split, kind) runs only when its lower
    /// bound may still win (run_tasks()). A V usually beats the one-chunk lower bound (its fill
    /// and drain cross half a device's layers), so the kinds on the configuration are then pruned
    /// without being scheduled; the winner is the one every candidate run in the fixed order gives.
    choice choose(const std::vector<named_split>& splits, const std::vector<split_group>& groups,
                  std::vector<candidate_report>& reports) {
        scenario_sets scs(2, std::vector<std::vector<schedule::scenario>>(splits.size()));
        for (std::size_t k = 0; k < splits.size(); ++k) (void)scenarios_of(splits, scs, 0, k);
        choice best;
        best.bar_ms = beat_ms_;
        for (std::size_t gi = 0; gi < groups.size(); ++gi) run_group(splits, scs, groups[gi], gi, reports, best);
        if (best.makespan_ms > best.bar_ms) return choice{};  // nothing beats the probe's bar
        return best;
    }

    /// Schedules group `g` (the gi-th) into `best`: the V kinds first, one kind at a time (each
    /// may prune the next), then the kinds on the configuration itself (run_tasks()), on its first
    /// `always` splits and the extra splits screen() keeps. The extras are screened with the kind
    /// of the fastest candidate after the first V kind ran on the `always` splits, when it may
    /// win (screen_leader()).
    void run_group(const std::vector<named_split>& splits, scenario_sets& scs, const split_group& g, std::size_t gi,
                   std::vector<candidate_report>& reports, choice& best) {
        const auto ks = kinds();
        const auto rank = [&](std::size_t k, std::size_t i) -> std::uint64_t {  // group, phase, then split / kind
            const std::uint64_t phase = 2 * gi + (ks[i].config == 0 ? 0 : 1);
            return (phase << 40) + (ks[i].config == 0 ? k * ks.size() + i : i * splits.size() + k);
        };
        std::vector<std::size_t> always(g.always);
        std::iota(always.begin(), always.end(), g.begin);
        const auto first_v = std::find_if(ks.begin(), ks.end(), [](const candidate_kind& c) { return c.config != 0; });
        std::vector<task> tasks;
        if (first_v != ks.end()) {
            for (std::size_t k : always) tasks.push_back({k, *first_v, rank(k, std::size_t(first_v - ks.begin()))});
            run_tasks(splits, scs, tasks, reports, best, false);  // (it picks the screening kind: no bar)
        }
        const std::vector<std::size_t> extras = screened_extras(splits, scs, g, ks, always, best);
        std::vector<std::size_t> all = always;
        all.insert(all.end(), extras.begin(), extras.end());
        std::vector<std::vector<task>> rounds;  // one V kind each
        for (std::size_t i = 0; i < ks.size(); ++i) {
            if (ks[i].config == 0) continue;
            auto& round = rounds.emplace_back();
            for (std::size_t k : ks.begin() + std::ptrdiff_t(i) == first_v ? extras : all) round.push_back({k, ks[i], rank(k, i)});
        }
        run_rounds(splits, scs, rounds, reports, best);
        tasks.clear();
        for (std::size_t k : all)
            for (std::size_t i = 0; i < ks.size(); ++i)
                if (ks[i].config == 0) tasks.push_back({k, ks[i], rank(k, i)});
        run_tasks(splits, scs, tasks, reports, best);
    }

    /// The extra splits of group `g` to schedule in full: those screen() keeps with the kind
    /// screen_leader() gives. In a memory probe where nothing run so far beats the bar
    /// (choice::bar_ms), also those it keeps with screening_kind(), the kind that screens when no
    /// candidate leads: the probe then schedules every split that the plan under its budget
    /// schedules, and every split that a probe whose bar also pruned the leader schedules.
    std::vector<std::size_t> screened_extras(const std::vector<named_split>& splits, scenario_sets& scs, const split_group& g,
                                             const std::vector<candidate_kind>& ks, const std::vector<std::size_t>& always,
                                             const choice& best) const {
        const kind_t leader = screen_leader(splits, scs, ks, always, best);
        std::vector<std::size_t> extras = screen(splits, scs, g, leader);
        if (best.makespan_ms < best.bar_ms || leader == nullptr || leader == screening_kind()) return extras;
        for (std::size_t k : screen(splits, scs, g, nullptr))
            if (std::find(extras.begin(), extras.end(), k) == extras.end()) extras.push_back(k);
        std::sort(extras.begin(), extras.end());
        return extras;
    }

    /// The kind that screens the extra splits (screen()): that of the fastest candidate so far
    /// (`best`), but a V kind only while its makespan is below every lower bound of the kinds on
    /// the configuration itself on the `always` splits, i.e. while no one-chunk kind can win
    /// there; otherwise nullptr (screening_kind()). A V ranks the extra splits otherwise than
    /// the one-chunk kind that wins on them (GPT-6.7B 65k seed 2 at 17250 MB: zb-v kept fill
    /// weight 0.5, on which zb-h1 wins with 3043.7 ms; zb-h1 keeps 0.25, 3021.8 ms).
    kind_t screen_leader(const std::vector<named_split>& splits, scenario_sets& scs, const std::vector<candidate_kind>& ks,
                         const std::vector<std::size_t>& always, const choice& best) const {
        if (best.kind == nullptr || config_index(*best.kind) == 0) return best.kind;
        for (const candidate_kind& c : ks)
            if (c.config == 0)
                for (std::size_t k : always)
                    if (!(best.makespan_ms < candidate_bound_ms(splits, scs, c, k))) return nullptr;
        return best.kind;
    }

    /// A lower bound on the makespan of kind `c` on split `k` (max over replicas): lower_bound()
    /// of its scenario (on the configuration or the V) with the options the kind runs with (its
    /// W share; overlapped pairs may save time). It holds for every schedule of the scenario,
    /// recomputation included. `memory`: also memory_bound_ms() under the budget, which holds for
    /// every schedule that fits it (the feasible ones: run_candidate()), less memory_bound_rounding.
    double candidate_bound_ms(const std::vector<named_split>& splits, scenario_sets& scs, const candidate_kind& c,
                              std::size_t k, bool memory = false) const {
        double bound_ms = 0.0;
        for (const auto& sc : scenarios_of(splits, scs, c.config, k)) {
            const schedule::named_schedule_options so = schedule_options(sc);
            const double w = c.kind->splits_backward ? so.w_share : 0.0;
            const double f = c.kind->overlaps_pairs ? so.overlap_factor : 1.0;
            const schedule::stage_placement pl = schedule::placement_of(sc);
            bound_ms = std::max(bound_ms, schedule::lower_bound(sc, pl, w, f).bound_ms);
            if (memory)
                bound_ms = std::max(bound_ms, schedule::memory_bound_ms(sc, pl, budget_mb_, w, c.kind->checkpoint_rule.has_value()) *
                                                  (1.0 - memory_bound_rounding));
        }
        return bound_ms;
    }

    /// How far (relative) memory_bound_ms() is lowered before it prunes: its sums of products
    /// (durations · megabytes, in another order than any simulation's) round otherwise than a
    /// makespan; 1e-9 is far above that rounding and far below any gap between candidates.
    static constexpr double memory_bound_rounding = 1e-9;

    /// How far (relative) a lower bound may read below a makespan that reaches it (run_tasks()):
    /// rounding of sums of a few thousand durations in two orders, ~1e-14 (10 ulps of 2 s here);
    /// a candidate pruned by this margin could win by at most 2 ns of a 2 s plan.
    static constexpr double bound_rounding = 1e-12;

    /// Schedules those of the `tasks` that may still beat `best` by their lower bound (in
    /// parallel), reports them in that order, and keeps in `best` the fastest feasible one (ties:
    /// the lower rank). A bound within bound_rounding of the best makespan counts as reached: the
    /// bound sums the micro-batches in the split's order, the makespan in the scheduled one, so
    /// one at the bound may read a few ulps above it (GPT-6.7B 65k seed 5: zb-v 2182.7736306762699
    /// ms, the V's bound 2182.7736306762695 ms: v-half and v-min cannot win there).
    void run_tasks(const std::vector<named_split>& splits, scenario_sets& scs, const std::vector<task>& all,
                   std::vector<candidate_report>& reports, choice& best, bool barred = true) {
        std::vector<double> bounds_ms;
        for (const task& t : all) bounds_ms.push_back(candidate_bound_ms(splits, scs, t.kind, t.split, true));
        const std::vector<std::size_t> run = may_win(all, bounds_ms, best, barred);
        std::vector<task> tasks;
        for (std::size_t t : run) tasks.push_back(all[t]);
        std::vector<candidate_run> runs = run_candidates(splits, scs, tasks);
        for (const candidate_run& c : runs)
            if (c.error) std::rethrow_exception(c.error);
        for (std::size_t t = 0; t < tasks.size(); ++t) keep(tasks[t], std::move(runs[t]), reports, best);
    }

    /// run_tasks() of each of the `rounds` in turn. With threads > 1, a round whose tasks leave
    /// workers idle has them fill up (to a multiple of the thread count) with tasks of the later
    /// rounds whose bound does not exceed the best makespan now, the lowest bounds first (the
    /// likeliest to be run when their round comes): a task that a later round then runs takes
    /// that run; the others are discarded. The rounds take the same runs in the same order as
    /// one after the other, so the reports and the choice are the same (the 1M plan's V kinds:
    /// four tasks in three rounds of one or two, run two at a time).
    void run_rounds(const std::vector<named_split>& splits, scenario_sets& scs, const std::vector<std::vector<task>>& rounds,
                    std::vector<candidate_report>& reports, choice& best) {
        if (opt_.threads <= 1 || rounds.size() < 2) {
            for (const auto& round : rounds) run_tasks(splits, scs, round, reports, best);
            return;
        }
        std::vector<std::vector<double>> bounds_ms(rounds.size());
        std::vector<std::vector<std::optional<candidate_run>>> runs(rounds.size());
        for (std::size_t r = 0; r < rounds.size(); ++r) {
            for (const task& t : rounds[r]) bounds_ms[r].push_back(candidate_bound_ms(splits, scs, t.kind, t.split, true));
            runs[r].resize(rounds[r].size());
        }
        for (std::size_t r = 0;;) {
            for (; r < rounds.size(); ++r) {  // the rounds whose tasks have all run, in turn
                const std::vector<std::size_t> run = may_win(rounds[r], bounds_ms[r], best);
                if (std::any_of(run.begin(), run.end(), [&](std::size_t t) { return !runs[r][t]; })) break;
                for (std::size_t t : run)
                    if (runs[r][t]->error) std::rethrow_exception(runs[r][t]->error);
                for (std::size_t t : run) keep(rounds[r][t], std::move(*runs[r][t]), reports, best);
            }
            if (r == rounds.size()) return;
            std::vector<std::pair<std::size_t, std::size_t>> next;  // (round, task): round r's, then ahead
            for (std::size_t t : may_win(rounds[r], bounds_ms[r], best))
                if (!runs[r][t]) next.emplace_back(r, t);
            std::vector<std::pair<std::size_t, std::size_t>> ahead;
            for (std::size_t q = r + 1; q < rounds.size(); ++q)
                for (std::size_t t = 0; t < rounds[q].size(); ++t)
                    if (!runs[q][t] && may_beat(bounds_ms[q][t], best)) ahead.emplace_back(q, t);
            std::stable_sort(ahead.begin(), ahead.end(), [&](const auto& x, const auto& y) {  // likeliest to run first
                return bounds_ms[x.first][x.second] < bounds_ms[y.first][y.second];
            });
            const std::size_t fill = (next.size() + opt_.threads - 1) / opt_.threads * opt_.threads;
            for (std::size_t k = 0; k < ahead.size() && next.size() < fill; ++k) next.push_back(ahead[k]);
            std::vector<task> tasks;
            for (const auto& [q, t] : next) tasks.push_back(rounds[q][t]);
            std::vector<candidate_run> done = run_candidates(splits, scs, tasks);
            for (std::size_t k = 0; k < next.size(); ++k) runs[next[k].first][next[k].second] = std::move(done[k]);
        }
    }

    /// The indices of the tasks (`bounds_ms`: their candidate_bound_ms()) that may still beat
    /// `best` and, when `barred`, its bar (run_tasks()): by more than planner_options::bound_tolerance
    /// when it is > 0.
    [[nodiscard]] std::vector<std::size_t> may_win(const std::vector<task>& all, const std::vector<double>& bounds_ms,
                                                   const choice& best, bool barred = true) const {
        std::vector<std::size_t> out;
        const bool by_bar = barred && best.bar_ms < best.makespan_ms;  // (a tie with the bar does not beat it)
        const double beat_ms = by_bar ? best.bar_ms : best.makespan_ms;
        const std::uint64_t rank = by_bar ? std::numeric_limits<std::uint64_t>::max() : best.rank;
        const double tolerance = opt_.bound_tolerance;
        const double reached_ms = beat_ms * (1.0 - std::max(tolerance, bound_rounding));
        for (std::size_t t = 0; t < all.size(); ++t)
            if (bounds_ms[t] < reached_ms || (tolerance == 0.0 && bounds_ms[t] <= beat_ms && all[t].rank < rank))
                out.push_back(t);
        return out;
    }

    /// Whether a candidate of lower bound `bound_ms` may be scheduled against `best` or a faster
    /// choice, whatever its rank (may_win()): with a bound tolerance, when the bound is below the
    /// best makespan by more than that share; without, when it does not exceed the best makespan.
    [[nodiscard]] bool may_beat(double bound_ms, const choice& best) const {
        const double beat_ms = std::min(best.makespan_ms, best.bar_ms);
        if (opt_.bound_tolerance == 0.0) return bound_ms <= beat_ms;
        return bound_ms < beat_ms * (1.0 - std::max(opt_.bound_tolerance, bound_rounding));
    }

    /// Schedules every task (run_candidate(), in parallel); an exception is kept in its run.
    std::vector<candidate_run> run_candidates(const std::vector<named_split>& splits, scenario_sets& scs,
                                              const std::vector<task>& tasks) {
        std::vector<candidate_run> runs(tasks.size());
        ws_.resize(std::max(ws_.size(), parallel_workers(tasks.size(), opt_.threads)));
        parallel_for(tasks.size(), opt_.threads, [&](std::size_t t, std::size_t worker) {
            const task& x = tasks[t];
            try {
                runs[t] = run_candidate(*x.kind.kind, splits[x.split].first, scs[x.kind.config][x.split], ws_[worker],
                                        opt_.order_search_evaluations);
            } catch (...) {
                runs[t].error = std::current_exception();
            }
        });
        return runs;
    }

    /// Reports task `t`'s run and keeps it in `best` when it is the fastest feasible one so far
    /// (ties: the lower rank).
    static void keep(const task& t, candidate_run&& run, std::vector<candidate_report>& reports, choice& best) {
        reports.push_back(run.report);
        const double ms = run.report.makespan_ms;
        if (run.report.feasible && (ms < best.makespan_ms || (ms == best.makespan_ms && t.rank < best.rank)))
            best = {std::move(run.replicas), t.split, t.kind.kind, reports.size() - 1, ms, t.rank, best.bar_ms};
    }

    /// The kind that screens splits when no candidate is feasible yet: zb-h1 when it is a
    /// candidate, else the last candidate kind on the configuration itself (nullptr when there is
    /// none: the first extra splits are kept).
    [[nodiscard]] kind_t screening_kind() const {
        kind_t last = nullptr;
        const kind_t zb = &schedule::traits_of(schedule::schedule_name::zb_h1);
        for (const candidate_kind& c : kinds()) {
            if (c.kind == zb) return zb;
            if (c.config == 0) last = c.kind;
        }
        return last;
    }

    /// The extra splits of group `g` (its splits after the first `always`; indices into `splits`,
    /// ascending) to schedule with every kind: all when there are at most
    /// opt_.scheduled_extra_splits, else the best by one quick simulation each with `leading` (the
    /// kind of the fastest candidate so far; when none, screening_kind()), see
    /// planner_options::scheduled_extra_splits. With one thread the extras are screened in turn,
    /// each search beating the n-th best quick makespan so far (n = scheduled_extra_splits;
    /// order_search_options::beat_ms): a split that does not beat it is never kept (ties keep
    /// the lower index, and that bar only falls), so its evaluations may give up sooner; the
    /// splits kept are those of the searches from scratch.
    [[nodiscard]] std::vector<std::size_t> screen(const std::vector<named_split>& splits, scenario_sets& scs,
                                                  const split_group& g, kind_t leading) const {
        std::vector<std::size_t> idx(g.end - g.begin - g.always);
        std::iota(idx.begin(), idx.end(), g.begin + g.always);
        if (idx.size() <= opt_.scheduled_extra_splits) return idx;
        const kind_t kind = leading != nullptr ? leading : screening_kind();
        if (kind == nullptr) return {idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(opt_.scheduled_extra_splits)};
        const std::size_t config = config_index(*kind);
        for (std::size_t k : idx) (void)scenarios_of(splits, scs, config, k);
        schedule::named_schedule_options quick = schedule_options(scs[config][idx.front()].front());
        quick.quick = true;
        std::vector<double> quick_ms(splits.size(), 0.0);
        const std::size_t n = opt_.scheduled_extra_splits;
        const auto bar_ms = [&](std::size_t e) {  // the n-th smallest quick makespan of the extras before e
            if (opt_.threads > 1 || n == 0 || e < n) return std::numeric_limits<double>::infinity();
            std::vector<double> before(e);
            for (std::size_t i = 0; i < e; ++i) before[i] = quick_ms[idx[i]];
            std::nth_element(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(n - 1), before.end());
            return before[n - 1];
        };
        parallel_for(idx.size(), opt_.threads, [&](std::size_t e, std::size_t) {
            const std::size_t k = idx[e];
            schedule::order_search_options so;
            so.memory_limit_mb = budget_mb_;
            so.max_evaluations = schedule::order_search_starts;
            so.simulate_winner = false;
            so.beat_ms = bar_ms(e);
            for (const auto& sc : scs[config][k]) {
                const auto r = schedule::search_order_with(sc, [&](std::size_t, double beat_ms) {
                    schedule::named_schedule_options q = quick;  // may give up above the best start so far
                    q.give_up_above_ms = beat_ms;
                    return schedule::make_generator(*kind, q);
                }, so);
                quick_ms[k] = r.feasible ? std::max(quick_ms[k], r.makespan_ms) : std::numeric_limits<double>::infinity();
                if (!r.feasible) break;  // infinite: no start fits, or none beats the bar
            }
        });
        std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return quick_ms[a] < quick_ms[b]; });
        idx.resize(opt_.scheduled_extra_splits);
        std::sort(idx.begin(), idx.end());
        return idx;
    }

    /// The polish (planner_options::polish_above_ratio): every replica of the chosen candidate
    /// (`kind`) more than that factor over its lower bound has its order search continued from
    /// its order; a faster feasible schedule replaces it, and the candidate is reported again,
    /// polished, when any replica improved (then true).
    bool polish(const schedule::schedule_traits& kind, const std::string& split_name, std::vector<detail::scheduled>& reps,
                std::vector<candidate_report>& reports) {
        if (opt_.polish_evaluations == 0) return false;
        bool improved = false;
        for (auto& rep : reps) {
            if (rep.sc.microbatches < 2 || !(rep.sim.makespan_ms > opt_.polish_above_ratio * rep.sim.lower_bound_ms)) continue;
            std::vector<std::uint32_t> identity(rep.sc.microbatches);  // rep.sc is already in rep's order
            std::iota(identity.begin(), identity.end(), 0u);
            auto [order, inflight] = searched_order(kind, rep.sc, opt_.polish_evaluations, identity);
            if (order == identity) continue;
            detail::scheduled next = schedule_in_order(kind, rep.sc, std::move(order), inflight, ws_.front());
            const double peak = *std::max_element(next.sim.peak_memory_mb.begin(), next.sim.peak_memory_mb.end());
            if (!(next.sim.makespan_ms < rep.sim.makespan_ms) || peak > budget_mb_) continue;
            for (std::uint32_t& j : next.order) j = rep.order[j];  // relative to the replica's own scenario
            rep = std::move(next);
            improved = true;
        }
        if (!improved) return false;
        candidate_report c{kind.name, split_name, 0.0, 0.0, true, true};
        for (const auto& rep : reps) {
            c.makespan_ms = std::max(c.makespan_ms, rep.sim.makespan_ms);
            for (double p : rep.sim.peak_memory_mb) c.peak_memory_mb = std::max(c.peak_memory_mb, p);
        }
        reports.push_back(std::move(c));
        return true;
    }

    /// Lowers every replica and joins them into one plan with the header filled (join_replicas).
    [[nodiscard]] execution_plan assemble(const batching::split_result& s, const std::vector<detail::scheduled>& reps) const {
        std::vector<replica_schedule> parts(reps.size());
        for (std::size_t r = 0; r < reps.size(); ++r) {
            const auto mbs = replica_mbs(s, r);
            parts[r].sc = &reps[r].sc;
            parts[r].sched = &reps[r].sched;
            parts[r].sim = &reps[r].sim;
            for (std::uint32_t j : reps[r].order) {
                const std::size_t k = static_cast<std::size_t>(mbs[j]);
                const auto& rec = s.per_microbatch[k];
                microbatch_entry& e = parts[r].microbatches.emplace_back();
                if (rec.rows.empty()) {
                    for (int id : s.microbatches[k]) e.sample_ids.push_back(static_cast<std::uint32_t>(id));
                } else {  // packed: the samples row by row, and each row's sample count
                    for (const auto& row : rec.rows) {
                        for (int id : row) e.sample_ids.push_back(static_cast<std::uint32_t>(id));
                        e.row_sizes.push_back(static_cast<std::uint32_t>(row.size()));
                    }
                }
                e.shape = tensor_shape{static_cast<std::uint32_t>(rec.shape.mbs), static_cast<std::uint32_t>(rec.shape.seqlen_tokens),
                                       static_cast<std::uint32_t>(rec.shape.dec_seqlen_tokens),
                                       static_cast<std::uint32_t>(opt_.hidden_size)};
            }
        }
        join_options jo;
        jo.type = opt_.type;
        jo.iteration = opt_.iteration;
        jo.zero_stage = static_cast<std::uint8_t>(opt_.config.zero_stage);
        jo.sends = opt_.sends;
        jo.threads = opt_.threads;
        return join_replicas(parts, jo);
    }

    void summarize(plan_result& res, std::vector<detail::scheduled>& reps) const {
        res.makespan_ms = res.plan.header.predicted_makespan_ms;
        res.peak_memory_mb = res.plan.header.predicted_peak_memory_mb;
        for (const auto& r : reps) res.lower_bound_ms = std::max(res.lower_bound_ms, r.sim.lower_bound_ms);
        for (const auto& prog : res.plan.programs) {
            res.arena_mb.push_back(static_cast<double>(prog.arena_bytes) / 1e6);
            res.live_peak_mb.push_back(static_cast<double>(prog.live_peak_bytes) / 1e6);
        }
        for (const auto& r : reps)  // rank = replica · devices + device
            for (std::size_t d = 0; d < r.sched.placement.devices(); ++d) {
                double state_mb = 0.0;
                for (std::size_t c = 0; c < r.sched.placement.chunks(); ++c) state_mb += r.sc.model_state_mb[r.sched.placement.stage_of(d, c)];
                res.model_state_mb.push_back(state_mb);
            }
        for (const auto& r : reps) res.simulations.push_back(r.sim);
        res.scenario = std::move(reps.front().sc);
        res.schedule = std::move(reps.front().sched);
        res.simulation = std::move(reps.front().sim);
    }
};

/// Planners for threads that plan iterations concurrently (plan_prefetcher, serve_plans): each
/// call borrows an idle planner (a new one when every planner is busy), so a planner keeps its
/// shape costs and scratch memory across the iterations it plans, and at most as many planners
/// exist as calls ever ran at once. A plan equals a fresh planner's (planners are deterministic
/// and reusable). The cost model is held by reference and must outlive the pool.
template <cost_model Model>
class planner_pool {
public:
    planner_pool(const Model& model, planner_options options) : model_(model), opt_(std::move(options)) {
        idle_.push_back(std::make_unique<planner<Model>>(model_, opt_));  // validates the options now
    }

    /// Plans `batch` as iteration `iteration` (planner::plan()); safe to call from many threads.
    [[nodiscard]] plan_result plan(std::span<const batching::sample> batch, std::uint64_t iteration) {
        return with_planner(iteration, [&](planner<Model>& p) { return p.plan(batch); });
    }

    /// Plans the given micro-batches of `batch` as iteration `iteration` (planner::plan_microbatches()).
    [[nodiscard]] plan_result plan_microbatches(std::span<const batching::sample> batch,
                                                std::vector<std::vector<int>> microbatches, std::uint64_t iteration) {
        return with_planner(iteration, [&](planner<Model>& p) { return p.plan_microbatches(batch, std::move(microbatches)); });
    }

    /// How many planners the pool holds (idle ones; all of them between calls).
    [[nodiscard]] std::size_t size() {
        const std::lock_guard lock(mutex_);
        return idle_.size();
    }

private:
    /// Runs `f` on an idle planner set to `iteration`, which is idle again afterwards (also when f throws).
    template <class F>
    plan_result with_planner(std::uint64_t iteration, F&& f) {
        std::unique_ptr<planner<Model>> p = borrow();
        struct give_back {
            planner_pool& pool;
            std::unique_ptr<planner<Model>>& p;
            ~give_back() {
                const std::lock_guard lock(pool.mutex_);
                pool.idle_.push_back(std::move(p));
            }
        } back{*this, p};
        p->set_iteration(iteration);
        return f(*p);
    }

    std::unique_ptr<planner<Model>> borrow() {
        {
            const std::lock_guard lock(mutex_);
            if (!idle_.empty()) {
                auto p = std::move(idle_.back());
                idle_.pop_back();
                return p;
            }
        }
        return std::make_unique<planner<Model>>(model_, opt_);
    }

    const Model& model_;
    planner_options opt_;
    std::mutex mutex_;
    std::vector<std::unique_ptr<planner<Model>>> idle_;
};

/// One-shot form: plan_iteration(model, batch, options).
template <cost_model Model>
[[nodiscard]] plan_result plan_iteration(const Model& model, std::span<const batching::sample> batch,
                                         const planner_options& options) {
    planner<Model> p(model, options);
    return p.plan(batch);
}

/// One-shot non-throwing form.
template <cost_model Model>
[[nodiscard]] plan_outcome try_plan_iteration(const Model& model, std::span<const batching::sample> batch,
                                              const planner_options& options) noexcept {
    try {
        planner<Model> p(model, options);
        return p.try_plan(batch);
    } catch (const std::exception& e) {
        return plan_outcome{std::nullopt, e.what()};
    }
}

}  // namespace pipeplan::plan
