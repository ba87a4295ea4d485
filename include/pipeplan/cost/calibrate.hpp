// pipeplan/cost/calibrate.hpp — fits the analytic model's factors to a reference cost model.
//
// The only cost-tier header that includes Eigen (link pipeplan_calibrate_dep); the analytic
// model itself does not need it.
//
// Method (linear least squares on relative errors, with non-negative coefficients):
//  * Time, per (component, phase): for a fixed set of decisions (which kernels are compute-
//    and which memory-bound, which points host-bound) the analytic time is linear in
//        x = (1/e_compute, 1/e_memory, 1/e_link, overhead_ms_per_kernel)
//    (analytic_cost_model::terms): a GPU-bound point's row is (compute, memory, link, 0), a
//    host-bound point's (0, 0, 0, kernels). Rows are the query points where the reference has a value,
//    each divided by the reference time, so the fit minimises the sum of squared relative
//    errors. The coefficients must be >= 0: the non-negative least-squares problem is solved
//    exactly by enumerating the subsets of columns (at most 4 columns, 15 subsets, each an
//    Eigen Householder QR solve) and keeping the best feasible one. The roofline decisions are
//    then re-taken under the fitted factors and the fit repeated until they no longer change
//    (at most `max_roofline_iterations` rounds). This fixed-point iteration is started from the
//    initial factors and from a grid of starts — ratios e_compute / e_memory 2^-4 .. 2^4 (the
//    kernel decisions depend only on it) times overheads 0.005 .. 0.32 ms (the host-bound
//    decisions) — skipping starts whose decisions equal an earlier start's; the factors with
//    the lowest true (max-based) error are kept. A column that is zero at every point (e.g. the link term at tp 1) is not
//    fitted and keeps its initial factor; a coefficient fitted to 0 means that term vanishes
//    (efficiency +inf, or no overhead).
//  * Memory, per (component, recompute mode): stored_mb = k · stored formula (one column),
//    peak_mb = p1 · stored formula + p2 · working formula (two columns), same method.
//  * Errors are reported before and after as relative errors |model - reference| / reference
//    over the same points (median, p90, max), per component and metric and pooled for time
//    (forward + backward) and memory (stored + peak). Points where the reference has no value
//    (out of range, unsupported) or a value <= 0 are skipped and counted.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/error_summary.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan {

/// Options of calibrate().
struct calibration_options {
    bool fit_time = true;              ///< fit the time factors per (component, phase)
    bool fit_memory = true;            ///< fit the memory factors per (component, recompute mode)
    int max_roofline_iterations = 12;  ///< rounds of re-taking the roofline decisions (>= 1)
};

/// One compared value.
struct calibration_residual {
    layer_query query;
    cost_metric metric = cost_metric::forward_ms;
    double reference = 0;  ///< the reference model's value
    double before = 0;     ///< the initial analytic model's value
    double after = 0;      ///< the calibrated model's value
};

/// Errors of one (component, metric) before and after.
struct calibration_group_report {
    component comp = component::encoder;
    cost_metric metric = cost_metric::forward_ms;
    error_summary before, after;
};

/// Time factors fitted for one (component, phase) over `points` reference values.
struct fitted_time_factors {
    component comp = component::encoder;
    time_phase phase = time_phase::forward;
    time_factors factors;
    std::size_t points = 0;
    int iterations = 0;  ///< least-squares rounds run (over all starting ratios)
};
/// Memory factors fitted for one (component, recompute mode).
struct fitted_memory_factors {
    component comp = component::encoder;
    recompute_mode recompute = recompute_mode::none;
    memory_factors factors;
    std::size_t points = 0;
};

/// The fit report: every residual, per-group and pooled errors, the fitted factors.
struct calibration_report {
    std::vector<calibration_residual> residuals;
    std::vector<calibration_group_report> groups;  ///< (component, metric) pairs with points
    error_summary time_before, time_after;          ///< forward and backward pooled
    error_summary memory_before, memory_after;     ///< stored and peak pooled
    std::vector<fitted_time_factors> time_fits;
    std::vector<fitted_memory_factors> memory_fits;
    std::size_t skipped_values = 0;  ///< reference values absent or <= 0
};

/// The calibrated model and its report.
struct calibration_result {
    analytic_cost_model model;
    calibration_report report;
};

