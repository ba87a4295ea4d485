// pipeplan/compare/sweep.hpp — the methods of compare/methods.hpp side by side over settings.
//
// A setting is a maximum sequence length (samples truncated at it; packing's row length) and a
// global-batch token budget. Per setting, `iterations` global batches are drawn from a length
// pool with the seed (batching/draw.hpp; the same batches for every method), and every method
// is searched as DynaPipe's artifact searched Megatron-LM's: each baseline's knob grid and,
// with `gpus` > 0, every parallelism tp × pp × dp = gpus (tp from the profiles, pp dividing the
// layer count, even for an encoder-decoder) — one choice per setting, the least total time over
// the setting's batches with every batch feasible. pipeplan also plans, per batch, the micro-
// batches of the best baseline of its configuration, so it is never slower than that baseline;
// dynapipe's candidates are a subset of pipeplan's, so it is never faster than pipeplan.
// Per method and setting: throughput (real tokens and samples per second), iteration time,
// batching efficiency (real tokens / computed tokens, padding included), peak memory against
// the limit, makespan / lower bound, planning time per iteration, the speedup over the best
// baseline, and a representative iteration (the first) for a Gantt chart. With `ablation`, the
// split (best baseline's, exact) × schedule (1F1B in split order, adaptive with its order
// search) at pipeplan's configuration. Everything but the planning times is a function of the
// inputs and the seed.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/batching/draw.hpp"
#include "pipeplan/batching/exact_split.hpp"
#include "pipeplan/compare/methods.hpp"

