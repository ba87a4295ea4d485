// pipeplan/batching/split_context.hpp — what every splitter shares: options, the ladder of
// memory limits and recomputation modes, input checks, typed errors and result assembly.
//
// The ladder: stored-activation limits in order (the preferred limit, available / S or a caller's
// fraction, then the available memory = device memory − model states) × recomputation modes in
// order (none → selective → full); the first rung under which a split exists is used and the
// result says which. Every micro-batch of a result satisfies stored ≤ memory_limit_mb and
// peak ≤ available_mb.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/batching/cost_cache.hpp"
#include "pipeplan/batching/errors.hpp"
#include "pipeplan/batching/ordering.hpp"
#include "pipeplan/batching/packing.hpp"
#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/result.hpp"
#include "pipeplan/batching/sample.hpp"
#include "pipeplan/batching/stage_cost.hpp"
#include "pipeplan/cost/concept.hpp"

namespace pipeplan::batching {

/// preferred, then available.
[[nodiscard]] inline std::vector<memory_limit_kind> default_limit_ladder() {
    std::vector<memory_limit_kind> v;
    v.push_back(memory_limit_kind::preferred);
    v.push_back(memory_limit_kind::available);
    return v;
}
/// none → selective → full.
[[nodiscard]] inline std::vector<recompute_mode> default_recompute_ladder() {
    return {all_recompute_modes.begin(), all_recompute_modes.end()};
}

/// Options shared by the exact split and the baselines.
struct split_options {
    accounting_mode accounting = accounting_mode::pipeplan;
    length_rules lengths;                              ///< rounding / truncation
    ordering_method order = ordering_method::automatic;  ///< the exact split's sample order
    /// Preferred stored limit as a fraction of the available memory; 0 = 1 / S.
    double preferred_fraction = 0;
    /// Stored limits tried, in order.
    std::vector<memory_limit_kind> limit_ladder = default_limit_ladder();
    /// Recomputation modes tried (for each limit), in order.
    std::vector<recompute_mode> recompute_ladder = default_recompute_ladder();
    packing_options packing;        ///< Exact split only: packing inside micro-batches (decoder-only)
    double relative_tolerance = 0;  ///< Exact split only: 0 = exact
    /// Exact split, encoder-decoder, automatic order: refinement passes after the initial orders (>= 0).
    int refine_passes = 4;
    /// Exact split only: search only for splits whose objective is below this bound (infinity = exact).
    /// The result is the exact optimum whenever that is below the bound; otherwise a split whose
    /// objective is >= the bound (a caller holding a split of that objective keeps its own).
    double objective_bound_ms = std::numeric_limits<double>::infinity();
    /// Exact split only: how many runner-up splits exact_split returns when asked (its `alternatives`).
    int alternative_splits = 2;
    /// Exact split only: weights w of the fill term for the reweighted splits exact_split returns when asked
    /// (its `reweighted`): each the exact optimum of w · (S − 1) · t_max / C + Σ t / dp over the
    /// final order's contiguous splits, under the same rung. Each w must be finite and >= 0.
    std::vector<double> fill_weights;
};

/// One rung of the ladder: a stored limit and a recomputation mode, with the resulting limits.
struct memory_rung {
    memory_limit_kind kind = memory_limit_kind::preferred;
    recompute_mode recompute = recompute_mode::none;
    double stored_limit_mb = 0;
    double available_mb = 0;
    double model_state_mb = 0;
    [[nodiscard]] bool fits(const microbatch_cost& c) const noexcept {
        return c.stored_mb <= stored_limit_mb && c.peak_mb <= available_mb;
    }
};

namespace detail {

inline std::string fmt_mb(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f MB", v);
    return buf;
}

inline std::string describe(const microbatch_shape& s) {
    std::string out = "mbs " + std::to_string(s.mbs) + ", seqlen " + std::to_string(s.seqlen_tokens);
    if (s.dec_seqlen_tokens > 0) out += ", decoder seqlen " + std::to_string(s.dec_seqlen_tokens);
    return out;
}

}  // namespace detail

/// The shared state of one split: the evaluator, the samples' padded shapes and the ladder.
template <cost_model Model>
class split_context {
public:
    /// Validates everything and throws split_error (empty batch, sample too long, model states)
    /// or invalid_argument (options, configuration, token counts).
    split_context(const Model& model, std::span<const sample> batch, const pipeline_config& config,
                  split_options options)
        : eval_(model, config, options.accounting), options_(std::move(options)) {
        if (batch.empty()) throw split_error(split_failure::empty_batch, "the batch has no samples");
        if (!(options_.preferred_fraction >= 0 && options_.preferred_fraction <= 1))
            throw invalid_argument("preferred memory fraction must be in [0, 1] (0 = 1/S)");
        if (options_.limit_ladder.empty() || options_.recompute_ladder.empty())
            throw invalid_argument("the memory-limit and recomputation ladders must not be empty");
        if (!(options_.relative_tolerance >= 0 && options_.relative_tolerance < 1))
            throw invalid_argument("relative tolerance must be in [0, 1)");
        for (double w : options_.fill_weights)
            if (!(w >= 0) || !std::isfinite(w)) throw invalid_argument("fill weights must be finite and >= 0");
        if (options_.refine_passes < 0) throw invalid_argument("refine passes must be >= 0");
        if (std::isnan(options_.objective_bound_ms)) throw invalid_argument("objective bound must not be NaN");
        if (options_.alternative_splits < 0 || options_.alternative_splits > 64)
            throw invalid_argument("alternative splits must be in [0, 64]");
        if (options_.packing.separator_tokens < 0) throw invalid_argument("packing separator tokens must be >= 0");
        if (options_.packing.enabled && eval_.encoder_decoder())
            throw invalid_argument("packing inside micro-batches is supported for decoder-only models only");
        shapes_ = padded_shapes(batch, options_.lengths, eval_.encoder_decoder());
        singletons_ = distinct_singletons();
        build_ladder();
        check_lengths();
    }