namespace calibrate_detail {

/// Non-negative least squares min |A x - y|, x >= 0, for few columns: solves every subset of
/// the columns listed in `cols` by Householder QR and keeps the best feasible solution
/// (exact NNLS for <= ~6 columns). Columns not in `cols` get x = 0. Returns nullopt when no
/// subset gives a finite solution.
inline std::optional<Eigen::VectorXd> nnls_small(const Eigen::MatrixXd& A, const Eigen::VectorXd& y,
                                                 const std::vector<Eigen::Index>& cols) {
    const auto k = cols.size();
    std::optional<Eigen::VectorXd> best;
    double best_res = std::numeric_limits<double>::infinity();
    for (unsigned mask = 1; mask < (1u << k); ++mask) {
        std::vector<Eigen::Index> sub;
        for (std::size_t i = 0; i < k; ++i)
            if (mask & (1u << i)) sub.push_back(cols[i]);
        Eigen::MatrixXd As(A.rows(), static_cast<Eigen::Index>(sub.size()));
        for (std::size_t j = 0; j < sub.size(); ++j) As.col(static_cast<Eigen::Index>(j)) = A.col(sub[j]);
        const Eigen::VectorXd xs = As.colPivHouseholderQr().solve(y);
        if (!xs.allFinite() || (xs.array() < 0).any()) continue;
        const double res = (As * xs - y).squaredNorm();
        if (!(res < best_res)) continue;
        best_res = res;
        Eigen::VectorXd x = Eigen::VectorXd::Zero(A.cols());
        for (std::size_t j = 0; j < sub.size(); ++j) x(sub[j]) = xs(static_cast<Eigen::Index>(j));
        best = x;
    }
    return best;
}

/// Columns of A that are not zero everywhere.
inline std::vector<Eigen::Index> nonzero_columns(const Eigen::MatrixXd& A) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index j = 0; j < A.cols(); ++j)
        if (A.col(j).cwiseAbs().maxCoeff() > 0) cols.push_back(j);
    return cols;
}

inline double inverse_or_inf(double x) {
    return x > 0 ? 1.0 / x : std::numeric_limits<double>::infinity();
}

struct sample {
    layer_query query;
    double reference = 0;
};

/// Fits the time factors of one (component, phase) to `rows` (see the header comment): the
/// fixed-point iteration from the initial factors and a grid of starts; the factors with the
/// lowest true error win. Returns them and the number of least-squares rounds run.
inline std::pair<time_factors, int> fit_time_group(const analytic_cost_model& model, const std::vector<sample>& rows,
                                                   time_phase p, const time_factors& start,
                                                   const calibration_options& options) {
    const auto n = static_cast<Eigen::Index>(rows.size());
    const auto objective = [&](const time_factors& f) {
        double sum = 0;
        for (const auto& s : rows) {
            const double t = model.terms(s.query, p, f)->time_ms(f);
            const double e = (t - s.reference) / s.reference;
            sum += e * e;
        }
        return sum;
    };
    const auto design = [&](const time_factors& f) {
        Eigen::MatrixXd A(n, 4);
        for (Eigen::Index i = 0; i < n; ++i) {
            const auto& s = rows[static_cast<std::size_t>(i)];
            const time_terms t = *model.terms(s.query, p, f);
            const double gpu = t.host_bound ? 0.0 : 1.0 / s.reference;
            A(i, 0) = t.compute_ms * gpu;
            A(i, 1) = t.memory_ms * gpu;
            A(i, 2) = t.link_ms * gpu;
            A(i, 3) = t.host_bound ? t.kernels / s.reference : 0.0;
        }
        return A;
    };
    const Eigen::VectorXd y = Eigen::VectorXd::Ones(n);

    std::vector<time_factors> starts{start};
    for (int o = 0; o < 7; ++o)        // overheads 0.005 · 2^o ms: 0.005 .. 0.32
        for (int i = 0; i < 9; ++i) {   // ratios 2^-4 .. 2^4, steps of 2
            time_factors f = start;
            f.compute_efficiency = start.memory_efficiency * std::exp2(-4.0 + i);
            f.overhead_ms_per_kernel = 0.005 * std::exp2(o);
            starts.push_back(f);
        }

    time_factors best = start;
    double best_obj = objective(start);
    int rounds = 0;
    std::vector<Eigen::MatrixXd> start_designs;  // decisions of the starts tried so far
    for (const time_factors& s0 : starts) {
        time_factors current = s0;
        Eigen::MatrixXd previous;
        for (int it = 0; it < options.max_roofline_iterations; ++it) {
            Eigen::MatrixXd A = design(current);
            if (it == 0) {
                // Same decisions as an earlier start: same fit, skip.
                const auto same = [&](const Eigen::MatrixXd& B) { return B.size() == A.size() && B == A; };
                if (std::any_of(start_designs.begin(), start_designs.end(), same)) break;
                start_designs.push_back(A);
            }
            if (previous.size() == A.size() && previous == A) break;  // decisions stable
            ++rounds;
            const auto cols = nonzero_columns(A);
            const auto x = nnls_small(A, y, cols);
            if (!x) break;
            const auto fitted = [&](Eigen::Index j) { return std::find(cols.begin(), cols.end(), j) != cols.end(); };
            time_factors next = current;
            if (fitted(0)) next.compute_efficiency = inverse_or_inf((*x)(0));
            if (fitted(1)) next.memory_efficiency = inverse_or_inf((*x)(1));
            if (fitted(2)) next.link_efficiency = inverse_or_inf((*x)(2));
            if (fitted(3)) next.overhead_ms_per_kernel = (*x)(3);
            const double obj = objective(next);
            if (obj < best_obj) {
                best_obj = obj;
                best = next;
            }
            previous = std::move(A);
            current = next;
        }
    }
    return {best, rounds};
}

