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
// Split: the exact DP of batching/split_dp.hpp (in the accounting asked for). Its objective is
// only a proxy of the pipelined time, so the split under the available memory and splits with a
// lighter fill term (fill_weights; screened by one quick simulation) are candidates too.
// Scenario: bridge/split_to_scenario.hpp prices each micro-batch per pipeline chunk; messages are
// micro-batch size × sequence length × hidden size × dtype bytes over the cluster's links
// (default: 100 Gbit/s, no latency — DynaPipe's uniform cluster). With `dynapipe` accounting
// the split is DynaPipe's; the scenario of its micro-batches is priced per chunk the same way.
// Candidates (C = chunks per device), each with its micro-batch order searched: C = 1: adaptive
// (and its in-flight limit), 1F1B, ZB-H1; C > 1: interleaved 1F1B and adaptive on the
// interleaved placement. A named schedule restricts the candidates to it. A candidate
// whose simulated peak exceeds the device memory is infeasible; the fastest feasible one wins
// (ties: the earlier candidate); when it is more than polish_above_ratio over its lower bound,
// its order search continues from its best order (the polish). Data parallelism: micro-batches are balanced over the dp
// replicas (batching/dp_balance.hpp); each replica is scheduled alone with the winning schedule
// kind judged by the slowest replica; rank = replica · S + device.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/batching/cost_cache.hpp"
#include "pipeplan/batching/dp_balance.hpp"
#include "pipeplan/batching/split_dp.hpp"
#include "pipeplan/bridge/split_to_scenario.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/parallel.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/schedule/adaptive.hpp"
#include "pipeplan/schedule/interleaved.hpp"
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
    std::optional<schedule::schedule_name> schedule;  ///< nullopt: choose (see the file comment)
    std::size_t order_search_evaluations = 24;        ///< per adaptive candidate
    std::uint64_t seed = 1;
    std::uint64_t iteration = 0;
    bool compare_splits = true;            ///< also schedule the available-memory split
    /// Also schedule up to this many runner-up splits of the preferred limit (partitions the
    /// exact DP solved on its way, next best by objective: batching::split_dp's alternatives).
    std::size_t alternative_splits = 0;
    /// Also split with these weights of the fill term (batching::split_options::fill_weights):
    /// the DP's (S − 1) · t_max / C overprices fill and drain when the order search puts light
    /// micro-batches at the pipeline's ends, so fewer, larger micro-batches may run faster.
    std::vector<double> fill_weights = {0.5, 0.25};
    /// How many extra splits (fill weights, runner-ups) are scheduled with every candidate kind
    /// besides the preferred and available ones. When there are more, each extra split is first
    /// screened by one quick simulation (the screening kind — zb-h1 when it is a candidate, else
    /// the last candidate kind — on the order search's structured starts only) and the best by
    /// that makespan are kept (ties: the earlier split).
    std::size_t scheduled_extra_splits = 1;
    /// Polish: when the chosen candidate's simulated makespan is more than this factor over its
    /// lower bound (per replica), its order search continues from its best order for
    /// polish_evaluations more simulations, and the result is kept when faster. Few large
    /// micro-batches of unequal stage loads (T5 on long samples) need more than
    /// order_search_evaluations to find an order without idle gaps; near-tight plans pay nothing.
    double polish_above_ratio = 1.04;
    std::size_t polish_evaluations = 96;  ///< 0 = no polish
    /// Worker threads (>= 1) for the candidate schedules and the per-rank buffer planning. The
    /// plan does not depend on it: candidates are compared in a fixed order (split, then kind)
    /// and ties go to the earlier one, so any thread count gives byte-identical plans.
    std::size_t threads = 1;
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
    batching::split_result split;             ///< the split of the chosen plan
    double makespan_ms = 0.0;                 ///< simulated (slowest replica)
    double lower_bound_ms = 0.0;              ///< of the chosen split and placement
    std::vector<double> peak_memory_mb;       ///< per rank, simulated
    std::vector<double> arena_mb;             ///< per rank, planned arena
    std::vector<double> live_peak_mb;         ///< per rank, largest simultaneously-live set
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