    [[nodiscard]] const stage_cost_evaluator<Model>& evaluator() const noexcept { return eval_; }
    [[nodiscard]] const split_options& options() const noexcept { return options_; }
    [[nodiscard]] const std::vector<sample_shape>& shapes() const noexcept { return shapes_; }
    [[nodiscard]] const std::vector<memory_rung>& ladder() const noexcept { return ladder_; }
    [[nodiscard]] const pipeline_config& config() const noexcept { return eval_.config(); }

    /// Prices shape rows through `cache` (nullptr: no cache); it is bound to this evaluator.
    void use_cache(shape_cost_cache* cache) {
        cache_ = cache;
        if (cache_) cache_->bind(eval_);
    }
    [[nodiscard]] shape_cost_cache* cache() const noexcept { return cache_; }

    /// True when the shape can be priced and fits under `rung`; its cost is then in `out`.
    [[nodiscard]] bool fits(const microbatch_shape& s, const memory_rung& rung, microbatch_cost& out) const {
        if (cache_ && s.mbs == 1) {
            auto& row = cache_->at(s.seqlen_tokens, s.dec_seqlen_tokens, rung.recompute);
            const microbatch_cost* c = cache_->cost(row, eval_, s.seqlen_tokens, s.dec_seqlen_tokens, rung.recompute, 1);
            if (!c) return false;
            out = *c;
            return rung.fits(out);
        }
        const auto e = eval_.evaluate(s, rung.recompute);
        if (!e.ok()) return false;
        out = e.value();
        return rung.fits(out);
    }

    /// True when every sample alone fits under `rung` (then a split exists under it).
    [[nodiscard]] bool singletons_fit(const memory_rung& rung) const {
        microbatch_cost c;
        for (const auto& s : singletons_)
            if (!fits(s, rung, c)) return false;
        return true;
    }