/// Reference values per (component, metric, recompute mode): [comp][metric][mode].
using sample_table = std::array<std::array<std::array<std::vector<sample>, 3>, 4>, 4>;

/// The reference values of `points` that both models price (positive and finite), with the
/// skipped ones counted in `report`.
template <cost_model Reference>
sample_table collect_samples(const analytic_cost_model& initial, const Reference& reference,
                             std::span<const layer_query> points, calibration_report& report) {
    sample_table samples;
    for (const layer_query& q : points) {
        const layer_cost ref = reference.evaluate(q);
        const layer_cost ana = initial.evaluate(q);
        for (cost_metric m : all_cost_metrics) {
            const auto& r = metric_of(ref, m);
            if (!r.ok() || !(r.value() > 0) || !std::isfinite(r.value()) || !metric_of(ana, m).ok()) {
                ++report.skipped_values;
                continue;
            }
            samples[static_cast<std::size_t>(q.comp)][static_cast<std::size_t>(m)][static_cast<std::size_t>(q.recompute)]
                .push_back({q, r.value()});
        }
    }
    return samples;
}

/// Fits every (component, phase) time factor group that has samples.
inline void fit_times(const analytic_cost_model& initial, const sample_table& samples, analytic_factors& factors,
                      const calibration_options& options, calibration_report& report) {
    for (component c : all_components) {
        for (time_phase p : all_time_phases) {
            const auto mi = static_cast<std::size_t>(p == time_phase::forward ? cost_metric::forward_ms
                                                                              : cost_metric::backward_ms);
            std::vector<sample> rows;
            for (const auto& v : samples[static_cast<std::size_t>(c)][mi]) rows.insert(rows.end(), v.begin(), v.end());
            if (rows.empty()) continue;
            const auto [best, used] = fit_time_group(initial, rows, p, factors.at(c, p), options);
            factors.at(c, p) = best;
            report.time_fits.push_back({c, p, best, rows.size(), used});
        }
    }
}

/// The memory factors of one (component, recompute mode) from its stored and peak samples
/// (non-negative least squares of the relative errors); `mf` holds the initial ones.
inline void fit_memory_group(const analytic_cost_model& initial, const std::vector<sample>& stored,
                             const std::vector<sample>& peak, memory_factors& mf) {
    if (!stored.empty()) {
        const auto n = static_cast<Eigen::Index>(stored.size());
        Eigen::MatrixXd A(n, 1);
        const Eigen::VectorXd y = Eigen::VectorXd::Ones(n);
        for (Eigen::Index i = 0; i < n; ++i) {
            const auto& s = stored[static_cast<std::size_t>(i)];
            A(i, 0) = initial.activation_raw(s.query).stored_mb / s.reference;
        }
        const auto cols = nonzero_columns(A);
        if (const auto x = nnls_small(A, y, cols); x && !cols.empty()) mf.stored_scale = (*x)(0);
    }
    if (!peak.empty()) {
        const auto n = static_cast<Eigen::Index>(peak.size());
        Eigen::MatrixXd A(n, 2);
        const Eigen::VectorXd y = Eigen::VectorXd::Ones(n);
        for (Eigen::Index i = 0; i < n; ++i) {
            const auto& s = peak[static_cast<std::size_t>(i)];
            const auto a = initial.activation_raw(s.query);
            A(i, 0) = a.stored_mb / s.reference;
            A(i, 1) = a.working_mb / s.reference;
        }
        const auto cols = nonzero_columns(A);
        if (const auto x = nnls_small(A, y, cols)) {
            for (Eigen::Index j : cols) (j == 0 ? mf.peak_stored_scale : mf.peak_working_scale) = (*x)(j);
        }
    }
}

/// Fits every (component, recompute mode) memory factor group that has samples.
inline void fit_memory(const analytic_cost_model& initial, const sample_table& samples, analytic_factors& factors,
                       calibration_report& report) {
    for (component c : all_components) {
        for (recompute_mode r : all_recompute_modes) {
            const auto ci = static_cast<std::size_t>(c), ri = static_cast<std::size_t>(r);
            const auto& stored = samples[ci][static_cast<std::size_t>(cost_metric::stored_mb)][ri];
            const auto& peak = samples[ci][static_cast<std::size_t>(cost_metric::peak_mb)][ri];
            if (stored.empty() && peak.empty()) continue;
            memory_factors mf = factors.at(c, r);
            fit_memory_group(initial, stored, peak, mf);
            factors.at(c, r) = mf;
            report.memory_fits.push_back({c, r, mf, stored.size() + peak.size()});
        }
    }
}