/// One replica's scheduled candidate.
struct scheduled {
    schedule::scenario sc;                  ///< (reordered) scenario the schedule runs on
    std::vector<std::uint32_t> order;       ///< order[i] = micro-batch of the replica's split list
    schedule::pipeline_schedule sched;
    schedule::simulation_result sim;
};

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
        if (opt_.alternative_splits > 64) throw invalid_argument("planner: alternative splits must be <= 64");
        if (std::isnan(opt_.polish_above_ratio))
            throw invalid_argument("planner: the polish ratio must not be NaN (infinity = never polish)");
        for (double w : opt_.fill_weights)
            if (!(w >= 0) || !std::isfinite(w))
                throw invalid_argument("planner: fill weights must be finite and >= 0 (got " + std::to_string(w) + ")");
    }

    [[nodiscard]] const planner_options& options() const noexcept { return opt_; }

    /// Plans one iteration of `batch`; throws pipeplan::error (split_error, invalid_argument,
    /// plan_error) when no valid plan exists.
    [[nodiscard]] plan_result plan(std::span<const batching::sample> batch) {
        const auto t0 = detail::clock::now();
        std::vector<std::pair<std::string, batching::split_result>> splits;
        batching::split_options so = opt_.split;
        so.alternative_splits = static_cast<int>(opt_.alternative_splits);
        so.fill_weights = opt_.fill_weights;
        std::vector<batching::split_result> runner_ups, reweighted;
        splits.emplace_back("preferred", batching::split_dp(model_, batch, opt_.config, so, nullptr, &costs_,
                                                            opt_.alternative_splits > 0 ? &runner_ups : nullptr,
                                                            opt_.fill_weights.empty() ? nullptr : &reweighted));
        if (opt_.compare_splits) {
            if (auto alt = available_split(batch, splits.front().second)) splits.emplace_back("available", std::move(*alt));
        }
        const std::size_t always = splits.size();  // scheduled in full; the extras below are screened
        const auto add = [&](std::string name, batching::split_result&& s) {
            const bool known = std::any_of(splits.begin(), splits.end(), [&](const auto& k) {
                return k.second.microbatches == s.microbatches;
            });
            if (!known) splits.emplace_back(std::move(name), std::move(s));
        };
        for (std::size_t k = 0; k < reweighted.size(); ++k)
            add("fill weight " + format_weight(opt_.fill_weights[k]), std::move(reweighted[k]));
        for (std::size_t k = 0; k < runner_ups.size(); ++k) add("runner-up " + std::to_string(k + 1), std::move(runner_ups[k]));
        return finish(std::move(splits), always, t0);
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

    /// Plans the given micro-batches of `batch` (sample ids, each sample in exactly one) instead
    /// of splitting it: they are priced under the first rung of the memory ladder where all fit
    /// and scheduled like a split (e.g. to price another planner's split with this one).
    /// Throws invalid_argument (bad ids) or split_error (the micro-batches fit under no rung).
    [[nodiscard]] plan_result plan_microbatches(std::span<const batching::sample> batch,
                                                std::vector<std::vector<int>> microbatches) {
        const auto t0 = detail::clock::now();
        std::vector<int> seen(batch.size(), 0);
        for (std::size_t k = 0; k < microbatches.size(); ++k) {
            if (microbatches[k].empty())
                throw invalid_argument("plan: given micro-batch " + std::to_string(k) + " is empty");
            for (int id : microbatches[k]) {
                if (id < 0 || static_cast<std::size_t>(id) >= batch.size())
                    throw invalid_argument("plan: given micro-batch " + std::to_string(k) + " names sample " +
                                           std::to_string(id) + ", but the batch has " + std::to_string(batch.size()) +
                                           " samples");
                if (seen[static_cast<std::size_t>(id)]++)
                    throw invalid_argument("plan: sample " + std::to_string(id) + " is in more than one given micro-batch");
            }
        }
        for (std::size_t i = 0; i < seen.size(); ++i)
            if (!seen[i]) throw invalid_argument("plan: sample " + std::to_string(i) + " is in no given micro-batch");
        const batching::split_context<Model> ctx(model_, batch, opt_.config, opt_.split);
        std::vector<std::pair<std::string, batching::split_result>> splits;
        splits.emplace_back("given", ctx.assemble_first_fitting("given", std::move(microbatches)));
        return finish(std::move(splits), 1, t0);
    }

    /// plan_microbatches() without exceptions.
    [[nodiscard]] plan_outcome try_plan_microbatches(std::span<const batching::sample> batch,
                                                     std::vector<std::vector<int>> microbatches) noexcept {
        plan_outcome out;
        try {
            out.result = plan_microbatches(batch, std::move(microbatches));
        } catch (const std::exception& e) {
            out.error = e.what();
        } catch (...) {
            out.error = "unknown error";
        }
        return out;
    }

private:
    /// Balances the splits over the replicas, chooses, lowers and validates (plan()'s common part).
    /// The first `always` splits are scheduled in full, the others after screening.
    [[nodiscard]] plan_result finish(std::vector<std::pair<std::string, batching::split_result>> splits,
                                     std::size_t always, detail::clock::time_point t0) {
        plan_result res;
        const int dp = std::max(1, opt_.config.dp);
        for (auto& [name, s] : splits)
            if (dp > 1) batching::balance_result(s, dp);
        res.times.split_ms = detail::ms_since(t0);

        const auto t1 = detail::clock::now();
        std::size_t best_split = 0;
        schedule::schedule_name best_kind{};
        std::vector<detail::scheduled> best = choose(splits, always, res.candidates, best_split, best_kind);
        if (best.empty()) throw invalid_argument("plan: no candidate schedule fits in " +
                                                 std::to_string(opt_.config.device_memory_mb) + " MB per device" +
                                                 describe(res.candidates));
        polish(best_kind, splits[best_split].first, best, res.candidates);
        res.times.schedule_ms = detail::ms_since(t1);

        const auto t2 = detail::clock::now();
        res.split = std::move(splits[best_split].second);
        res.plan = assemble(res.split, best);
        res.times.lower_ms = detail::ms_since(t2);

        const auto t3 = detail::clock::now();
        validate_or_throw(res.plan);
        res.times.validate_ms = detail::ms_since(t3);
        summarize(res, best);
        res.times.total_ms = detail::ms_since(t0);
        return res;
    }

    const Model& model_;
    planner_options opt_;
    std::vector<schedule::simulation_workspace> ws_;  ///< one per worker thread
    batching::shape_cost_cache costs_;  ///< shape costs shared by the splits of every iteration

    /// The split under the available memory alone, when it differs from `preferred`. When the
    /// preferred split needed no recomputation, its micro-batches also fit the available rung at
    /// the same costs, so only strictly better objectives are searched for (the bound prunes the
    /// DP); a split that is not strictly better is not a candidate.
    [[nodiscard]] std::optional<batching::split_result> available_split(std::span<const batching::sample> batch,
                                                                       const batching::split_result& preferred) {
        batching::split_options so = opt_.split;
        so.limit_ladder = {batching::memory_limit_kind::available};
        const bool bounded = preferred.limit == batching::memory_limit_kind::preferred &&
                             preferred.recompute == recompute_mode::none;
        if (bounded) so.objective_bound_ms = preferred.objective_ms;
        try {
            batching::split_result alt = batching::split_dp(model_, batch, opt_.config, so, nullptr, &costs_);
            if (alt.microbatches == preferred.microbatches) return std::nullopt;
            if (bounded && !(alt.objective_ms < preferred.objective_ms)) return std::nullopt;
            return alt;
        } catch (const error&) {
            return std::nullopt;  // no split under the available memory alone: keep the preferred one
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
        if (!s.dp_groups.empty()) return s.dp_groups[replica];
        std::vector<int> all(s.microbatches.size());
        for (std::size_t j = 0; j < all.size(); ++j) all[j] = static_cast<int>(j);
        return all;
    }

    [[nodiscard]] schedule::scenario replica_scenario(const batching::split_result& s, const std::vector<int>& mbs) const {
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
        return bridge::make_scenario_from_split(model_, sub, opt_.config, so);
    }

    /// The candidate schedule kinds for this configuration.
    [[nodiscard]] std::vector<schedule::schedule_name> kinds() const {
        using schedule::schedule_name;
        if (opt_.schedule) return {*opt_.schedule};
        if (opt_.config.virtual_chunks > 1) return {schedule_name::adaptive, schedule_name::interleaved};
        return {schedule_name::adaptive, schedule_name::one_f_one_b, schedule_name::zb_h1};
    }

    /// The generator of `kind` under the device memory limit (adaptive: with that in-flight
    /// limit, 0 = none; `quick` = no preference search, as during the order search).
    [[nodiscard]] schedule::any_generator generator(schedule::schedule_name kind, std::size_t inflight, bool quick) const {
        schedule::named_schedule_options no;
        no.chunks = static_cast<std::size_t>(opt_.config.virtual_chunks);
        no.memory_limit_mb = opt_.config.device_memory_mb;
        no.inflight_limit = inflight;
        no.quick = quick;
        if (no.chunks > 1) no.placement = schedule::placement_kind::interleaved;
        return schedule::make_generator(kind, no);
    }

    /// The order search for `kind` on `sc` with `evaluations` simulations, from the structured
    /// starts or, when given, from `start` alone: the best order found (the identity, and
    /// in-flight limit 0, when nothing feasible was found) and adaptive's in-flight limit.
    std::pair<std::vector<std::uint32_t>, std::size_t> searched_order(schedule::schedule_name kind, const schedule::scenario& sc,
                                                                       std::size_t evaluations,
                                                                       std::vector<std::uint32_t> start = {}) const {
        std::vector<std::uint32_t> order(sc.microbatches);
        std::iota(order.begin(), order.end(), 0u);
        if (sc.microbatches < 2 || evaluations == 0) return {order, 0};
        schedule::order_search_options so;
        so.memory_limit_mb = opt_.config.device_memory_mb;
        so.seed = opt_.seed;
        so.max_evaluations = evaluations;
        so.search_inflight_limit = kind == schedule::schedule_name::adaptive;
        so.start = std::move(start);
        so.simulate_winner = false;  // schedule_in_order() simulates it
        const auto r = schedule::search_order_with(sc, [&](std::size_t n) { return generator(kind, n, true); }, so);
        if (!r.feasible) return {order, 0};
        return {r.order, r.inflight_limit};
    }

    /// `kind` on `sc` in micro-batch order `order` (relative to sc), simulated.
    detail::scheduled schedule_in_order(schedule::schedule_name kind, const schedule::scenario& sc,
                                        std::vector<std::uint32_t> order, std::size_t inflight,
                                        schedule::simulation_workspace& ws) const {
        detail::scheduled out;
        out.sc = schedule::reorder(sc, order);
        out.order = std::move(order);
        out.sched = generator(kind, inflight, false)(out.sc);
        schedule::simulation_options simo;
        simo.record_memory_curve = false;
        schedule::simulate_into(out.sim, out.sc, out.sched, simo, ws);
        return out;
    }

    /// Schedules one replica's scenario with `kind`: the micro-batch order (and adaptive's
    /// in-flight limit) by order search for every kind, then the schedule in that order.
    detail::scheduled run_kind(schedule::schedule_name kind, const schedule::scenario& sc,
                               schedule::simulation_workspace& ws) const {
        auto [order, inflight] = searched_order(kind, sc, opt_.order_search_evaluations);
        return schedule_in_order(kind, sc, std::move(order), inflight, ws);
    }

    /// One candidate: a schedule kind on every replica of one split.
    struct candidate_run {
        candidate_report report;
        std::vector<detail::scheduled> replicas;
    };

    /// Schedules `kind` on every replica scenario `scs` of a split (its name in the report).
    candidate_run run_candidate(schedule::schedule_name kind, const std::string& split_name,
                                const std::vector<schedule::scenario>& scs, schedule::simulation_workspace& ws) const {
        candidate_run c;
        c.report = candidate_report{std::string(schedule::to_string(kind)), split_name, 0.0, 0.0, true};
        try {
            for (const auto& sc : scs) {
                c.replicas.push_back(run_kind(kind, sc, ws));
                const auto& sim = c.replicas.back().sim;
                c.report.makespan_ms = std::max(c.report.makespan_ms, sim.makespan_ms);
                for (double p : sim.peak_memory_mb) c.report.peak_memory_mb = std::max(c.report.peak_memory_mb, p);
            }
        } catch (const invalid_argument&) {
            c.report.feasible = false;  // the generator cannot meet the memory limit
            c.report.makespan_ms = std::numeric_limits<double>::infinity();
        }
        c.report.feasible = c.report.feasible && c.report.peak_memory_mb <= opt_.config.device_memory_mb;
        return c;
    }

    /// Tries every candidate kind on every replica of every split (in parallel over
    /// opt_.threads workers), reports them in the order split, then kind, and returns the
    /// fastest feasible one (ties: the earlier); empty when none is feasible.
    std::vector<detail::scheduled> choose(const std::vector<std::pair<std::string, batching::split_result>>& splits,
                                          std::size_t always, std::vector<candidate_report>& reports,
                                          std::size_t& best_split, schedule::schedule_name& best_kind) {
        const std::size_t dp = static_cast<std::size_t>(std::max(1, opt_.config.dp));
        std::vector<std::vector<schedule::scenario>> scs(splits.size());
        for (std::size_t k = 0; k < splits.size(); ++k)
            for (std::size_t r = 0; r < dp; ++r)
                scs[k].push_back(replica_scenario(splits[k].second, replica_mbs(splits[k].second, r)));
        const auto ks = kinds();
        const std::vector<std::size_t> picked = screen(scs, always);
        const std::size_t tasks = picked.size() * ks.size();
        std::vector<candidate_run> runs(tasks);
        ws_.resize(std::max(ws_.size(), parallel_workers(tasks, opt_.threads)));
        parallel_for(tasks, opt_.threads, [&](std::size_t t, std::size_t worker) {
            const std::size_t k = picked[t / ks.size()];
            runs[t] = run_candidate(ks[t % ks.size()], splits[k].first, scs[k], ws_[worker]);
        });
        std::vector<detail::scheduled> best;
        double best_ms = std::numeric_limits<double>::infinity();
        for (std::size_t t = 0; t < tasks; ++t) {
            reports.push_back(runs[t].report);
            if (runs[t].report.feasible && runs[t].report.makespan_ms < best_ms) {
                best_ms = runs[t].report.makespan_ms;
                best = std::move(runs[t].replicas);
                best_split = picked[t / ks.size()];
                best_kind = ks[t % ks.size()];
            }
        }
        return best;
    }

    /// The kind that screens splits: zb-h1 when it is a candidate, else the last candidate kind.
    [[nodiscard]] schedule::schedule_name screening_kind() const {
        const auto ks = kinds();
        return std::find(ks.begin(), ks.end(), schedule::schedule_name::zb_h1) != ks.end() ? schedule::schedule_name::zb_h1
                                                                                            : ks.back();
    }

    /// The splits (indices into `scs`, ascending) to schedule with every kind: the first
    /// `always`, and of the others all when there are at most opt_.scheduled_extra_splits, else
    /// the best by one quick simulation each (see planner_options::scheduled_extra_splits).
    [[nodiscard]] std::vector<std::size_t> screen(const std::vector<std::vector<schedule::scenario>>& scs,
                                                  std::size_t always) const {
        std::vector<std::size_t> idx(scs.size());
        for (std::size_t k = 0; k < idx.size(); ++k) idx[k] = k;
        if (idx.size() <= always + opt_.scheduled_extra_splits) return idx;
        const schedule::schedule_name kind = screening_kind();
        std::vector<double> quick_ms(scs.size(), 0.0);
        parallel_for(scs.size() - always, opt_.threads, [&](std::size_t e, std::size_t) {
            const std::size_t k = always + e;
            for (const auto& sc : scs[k]) {
                schedule::order_search_options so;
                so.memory_limit_mb = opt_.config.device_memory_mb;
                so.max_evaluations = schedule::order_search_starts;
                so.simulate_winner = false;
                const auto r = schedule::search_order_with(sc, [&](std::size_t) { return generator(kind, 0, true); }, so);
                quick_ms[k] = std::max(quick_ms[k], r.makespan_ms);  // infinite when infeasible
            }
        });
        std::stable_sort(idx.begin() + static_cast<std::ptrdiff_t>(always), idx.end(),
                         [&](std::size_t a, std::size_t b) { return quick_ms[a] < quick_ms[b]; });
        idx.resize(always + opt_.scheduled_extra_splits);
        std::sort(idx.begin(), idx.end());
        return idx;
    }

    /// The polish (planner_options::polish_above_ratio): every replica of the chosen candidate
    /// (`kind`) more than that factor over its lower bound has its order search continued from
    /// its order; a faster feasible schedule replaces it, and the candidate is reported again,
    /// polished, when any replica improved.
    void polish(schedule::schedule_name kind, const std::string& split_name, std::vector<detail::scheduled>& reps,
                std::vector<candidate_report>& reports) {
        if (opt_.polish_evaluations == 0) return;
        bool improved = false;
        for (auto& rep : reps) {
            if (rep.sc.microbatches < 2 || !(rep.sim.makespan_ms > opt_.polish_above_ratio * rep.sim.lower_bound_ms)) continue;
            std::vector<std::uint32_t> identity(rep.sc.microbatches);  // rep.sc is already in rep's order
            std::iota(identity.begin(), identity.end(), 0u);
            auto [order, inflight] = searched_order(kind, rep.sc, opt_.polish_evaluations, identity);
            if (order == identity) continue;
            detail::scheduled next = schedule_in_order(kind, rep.sc, std::move(order), inflight, ws_.front());
            const double peak = *std::max_element(next.sim.peak_memory_mb.begin(), next.sim.peak_memory_mb.end());
            if (!(next.sim.makespan_ms < rep.sim.makespan_ms) || peak > opt_.config.device_memory_mb) continue;
            for (std::uint32_t& j : next.order) j = rep.order[j];  // relative to the replica's own scenario
            rep = std::move(next);
            improved = true;
        }
        if (!improved) return;
        candidate_report c{std::string(schedule::to_string(kind)), split_name, 0.0, 0.0, true, true};
        for (const auto& rep : reps) {
            c.makespan_ms = std::max(c.makespan_ms, rep.sim.makespan_ms);
            for (double p : rep.sim.peak_memory_mb) c.peak_memory_mb = std::max(c.peak_memory_mb, p);
        }
        reports.push_back(std::move(c));
    }

    /// Lowers every replica and joins them into one plan with the header filled.
    [[nodiscard]] execution_plan assemble(const batching::split_result& s, const std::vector<detail::scheduled>& reps) const {
        execution_plan p;
        plan_header& h = p.header;
        const auto& first = reps.front().sched;
        h.iteration = opt_.iteration;
        set_placement(h, first.placement);
        h.dp = static_cast<std::uint32_t>(reps.size());
        h.sends = opt_.sends;
        h.schedule = first.name;
        h.type = opt_.type;
        h.zero_stage = static_cast<std::uint8_t>(opt_.config.zero_stage);
        std::uint32_t mb_offset = 0;
        for (std::size_t r = 0; r < reps.size(); ++r) {
            const auto mbs = replica_mbs(s, r);
            lowering_options lo;
            lo.type = opt_.type;
            lo.reduce = opt_.config.zero_stage >= 2 ? reduce_mode::reduce_scatter : reduce_mode::all_reduce;
            lo.rank_offset = static_cast<std::uint32_t>(r) * h.devices;
            lo.mb_offset = mb_offset;
            for (std::uint32_t j : reps[r].order) {
                const auto& rec = s.per_microbatch[std::size_t(mbs[j])];
                const tensor_shape shape{static_cast<std::uint32_t>(rec.shape.mbs), static_cast<std::uint32_t>(rec.shape.seqlen_tokens),
                                         static_cast<std::uint32_t>(rec.shape.dec_seqlen_tokens),
                                         static_cast<std::uint32_t>(opt_.hidden_size)};
                lo.shapes.push_back(shape);
                microbatch_entry e;
                e.replica = static_cast<std::uint32_t>(r);
                for (int id : s.microbatches[std::size_t(mbs[j])]) e.sample_ids.push_back(static_cast<std::uint32_t>(id));
                e.shape = shape;
                h.microbatches.push_back(std::move(e));
            }
            auto progs = insert_communication(lower_compute(reps[r].sc, reps[r].sched), reps[r].sc, lo);
            for (auto& prog : progs) p.programs.push_back(std::move(prog));
            h.predicted_makespan_ms = std::max(h.predicted_makespan_ms, reps[r].sim.makespan_ms);
            for (double x : reps[r].sim.peak_memory_mb) h.predicted_peak_memory_mb.push_back(x);
            mb_offset += static_cast<std::uint32_t>(reps[r].order.size());
        }
        parallel_for(p.programs.size(), opt_.threads, [&](std::size_t k, std::size_t) { plan_buffers(p.programs[k]); });
        return p;
    }

    void summarize(plan_result& res, std::vector<detail::scheduled>& reps) const {
        res.makespan_ms = res.plan.header.predicted_makespan_ms;
        res.peak_memory_mb = res.plan.header.predicted_peak_memory_mb;
        for (const auto& r : reps) res.lower_bound_ms = std::max(res.lower_bound_ms, r.sim.lower_bound_ms);
        for (const auto& prog : res.plan.programs) {
            res.arena_mb.push_back(static_cast<double>(prog.arena_bytes) / 1e6);
            res.live_peak_mb.push_back(static_cast<double>(prog.live_peak_bytes) / 1e6);
        }
        for (const auto& r : reps) res.simulations.push_back(r.sim);
        res.scenario = std::move(reps.front().sc);
        res.schedule = std::move(reps.front().sched);
        res.simulation = std::move(reps.front().sim);
    }
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