    /// Throws the split_error explaining why no sample-by-sample split fits under any rung:
    /// the worst sample under the most permissive (last) rung, and by how much it is over.
    [[noreturn]] void throw_no_rung() const {
        const memory_rung& rung = ladder_.back();
        double worst_peak = -1, worst_stored = -1;
        long long peak_id = -1, stored_id = -1;
        for (std::size_t i = 0; i < shapes_.size(); ++i) {
            const microbatch_shape s{1, shapes_[i].seqlen_tokens, shapes_[i].dec_seqlen_tokens};
            const auto e = eval_.evaluate(s, rung.recompute);
            if (!e.ok()) continue;
            const double pe = e.value().peak_mb - rung.available_mb;
            const double se = e.value().stored_mb - rung.stored_limit_mb;
            if (pe > 0 && (peak_id < 0 || pe > worst_peak)) worst_peak = pe, peak_id = static_cast<long long>(i);
            if (se > 0 && (stored_id < 0 || se > worst_stored)) worst_stored = se, stored_id = static_cast<long long>(i);
        }
        if (peak_id < 0 && stored_id < 0) {
            // Every sample fits the last rung's limits, so some sample cannot be priced under its
            // recomputation mode (it was under another mode, with a smaller limit).
            for (std::size_t i = 0; i < shapes_.size(); ++i) {
                const microbatch_shape s{1, shapes_[i].seqlen_tokens, shapes_[i].dec_seqlen_tokens};
                if (eval_.evaluate(s, rung.recompute).ok()) continue;
                throw split_error(split_failure::unpriceable,
                                  "no feasible split under any memory limit: sample " + std::to_string(i) + " (" +
                                      detail::describe(s) + ") is beyond the cost model's range under " +
                                      std::string(to_string(rung.recompute)) +
                                      " recomputation and does not fit under the other modes",
                                  0, 0, "", static_cast<long long>(i));
            }
        }
        const bool peak = peak_id >= 0;
        const long long id = peak ? peak_id : stored_id;
        if (id < 0)  // unreachable: the last rung would then be feasible
            throw split_error(split_failure::peak_memory, "no feasible split under any memory limit");
        const auto& sh = shapes_[static_cast<std::size_t>(id)];
        const microbatch_cost c =
            eval_.evaluate(microbatch_shape{1, sh.seqlen_tokens, sh.dec_seqlen_tokens}, rung.recompute).value();
        const double need = peak ? c.peak_mb : c.stored_mb;
        const double limit = peak ? rung.available_mb : rung.stored_limit_mb;
        throw split_error(
            peak ? split_failure::peak_memory : split_failure::stored_memory,
            "no feasible split under any memory limit: sample " + std::to_string(id) + " alone (" +
                detail::describe({1, sh.seqlen_tokens, sh.dec_seqlen_tokens}) + ") needs " +
                (peak ? "a peak of " : "stored activations of ") + detail::fmt_mb(need) + " under " +
                std::string(to_string(rung.recompute)) + " recomputation, but the " +
                (peak ? std::string("available memory") : std::string(to_string(rung.kind)) + " stored limit") +
                " is " + detail::fmt_mb(limit) + " (device " + detail::fmt_mb(config().device_memory_mb) +
                " − model states " + detail::fmt_mb(rung.model_state_mb) + "): over by " +
                detail::fmt_mb(need - limit),
            need, limit, "MB", id);
    }

    /// The padded shape of micro-batch `k` of `microbatches`: its samples' shape, or with packed
    /// rows (layout.rows[k] non-empty) one row per packed row, padded to layout.row_tokens[k]
    /// (and layout.row_dec_tokens[k]) where those are given and > 0, else to its longest sample.
    [[nodiscard]] microbatch_shape shape_of_microbatch(std::size_t k, std::span<const int> ids,
                                                      const packed_layout& layout) const {
        microbatch_shape s = shape_of(ids, shapes_);
        if (k < layout.rows.size() && !layout.rows[k].empty()) {
            s.mbs = static_cast<int>(layout.rows[k].size());
            if (k < layout.row_tokens.size() && layout.row_tokens[k] > 0) s.seqlen_tokens = layout.row_tokens[k];
            if (k < layout.row_dec_tokens.size() && layout.row_dec_tokens[k] > 0)
                s.dec_seqlen_tokens = layout.row_dec_tokens[k];
        }
        return s;
    }

    /// Assembles a result for the given micro-batches (sample ids; optional packed rows, see
    /// shape_of_microbatch) under `rung`; every micro-batch must fit (checked by the caller).
    [[nodiscard]] split_result assemble(std::string method, std::vector<std::vector<int>> microbatches,
                                        packed_layout layout, const memory_rung& rung) const {
        split_result r;
        r.method = std::move(method);
        r.accounting = eval_.mode();
        r.recompute = rung.recompute;
        r.limit = rung.kind;
        r.memory_limit_mb = rung.stored_limit_mb;
        r.available_mb = rung.available_mb;
        r.model_state_mb = rung.model_state_mb;
        r.stages = config().stages;
        r.virtual_chunks = config().virtual_chunks;
        r.dp = config().dp;
        r.per_microbatch.reserve(microbatches.size());
        for (std::size_t k = 0; k < microbatches.size(); ++k) {
            microbatch_record rec;
            rec.shape = shape_of_microbatch(k, microbatches[k], layout);
            if (k < layout.rows.size()) rec.rows = std::move(layout.rows[k]);
            rec.cost = eval_.evaluate(rec.shape, rung.recompute).value();
            r.tmax_ms = k == 0 ? rec.cost.time_ms : std::max(r.tmax_ms, rec.cost.time_ms);
            r.sum_ms += rec.cost.time_ms;
            r.per_microbatch.push_back(std::move(rec));
        }
        r.microbatches = std::move(microbatches);
        r.objective_ms = pipeline_objective_ms(r.stages, r.virtual_chunks, r.dp, r.tmax_ms, r.sum_ms);
        return r;
    }