/// The residuals of every sample before and after, and the error summaries per group, per
/// time and memory, into `report`. Throws when there is no residual (no point of `points` had
/// a reference value).
inline void summarize_errors(const analytic_cost_model& initial, const analytic_cost_model& calibrated,
                             const sample_table& samples, std::size_t points, calibration_report& report) {
    std::vector<double> time_before, time_after, mem_before, mem_after;
    for (component c : all_components) {
        for (cost_metric m : all_cost_metrics) {
            std::vector<double> before, after;
            for (const auto& v : samples[static_cast<std::size_t>(c)][static_cast<std::size_t>(m)]) {
                for (const auto& s : v) {
                    const double b = metric_of(initial.evaluate(s.query), m).value();
                    const double a = metric_of(calibrated.evaluate(s.query), m).value();
                    report.residuals.push_back({s.query, m, s.reference, b, a});
                    before.push_back(std::abs(b - s.reference) / s.reference);
                    after.push_back(std::abs(a - s.reference) / s.reference);
                }
            }
            if (before.empty()) continue;
            auto& tb = is_time_metric(m) ? time_before : mem_before;
            auto& ta = is_time_metric(m) ? time_after : mem_after;
            tb.insert(tb.end(), before.begin(), before.end());
            ta.insert(ta.end(), after.begin(), after.end());
            report.groups.push_back({c, m, summarize_relative_errors(std::move(before)),
                                     summarize_relative_errors(std::move(after))});
        }
    }
    if (report.residuals.empty())
        throw invalid_argument("calibration: the reference model has no value at any of the " + std::to_string(points) +
                               " query points");
    report.time_before = summarize_relative_errors(std::move(time_before));
    report.time_after = summarize_relative_errors(std::move(time_after));
    report.memory_before = summarize_relative_errors(std::move(mem_before));
    report.memory_after = summarize_relative_errors(std::move(mem_after));
}

}  // namespace calibrate_detail

/// Calibrates `initial` to `reference` over `points` (see the header comment). Deterministic.
/// Throws invalid_argument when no point gives any reference value, a point is not a valid
/// analytic query (mbs, seqlen or tp < 1) or the options are invalid.
template <cost_model Reference>
[[nodiscard]] calibration_result calibrate(const analytic_cost_model& initial, const Reference& reference,
                                           std::span<const layer_query> points,
                                           const calibration_options& options = {}) {
    using namespace calibrate_detail;
    if (options.max_roofline_iterations < 1)
        throw invalid_argument("calibration: max_roofline_iterations must be >= 1");
    calibration_report report;
    const sample_table samples = collect_samples(initial, reference, points, report);
    analytic_factors factors = initial.factors();
    if (options.fit_time) fit_times(initial, samples, factors, options, report);
    if (options.fit_memory) fit_memory(initial, samples, factors, report);
    analytic_cost_model calibrated = initial.with_factors(factors);
    summarize_errors(initial, calibrated, samples, points.size(), report);
    return {std::move(calibrated), std::move(report)};
}

/// A grid of calibration queries: every combination of `tps`, `modes`, `mbs_values` and
/// `seqlens` for the encoder (self-attention) layer and the postprocess, plus for an
/// encoder-decoder model the decoder over every (seqlen, decoder length) pair and the
/// postprocess keyed by decoder length (its seqlen set to the decoder length). The
/// postprocess is queried with recompute none only (recomputation does not apply to it).
[[nodiscard]] inline std::vector<layer_query> calibration_grid(bool encoder_decoder, std::span<const int> tps,
                                                               std::span<const recompute_mode> modes,
                                                               std::span<const int> mbs_values,
                                                               std::span<const int> seqlens,
                                                               std::span<const int> dec_seqlens = {}) {
    std::vector<layer_query> out;
    for (int tp : tps)
        for (recompute_mode r : modes)
            for (int b : mbs_values) {
                for (int s : seqlens) out.push_back({component::encoder, b, s, 0, tp, r});
                if (encoder_decoder) {
                    for (int s : seqlens)
                        for (int d : dec_seqlens) out.push_back({component::decoder, b, s, d, tp, r});
                    if (r == recompute_mode::none)
                        for (int d : dec_seqlens) out.push_back({component::postprocess, b, d, d, tp, r});
                } else if (r == recompute_mode::none) {
                    for (int s : seqlens) out.push_back({component::postprocess, b, s, 0, tp, r});
                }
            }
    return out;
}

}  // namespace pipeplan