namespace pipeplan::compare {

/// One point of the sweep.
struct setting {
    int max_seqlen_tokens = 2048;  ///< truncation (encoder and decoder) and packing's row length
    long long tokens = 65536;      ///< global-batch token budget
    friend bool operator==(const setting&, const setting&) = default;
};

/// A parallelism: tp × pp × dp devices, layers_per_stage layers on each of the pp stages.
struct parallel_config {
    int tp = 1, pp = 1, dp = 1, layers_per_stage = 1;
    friend bool operator==(const parallel_config&, const parallel_config&) = default;
};

struct compare_options {
    /// The configuration compared (config.stages, layers_per_stage, tp, dp when gpus = 0),
    /// cluster, device memory, hidden size; split.lengths.max_* are set per setting.
    plan::planner_options planner;
    knob_grid knobs;
    std::vector<setting> settings = {setting{}};
    std::size_t iterations = 10;          ///< global batches per setting (>= 1)
    batching::draw_options draw;          ///< seed and mixture weights (tokens: per setting)
    int gpus = 0;                         ///< > 0: search tp × pp × dp = gpus
    int total_layers = 0;                 ///< with gpus: the model's layer count (encoder + decoder)
    std::vector<int> tp_degrees = {1, 2, 4, 8};  ///< with gpus: the tp the cost model covers
    bool ablation = true;                 ///< the split × schedule ablation
};

/// One method's result in one setting.
struct method_summary {
    method kind = method::padding;
    bool feasible = false;
    std::string reason;                  ///< why infeasible
    parallel_config parallel;            ///< the configuration chosen
    std::vector<std::pair<std::string, std::string>> config;  ///< the knobs chosen (name, value)
    std::vector<double> iteration_ms, planning_ms, lower_bound_ms, peak_memory_mb;  ///< per iteration
    std::vector<long long> computed_tokens;                                         ///< per iteration
    std::map<std::string, int> schedules, splits;  ///< how often each schedule / split source ran
    std::optional<gantt_chart> chart;    ///< the first iteration
    // Aggregates (filled by summarize): means over the iterations, throughput over their sum.
    double tokens_per_s = 0, samples_per_s = 0, mean_iteration_ms = 0, efficiency = 0, max_peak_memory_mb = 0,
           makespan_over_lower_bound = 0, mean_planning_ms = 0, speedup_over_best_baseline = 0;
};

/// The split × schedule ablation of one setting (mean iteration ms; NaN where infeasible).
struct ablation_result {
    bool done = false;
    std::string baseline;                            ///< the best baseline whose split is used
    std::array<std::string, 2> splits{"baseline", "exact"};
    std::array<std::string, 2> schedules{"1f1b", "adaptive"};
    std::array<std::array<double, 2>, 2> iteration_ms{};  ///< [split][schedule]
};

struct setting_result {
    setting point;
    double memory_limit_mb = 0;
    std::vector<long long> real_tokens;   ///< per iteration (after truncation, no padding)
    std::vector<std::size_t> samples;     ///< per iteration
    std::array<method_summary, method_count> methods;
    std::string best_baseline;            ///< empty when no baseline is feasible
    ablation_result ablation;
};

struct compare_report {
    std::vector<setting_result> settings;
    std::size_t iterations = 0;
    std::uint64_t seed = 0;
    int gpus = 0;
};

namespace detail {

/// The parallelisms searched: tp × pp × dp = gpus (see the file comment), or the configured one.
[[nodiscard]] inline std::vector<parallel_config> parallel_configs(const compare_options& o, bool encoder_decoder) {
    const auto& c = o.planner.config;
    if (o.gpus <= 0) return {parallel_config{c.tp, c.stages, c.dp, c.layers_per_stage}};
    if (o.total_layers < 1) throw invalid_argument("compare: searching the parallelism needs the model's layer count");
    std::vector<parallel_config> out;
    for (int tp : o.tp_degrees) {
        if (tp < 1 || o.gpus % tp != 0) continue;
        for (int pp = 1; pp <= o.gpus / tp; ++pp) {
            if ((o.gpus / tp) % pp != 0 || o.total_layers % pp != 0 || (encoder_decoder && pp % 2 != 0)) continue;
            out.push_back({tp, pp, o.gpus / tp / pp, o.total_layers / pp});
        }
    }
    if (out.empty())
        throw invalid_argument("compare: no tp x pp x dp = " + std::to_string(o.gpus) + " with tp in the profiles and pp dividing " +
                               std::to_string(o.total_layers) + " layers" + (encoder_decoder ? " (even pp)" : ""));
    return out;
}

inline std::string describe(const parallel_config& p) {
    return "tp " + std::to_string(p.tp) + ", pp " + std::to_string(p.pp) + ", dp " + std::to_string(p.dp);
}

/// The best choice of one method so far: configuration, knobs, per-batch runs, total time.
struct choice {
    double total_ms = std::numeric_limits<double>::infinity();
    parallel_config parallel;
    std::optional<baseline_knobs> knobs;
    std::vector<batch_run> runs;
    std::string reason;  ///< the last infeasibility seen
    [[nodiscard]] bool found() const noexcept { return std::isfinite(total_ms); }
    /// Keeps `runs` when all are feasible and faster in total; else remembers why not.
    void offer(std::vector<batch_run>&& rs, const parallel_config& p, std::optional<baseline_knobs> k) {
        double t = 0;
        for (const auto& r : rs) {
            if (!r.feasible) {
                reason = describe(p) + ": " + r.reason;
                return;
            }
            t += r.iteration_ms;
        }
        if (t < total_ms) {
            total_ms = t;
            parallel = p;
            knobs = k;
            runs = std::move(rs);
        }
    }
};

/// The planner options of configuration `p` in setting `s`.
[[nodiscard]] inline plan::planner_options options_for(const compare_options& o, const parallel_config& p, const setting& s) {
    plan::planner_options po = o.planner;
    po.config.tp = p.tp;
    po.config.stages = p.pp;
    po.config.dp = p.dp;
    po.config.layers_per_stage = p.layers_per_stage;
    po.split.lengths.max_seqlen_tokens = s.max_seqlen_tokens;
    po.split.lengths.max_dec_seqlen_tokens = s.max_seqlen_tokens;
    return po;
}

/// Runs `fn(batch index)` for every batch; the first run keeps its chart.
template <class F>
[[nodiscard]] std::vector<batch_run> over_batches(std::size_t n, F&& fn) {
    std::vector<batch_run> rs;
    rs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        rs.push_back(fn(i, i == 0));
        if (!rs.back().feasible) break;  // the choice is infeasible: the rest need not run
    }
    return rs;
}

/// Everything searched at one configuration of one setting.
template <cost_model Model>
struct config_search {
    const Model& model;
    const compare_options& opt;
    const std::vector<std::vector<batching::sample>>& batches;
    std::array<choice, method_count>& best;
    std::vector<std::vector<batch_run>>& best_baseline_runs;  ///< per configuration index