    /// For fixed micro-batches (baselines): the first rung under which all of them fit, with
    /// the result; otherwise a split_error naming the micro-batch furthest over the limit of
    /// the most permissive rung.
    [[nodiscard]] split_result assemble_first_fitting(std::string method,
                                                      std::vector<std::vector<int>> microbatches,
                                                      packed_layout layout = {}) const {
        std::vector<microbatch_shape> mshapes;
        mshapes.reserve(microbatches.size());
        for (std::size_t k = 0; k < microbatches.size(); ++k) mshapes.push_back(shape_of_microbatch(k, microbatches[k], layout));
        for (const auto& rung : ladder_) {
            bool ok = true;
            microbatch_cost c;
            for (const auto& s : mshapes)
                if (!fits(s, rung, c)) {
                    ok = false;
                    break;
                }
            if (ok) return assemble(std::move(method), std::move(microbatches), std::move(layout), rung);
        }
        const memory_rung& rung = ladder_.back();
        double worst = 0, need = 0, limit = 0;
        long long worst_k = -1;
        bool peak = true, unpriced = false;
        for (std::size_t k = 0; k < mshapes.size(); ++k) {
            const auto e = eval_.evaluate(mshapes[k], rung.recompute);
            if (!e.ok()) {
                if (worst_k < 0 || !unpriced) worst_k = static_cast<long long>(k);
                unpriced = true;
                continue;
            }
            if (unpriced) continue;
            const double pe = e.value().peak_mb - rung.available_mb;
            const double se = e.value().stored_mb - rung.stored_limit_mb;
            const double over = std::max(pe, se);
            if (over > 0 && (worst_k < 0 || over > worst)) {
                worst = over;
                worst_k = static_cast<long long>(k);
                peak = pe >= se;
                need = peak ? e.value().peak_mb : e.value().stored_mb;
                limit = peak ? rung.available_mb : rung.stored_limit_mb;
            }
        }
        const auto& s = mshapes[static_cast<std::size_t>(worst_k < 0 ? 0 : worst_k)];
        if (unpriced)
            throw split_error(split_failure::unpriceable,
                              method + ": micro-batch " + std::to_string(worst_k) + " (" + detail::describe(s) +
                                  ") is beyond the cost model's range under " +
                                  std::string(to_string(rung.recompute)) + " recomputation");
        throw split_error(peak ? split_failure::peak_memory : split_failure::stored_memory,
                          method + ": micro-batch " + std::to_string(worst_k) + " (" + detail::describe(s) +
                              ") needs " + (peak ? "a peak of " : "stored activations of ") + detail::fmt_mb(need) +
                              " under " + std::string(to_string(rung.recompute)) + " recomputation, but the limit is " +
                              detail::fmt_mb(limit) + ": over by " + detail::fmt_mb(need - limit),
                          need, limit, "MB", -1);
    }

private:
    [[nodiscard]] std::vector<microbatch_shape> distinct_singletons() const {
        std::vector<microbatch_shape> v;
        v.reserve(shapes_.size());
        for (const auto& s : shapes_) v.push_back({1, s.seqlen_tokens, s.dec_seqlen_tokens});
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
        return v;
    }