    void run(const parallel_config& p, const setting& s) {
        const plan::planner_options po = options_for(opt, p, s);
        std::optional<plan::planner<Model>> base;
        try {
            base.emplace(model, po);
        } catch (const error& e) {
            for (auto& c : best) c.reason = describe(p) + ": " + e.what();
            best_baseline_runs.emplace_back();
            return;
        }
        choice here;  // the best baseline at this configuration
        for (method m : {method::padding, method::packing, method::tokens})
            for (const baseline_knobs& k : knob_settings(m, opt.knobs)) {
                auto rs = over_batches(batches.size(), [&](std::size_t i, bool chart) {
                    return run_baseline(model, *base, batches[i], k, chart);
                });
                std::vector<batch_run> copy = rs;
                best[static_cast<std::size_t>(m)].offer(std::move(rs), p, k);
                here.offer(std::move(copy), p, k);
            }
        plan::planner<Model> dyn(model, dynapipe_options(po));
        best[static_cast<std::size_t>(method::dynapipe)].offer(
            over_batches(batches.size(), [&](std::size_t i, bool chart) { return run_planner(dyn, batches[i], nullptr, nullptr, chart); }),
            p, std::nullopt);
        std::optional<plan::planner<Model>> given;
        if (here.found()) given.emplace(model, baseline_microbatch_options(po, here.knobs->recompute));
        plan::planner<Model> full(model, po);
        best[static_cast<std::size_t>(method::pipeplan)].offer(
            over_batches(batches.size(), [&](std::size_t i, bool chart) {
                return run_planner(full, batches[i], here.found() ? &here.runs[i] : nullptr, given ? &*given : nullptr, chart);
            }),
            p, std::nullopt);
        best_baseline_runs.push_back(here.found() ? std::move(here.runs) : std::vector<batch_run>{});
    }
};

/// The knobs of a method's choice, as (name, value) pairs.
[[nodiscard]] inline std::vector<std::pair<std::string, std::string>> knob_config(method m, const choice& c, const setting& s) {
    std::vector<std::pair<std::string, std::string>> out{{"tp", std::to_string(c.parallel.tp)},
                                                         {"pp", std::to_string(c.parallel.pp)},
                                                         {"dp", std::to_string(c.parallel.dp)}};
    if (c.knobs) {
        const baseline_knobs& k = *c.knobs;
        if (m == method::padding) out.emplace_back("mbs", std::to_string(k.size));
        if (m == method::packing) {
            out.emplace_back("rows_per_microbatch", std::to_string(k.size));
            out.emplace_back("row_tokens", std::to_string(s.max_seqlen_tokens));
        }
        if (m == method::tokens) out.emplace_back("tokens_per_microbatch", std::to_string(k.tokens));
        out.emplace_back("recompute", std::string(to_string(k.recompute)));
        out.emplace_back("schedule", "1f1b");
    }
    return out;
}

/// Fills the aggregates of `m` from its runs and the setting's real tokens.
inline void summarize(method_summary& m, const setting_result& r) {
    if (!m.feasible) return;
    double ms = 0, plan_ms = 0, ratio = 0;
    long long real = 0, computed = 0;
    std::size_t samples = 0;
    const std::size_t n = m.iteration_ms.size();
    for (std::size_t i = 0; i < n; ++i) {
        ms += m.iteration_ms[i];
        plan_ms += m.planning_ms[i];
        ratio += m.lower_bound_ms[i] > 0 ? m.iteration_ms[i] / m.lower_bound_ms[i] : 1.0;
        real += r.real_tokens[i];
        samples += r.samples[i];
        computed += m.computed_tokens[i];
        m.max_peak_memory_mb = std::max(m.max_peak_memory_mb, m.peak_memory_mb[i]);
    }
    m.tokens_per_s = static_cast<double>(real) / (ms / 1000.0);
    m.samples_per_s = static_cast<double>(samples) / (ms / 1000.0);
    m.mean_iteration_ms = ms / static_cast<double>(n);
    m.mean_planning_ms = plan_ms / static_cast<double>(n);
    m.makespan_over_lower_bound = ratio / static_cast<double>(n);
    m.efficiency = computed > 0 ? static_cast<double>(real) / static_cast<double>(computed) : 0.0;
}

/// The summary of method `m` from its choice.
[[nodiscard]] inline method_summary summary_of(method m, choice&& c, const setting& s) {
    method_summary out;
    out.kind = m;
    out.feasible = c.found();
    if (!out.feasible) {
        out.reason = c.reason.empty() ? "no configuration was feasible" : c.reason;
        return out;
    }
    out.parallel = c.parallel;
    out.config = knob_config(m, c, s);
    for (auto& r : c.runs) {
        out.iteration_ms.push_back(r.iteration_ms);
        out.planning_ms.push_back(r.planning_ms);
        out.lower_bound_ms.push_back(r.lower_bound_ms);
        out.peak_memory_mb.push_back(r.peak_memory_mb);
        out.computed_tokens.push_back(r.computed_tokens);
        ++out.schedules[r.schedule];
        ++out.splits[r.split];
    }
    if (!is_baseline(m)) {
        const auto top = [](const std::map<std::string, int>& h) {
            return std::max_element(h.begin(), h.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
        };
        out.config.emplace_back("schedule", top(out.schedules));
        out.config.emplace_back("split", top(out.splits));
        out.config.emplace_back("recompute", std::string(to_string(c.runs.front().recompute)));
    }
    out.chart = std::move(c.runs.front().chart);
    return out;
}

}  // namespace detail

/// The real (truncated, unpadded) tokens of `batch` under the length rules: what efficiency and
/// throughput count.
[[nodiscard]] inline long long real_tokens(std::span<const batching::sample> batch, const batching::length_rules& rules,
                                           bool encoder_decoder) {
    long long n = 0;
    for (const auto& s : batching::padded_shapes(batch, rules, encoder_decoder)) n += s.raw_tokens + s.raw_dec_tokens;
    return n;
}

/// The split × schedule ablation at configuration `p` (see the file comment).
template <cost_model Model>
[[nodiscard]] ablation_result run_ablation(const Model& model, const compare_options& o, const parallel_config& p,
                                           const setting& s, const std::vector<std::vector<batching::sample>>& batches,
                                           const std::vector<batch_run>& baseline_runs) {
    ablation_result a;
    if (baseline_runs.size() != batches.size()) return a;
    const plan::planner_options po = detail::options_for(o, p, s);
    plan::planner<Model> pl(model, po);
    a.baseline = baseline_runs.front().split;
    for (auto& row : a.iteration_ms) row.fill(0.0);
    for (std::size_t i = 0; i < batches.size(); ++i) {
        std::optional<batching::split_result> exact;
        try {
            exact = batching::exact_split(model, batches[i], po.config, po.split);
        } catch (const error&) {
        }
        for (std::size_t sp = 0; sp < 2; ++sp)
            for (std::size_t sc = 0; sc < 2; ++sc) {
                const batching::split_result* split = sp == 0 ? &baseline_runs[i].micro : (exact ? &*exact : nullptr);
                double ms = std::numeric_limits<double>::quiet_NaN();
                if (split) {
                    const auto kind = sc == 0 ? schedule::schedule_name::one_f_one_b : schedule::schedule_name::adaptive;
                    const auto sim = pl.simulate_split(*split, kind, sc == 1);
                    if (sim.report.feasible) ms = sim.report.makespan_ms;
                }
                a.iteration_ms[sp][sc] += ms / static_cast<double>(batches.size());
            }
    }
    a.done = true;
    return a;
}

/// One setting: draws the batches, searches every method, summarizes.
template <cost_model Model>
[[nodiscard]] setting_result run_setting(const Model& model, const batching::length_pool& pool, const compare_options& o,
                                         const setting& s) {
    setting_result r;
    r.point = s;
    r.memory_limit_mb = o.planner.config.device_memory_mb;
    batching::draw_options d = o.draw;
    d.tokens = s.tokens;
    batching::batch_drawer drawer(pool, d);
    std::vector<std::vector<batching::sample>> batches;
    batching::length_rules rules = o.planner.split.lengths;
    rules.max_seqlen_tokens = rules.max_dec_seqlen_tokens = s.max_seqlen_tokens;
    for (std::size_t i = 0; i < o.iterations; ++i) {
        batches.push_back(drawer.next());
        r.real_tokens.push_back(real_tokens(batches.back(), rules, model.is_encoder_decoder()));
        r.samples.push_back(batches.back().size());
    }
    const auto configs = detail::parallel_configs(o, model.is_encoder_decoder());
    std::array<detail::choice, method_count> best;
    std::vector<std::vector<batch_run>> baseline_runs;
    detail::config_search<Model> search{model, o, batches, best, baseline_runs};
    for (const auto& p : configs) search.run(p, s);
    const parallel_config pipeplan_at = best[static_cast<std::size_t>(method::pipeplan)].parallel;
    const bool pipeplan_found = best[static_cast<std::size_t>(method::pipeplan)].found();
    for (method m : all_methods)
        r.methods[static_cast<std::size_t>(m)] = detail::summary_of(m, std::move(best[static_cast<std::size_t>(m)]), s);
    for (auto& m : r.methods) detail::summarize(m, r);
    double best_tps = 0;
    for (method m : {method::padding, method::packing, method::tokens}) {
        const auto& ms = r.methods[static_cast<std::size_t>(m)];
        if (ms.feasible && ms.tokens_per_s > best_tps) best_tps = ms.tokens_per_s, r.best_baseline = std::string(to_string(m));
    }
    for (auto& m : r.methods)
        if (m.feasible && best_tps > 0) m.speedup_over_best_baseline = m.tokens_per_s / best_tps;
    if (o.ablation && pipeplan_found) {
        const auto at = std::find(configs.begin(), configs.end(), pipeplan_at) - configs.begin();
        r.ablation = run_ablation(model, o, pipeplan_at, s, batches, baseline_runs[static_cast<std::size_t>(at)]);
    }
    return r;
}

/// The whole sweep: every setting of `o` on batches drawn from `pool`. Throws invalid_argument
/// for bad options (no setting, no iteration, a parallelism search without a layer count).
template <cost_model Model>
[[nodiscard]] compare_report run_compare(const Model& model, const batching::length_pool& pool, const compare_options& o) {
    if (o.settings.empty()) throw invalid_argument("compare: no setting to run");
    if (o.iterations < 1) throw invalid_argument("compare: iterations must be >= 1");
    for (const auto& s : o.settings) {
        if (s.max_seqlen_tokens < 1) throw invalid_argument("compare: max sequence length must be >= 1");
        if (s.tokens < 1) throw invalid_argument("compare: global batch tokens must be >= 1");
    }
    compare_report rep;
    rep.iterations = o.iterations;
    rep.seed = o.draw.seed;
    rep.gpus = o.gpus;
    for (const auto& s : o.settings) rep.settings.push_back(run_setting(model, pool, o, s));
    return rep;
}

}  // namespace pipeplan::compare