    void build_ladder() {
        const double device = config().device_memory_mb;
        double least_states = -1;
        recompute_mode least_r = recompute_mode::none;
        for (auto kind : options_.limit_ladder) {
            for (auto r : options_.recompute_ladder) {
                const auto ms = eval_.model_state_mb(r);
                if (!ms.ok())
                    throw split_error(split_failure::unpriceable,
                                      "the cost model has no parameter memory for a layer of this pipeline (tp " +
                                          std::to_string(config().tp) + ", " + std::string(to_string(r)) +
                                          " recomputation)");
                memory_rung rung;
                rung.kind = kind;
                rung.recompute = r;
                rung.model_state_mb = ms.value();
                rung.available_mb = device - ms.value();
                const double frac = options_.preferred_fraction > 0 ? options_.preferred_fraction
                                                                    : 1.0 / config().stages;
                rung.stored_limit_mb = kind == memory_limit_kind::preferred ? rung.available_mb * frac
                                                                            : rung.available_mb;
                if (least_states < 0 || ms.value() < least_states) least_states = ms.value(), least_r = r;
                if (rung.available_mb > 0) ladder_.push_back(rung);
            }
        }
        if (ladder_.empty())
            throw split_error(split_failure::model_states,
                              "model states alone need " + detail::fmt_mb(least_states) + " per device (" +
                                  std::string(to_string(least_r)) + " recomputation, ZeRO stage " +
                                  std::to_string(config().zero_stage) + ", dp " + std::to_string(config().dp) +
                                  ") but the device has " + detail::fmt_mb(device) + ": over by " +
                                  detail::fmt_mb(least_states - device),
                              least_states, device, "MB");
    }

    /// Every sample must be priceable at mbs 1 under some rung's recomputation mode; otherwise it
    /// is longer than the model supports and the error says by how many tokens.
    void check_lengths() const {
        for (const auto& s : singletons_) {
            estimate_status worst = estimate_status::ok;
            bool any = false;
            for (const auto& rung : ladder_) {
                const auto e = eval_.evaluate(s, rung.recompute);
                if (e.ok()) {
                    any = true;
                    break;
                }
                worst = std::max(worst, e.status());
            }
            if (any) continue;
            std::size_t id = 0;
            while (!(shapes_[id].seqlen_tokens == s.seqlen_tokens && shapes_[id].dec_seqlen_tokens == s.dec_seqlen_tokens)) ++id;
            const recompute_mode r = ladder_.back().recompute;
            if (worst == estimate_status::unsupported)
                throw split_error(split_failure::unpriceable,
                                  "sample " + std::to_string(id) + " (" + detail::describe(s) +
                                      "): the cost model has no data for this query");
            // The longest supported length along the failing axis (binary search at mbs 1).
            const auto priced = [&](int len, int dec) {
                return eval_.evaluate(microbatch_shape{1, len, dec}, r).ok();
            };
            const int step = std::max(1, options_.lengths.round_to_tokens);
            const bool enc_dec = eval_.encoder_decoder();
            if (!priced(step, enc_dec ? step : 0))
                throw split_error(split_failure::sample_too_long,
                                  "lengths are rounded up to multiples of " + std::to_string(step) +
                                      " tokens (the length rounding), but the cost model cannot price even one "
                                      "sequence of " + std::to_string(step) +
                                      " tokens at mbs 1: use a smaller rounding",
                                  step, 0, "tokens", static_cast<long long>(id));
            const int fixed_dec = s.dec_seqlen_tokens;
            // Which length is too long: the decoder's only when the encoder's shortest is priced.
            const bool dec_axis = enc_dec && !priced(step, fixed_dec);
            const int have = dec_axis ? s.dec_seqlen_tokens : s.seqlen_tokens;
            long long lo = 0, hi = have / step;  // lo: largest multiple known priced (0 = none)
            while (hi - lo > 1) {
                const long long mid = lo + (hi - lo) / 2;
                const int len = static_cast<int>(mid * step);
                if (dec_axis ? priced(step, len) : priced(len, fixed_dec)) lo = mid;
                else hi = mid;
            }
            const int supported = static_cast<int>(lo * step);
            const std::string what = dec_axis ? "decoder length" : (eval_.encoder_decoder() ? "encoder length" : "length");
            throw split_error(split_failure::sample_too_long,
                              "sample " + std::to_string(id) + " is longer than the model supports: its " + what + " is " +
                                  std::to_string(have) + " tokens, the longest the cost model can price at mbs 1 is " +
                                  std::to_string(supported) + " tokens (over by " + std::to_string(have - supported) +
                                  " tokens; use a maximum sequence length to truncate)",
                              have, supported, "tokens", static_cast<long long>(id));
        }
    }

    stage_cost_evaluator<Model> eval_;
    split_options options_;
    std::vector<sample_shape> shapes_;
    std::vector<microbatch_shape> singletons_;  ///< the distinct shapes of one sample, sorted
    std::vector<memory_rung> ladder_;
    shape_cost_cache* cache_ = nullptr;
};

}  // namespace pipeplan::batching
