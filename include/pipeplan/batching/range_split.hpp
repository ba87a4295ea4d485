// pipeplan/batching/range_split.hpp — the exact dynamic program over contiguous splits.
//
// Given N ordered items and, for every start i, the cost t(i, m) of each feasible range
// [i, i + m) (m = 1..len(i); ranges longer than len(i) are infeasible), find the split of
// [0, N) into consecutive ranges minimizing
//     g = a · max t + Σ t / dp      (a = (S − 1) / C)
// exactly (no bucketing of t values).
//
// Algorithm. For a cap c let F(c) = min Σ t over splits whose ranges all have t ≤ c (an
// O(Σ len) shortest-path dynamic program). F is a non-increasing step function and
//     min g = min over c of a · c + F(c) / dp,
// attained at c = the largest t of some optimal split. Solving at c returns a split
// whose realised maximum r ≤ c has F(r) = F(c), so the whole interval [r, c] is settled by one
// solve. Solving at c also gives n(c), the smallest range cost above c among the ranges that
// start where some split under c reaches; F is constant on [c, n(c)) (a split under a
// cap below n(c) cannot take its first range above c), so that interval is settled too. The
// search keeps the unsettled gaps [n(c_a), r_b) between solved caps, with F(c_a) ≥ F ≥ F(c_b)
// on them, and splits them best-first, three quarters of the way up; a gap is dropped when
//   * it is empty, or F(c_a) = F(c_b) (no step inside: nothing in it beats the solve at c_a), or
//   * a · n(c_a) + F(c_b) / dp ≥ the best objective found (a lower bound on the gap),
// and its caps c with a · c + F(c_b) / dp ≥ the best are cut off (solving at the cut first).
// The smallest feasible cap c_lo (the min-max split value) comes from a bottleneck dynamic program.
// Rows whose costs are non-decreasing in m stop scanning at the first t > c; other rows (real
// profiles interpolate with small dips) at the first m whose suffix minimum exceeds c. An optional relative tolerance prunes gaps whose bound is within tol of the best.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"

namespace pipeplan::batching {

/// The costs of every feasible range of N ordered items, row by row: row i holds t(i, m) for
/// m = 1..len(i). Rows are added in order; a row may borrow memory the caller keeps alive.
class range_costs {
public:
    /// Room for `rows` rows (a 1M-row table grows without reallocating).
    void reserve(std::size_t rows) { rows_.reserve(rows); }
    /// Appends row i (a copy is kept).
    void add_row(std::span<const double> costs) {
        start_row();
        append_to_row(costs);
    }
    /// Appends row i, empty: append_to_row() adds its costs (copies kept), without a buffer.
    void start_row() {
        row r;
        r.offset = storage_.size();
        rows_.push_back(r);
        finalized_ = false;
    }
    /// Appends `costs` to the last row (one that start_row() or add_row() began).
    void append_to_row(std::span<const double> costs) {
        storage_.insert(storage_.end(), costs.begin(), costs.end());
        rows_.back().len += static_cast<int>(costs.size());
    }
    /// The last cost appended to the last row (a row append_to_row() gave costs).
    [[nodiscard]] double last_cost() const noexcept { return storage_.back(); }
    /// Marks the last row checked by its builder: its costs are finite, and non-decreasing in m
    /// when `monotone` (finalize() then skips reading them for its checks).
    void set_row_checked(bool monotone) noexcept {
        rows_.back().checked = true;
        rows_.back().monotone = monotone;
    }
    /// Appends row i, borrowing `costs` (which must outlive this object).
    void add_borrowed_row(const double* costs, int len) {
        row r;
        r.borrowed = costs;
        r.len = len;
        rows_.push_back(r);
        finalized_ = false;
    }
    /// Resolves pointers and per-row monotonicity; throws invalid_argument for a non-finite cost,
    /// an empty row, or a row reaching beyond N. Called by solve_range_split if needed.
    void finalize() {
        const std::size_t n = rows_.size();
        for (std::size_t i = 0; i < n; ++i) {
            row& r = rows_[i];
            if (!r.borrowed) r.data = storage_.data() + r.offset;
            else r.data = r.borrowed;
            if (r.len < 1)
                throw invalid_argument("range_costs: row " + std::to_string(i) + " is empty (item " +
                                       std::to_string(i) + " fits in no range)");
            if (static_cast<std::size_t>(r.len) > n - i)
                throw invalid_argument("range_costs: row " + std::to_string(i) + " reaches beyond the items");
            r.same_as_previous = i > 0 && r.borrowed && r.borrowed == rows_[i - 1].borrowed && r.len == rows_[i - 1].len;
            if (r.same_as_previous) {  // the same costs: checked already
                r.monotone = rows_[i - 1].monotone;
                continue;
            }
            if (r.checked) continue;  // by its builder (set_row_checked)
            r.monotone = true;
            for (int m = 0; m < r.len; ++m) {
                if (!std::isfinite(r.data[m]))
                    throw invalid_argument("range_costs: non-finite cost in row " + std::to_string(i));
                if (m > 0 && r.data[m] < r.data[m - 1]) r.monotone = false;
            }
        }
        // Suffix minima and prefix maxima of the rows that are not monotone: a cap's feasible
        // ranges all lie before the first suffix minimum above it, and every cost above it before
        // that lies at or after the first prefix maximum above it (both are sorted). One
        // allocation each, kept across finalize() calls and left uninitialised: every entry is
        // written below (a 1M-sample table is O(n·L) doubles; zeroing it first doubled its cost).
        // A borrowed row equal to the previous one (same costs, same length: the sorted
        // decoder-only order's rows of one sample length) shares its entries and its checks, so
        // the checks and the tables are O(distinct rows · L) rather than O(n·L).
        std::size_t total = 0;
        for (std::size_t i = 0; i < n; ++i) {
            row& r = rows_[i];
            r.suffix_offset = r.same_as_previous ? rows_[i - 1].suffix_offset : total;
            if (!r.monotone && !r.same_as_previous) total += static_cast<std::size_t>(r.len);
        }
        if (total > suffix_capacity_) {
            suffix_min_.reset(new double[total]);
            prefix_max_.reset(new double[total]);
            suffix_capacity_ = total;
        }
        for (std::size_t i = 0; i < n; ++i) {
            const row& r = rows_[i];
            if (r.monotone || r.same_as_previous) continue;
            double* sm = suffix_min_.get() + r.suffix_offset;
            double* pm = prefix_max_.get() + r.suffix_offset;
            double low = std::numeric_limits<double>::infinity();
            for (int m = r.len; m-- > 0;) sm[m] = low = std::min(low, r.data[m]);
            double high = -std::numeric_limits<double>::infinity();
            for (int m = 0; m < r.len; ++m) pm[m] = high = std::max(high, r.data[m]);
        }
        // The longest range ending at each position (bounds a capped solve's backward search).
        max_len_ending_.assign(n + 1, 0);
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t len = static_cast<std::size_t>(rows_[i].len);
            max_len_ending_[i + len] = std::max(max_len_ending_[i + len], static_cast<int>(len));
        }
        for (std::size_t j = n; j-- > 0;) max_len_ending_[j] = std::max(max_len_ending_[j], max_len_ending_[j + 1] - 1);
        finalized_ = true;
    }
    /// Row i's suffix minima, min t(i, m..len(i)) (after finalize(); rows that are not monotone).
    [[nodiscard]] std::span<const double> suffix_min(std::size_t i) const {
        return {suffix_min_.get() + rows_[i].suffix_offset, static_cast<std::size_t>(rows_[i].len)};
    }
    /// Row i's prefix maxima, max t(i, 1..m) (after finalize(); rows that are not monotone).
    [[nodiscard]] std::span<const double> prefix_max(std::size_t i) const {
        return {prefix_max_.get() + rows_[i].suffix_offset, static_cast<std::size_t>(rows_[i].len)};
    }
    [[nodiscard]] bool finalized() const noexcept { return finalized_; }
    /// The longest range ending at position j, 0 <= j <= N (after finalize()).
    [[nodiscard]] int max_len_ending(std::size_t j) const { return max_len_ending_[j]; }
    [[nodiscard]] std::size_t size() const noexcept { return rows_.size(); }
    /// t(i, m) for m = 1..len(i) (after finalize()).
    [[nodiscard]] std::span<const double> row_costs(std::size_t i) const {
        return {rows_[i].data, static_cast<std::size_t>(rows_[i].len)};
    }
    [[nodiscard]] bool monotone(std::size_t i) const { return rows_[i].monotone; }
    /// Row i borrows the same costs, with the same length, as row i − 1 (after finalize()).
    [[nodiscard]] bool same_as_previous(std::size_t i) const { return rows_[i].same_as_previous; }

private:
    struct row {
        std::size_t offset = 0;
        const double* borrowed = nullptr;
        const double* data = nullptr;
        int len = 0;
        bool monotone = true;
        std::size_t suffix_offset = 0;  ///< into suffix_min_ and prefix_max_ (rows that are not monotone)
        bool same_as_previous = false;  ///< borrows the previous row's costs and length
        bool checked = false;  ///< finite, `monotone` set by the builder (set_row_checked)
    };
    std::vector<double> storage_;
    std::unique_ptr<double[]> suffix_min_;  ///< rows that are not monotone, at their suffix_offset
    std::unique_ptr<double[]> prefix_max_;  ///< rows that are not monotone, at their suffix_offset
    std::size_t suffix_capacity_ = 0;
    std::vector<int> max_len_ending_;  ///< see max_len_ending()
    std::vector<row> rows_;
    bool finalized_ = false;
};

/// An optimal split: range boundaries 0 = b_0 < b_1 < ... < b_k = N.
struct range_split_solution {
    std::vector<int> bounds;
    double sum_ms = 0;        ///< Σ t of the ranges
    double tmax_ms = 0;       ///< largest t of the ranges
    double objective_ms = 0;  ///< a · tmax_ms + sum_ms / dp
    int solves = 0;           ///< capped solves run (for benchmarks)
    /// Runner-ups (when asked for): the next-best distinct splits the search solved, by
    /// objective (ties: found first), each without alternatives of its own.
    std::vector<range_split_solution> alternatives;
};

namespace detail {

struct capped_solution {
    double sum = std::numeric_limits<double>::infinity();
    double tmax = 0;
    /// The smallest range cost above the cap among the ranges that start where some split
    /// under the cap reaches: every split under a cap in [cap, next_cap) uses only ranges
    /// of cost <= cap, so F is constant there (infinity: no larger cost is reachable).
    double next_cap = std::numeric_limits<double>::infinity();
    std::vector<int> bounds;
    [[nodiscard]] bool feasible() const noexcept { return std::isfinite(sum); }
};

/// The first index of the sorted `a[0, n)` whose value is > x (n: none), as std::upper_bound,
/// without a branch per step (the costs searched are data the branch predictor cannot learn).
inline std::size_t first_above(const double* a, std::size_t n, double x) noexcept {
    if (n == 0) return 0;
    const double* base = a;
    while (n > 1) {
        const std::size_t half = n / 2;
        base = base[half - 1] <= x ? base + half : base;
        n -= half;
    }
    return static_cast<std::size_t>(base - a) + (*base <= x ? 1 : 0);
}

/// Row i's ranges under `cap`: sets `cut` (the ranges m < cut are those a capped solve scans) and
/// `clear` (<= cut: the ranges m < clear all cost <= cap) and returns the smallest cost above the
/// cap among the ranges m < cut and the first range past them (infinity: none). Monotone rows stop
/// at the first t > cap (clear = cut); other rows at the first suffix minimum above the cap, and
/// their costs above the cap before that lie at or after the first prefix maximum above it.
inline double capped_row_cut(const range_costs& rc, std::size_t i, double cap, std::size_t& cut, std::size_t& clear) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const auto row = rc.row_costs(i);
    const double* t = row.data();
    // Every range of the row under the cap (a quarter of the rows in the T5 splits' solves, and
    // every row at an infinite cap): no search.
    if ((rc.monotone(i) ? t[row.size() - 1] : rc.prefix_max(i)[row.size() - 1]) <= cap) {
        cut = clear = row.size();
        return inf;
    }
    if (rc.monotone(i)) {
        cut = clear = first_above(t, row.size(), cap);
        return cut < row.size() ? t[cut] : inf;
    }
    const auto sm = rc.suffix_min(i);
    cut = first_above(sm.data(), sm.size(), cap);
    double next = cut < row.size() ? sm[cut] : inf;
    // The first prefix maximum above the cap: at or just before the cut (small dips).
    const double* pm = rc.prefix_max(i).data();
    clear = cut;
    while (clear > 0 && pm[clear - 1] > cap) --clear;
    for (std::size_t m = clear; m < cut; ++m)
        if (t[m] > cap) next = std::min(next, t[m]);
    return next;
}

/// out[m] = min(out[m], fi + t[m]) for m < clear, and the same for clear <= m < cut where
/// t[m] <= cap (two branch-free loops the compiler vectorises; fi is finite, so fi + inf = inf).
inline void relax_row(double* out, const double* t, double fi, double cap, std::size_t clear, std::size_t cut) noexcept {
    constexpr double inf = std::numeric_limits<double>::infinity();
    for (std::size_t m = 0; m < clear; ++m) out[m] = std::min(out[m], fi + t[m]);
    for (std::size_t m = clear; m < cut; ++m) out[m] = std::min(out[m], fi + (t[m] <= cap ? t[m] : inf));
}

/// Rows i .. i + K − 1 of one run (range_costs::same_as_previous: the same costs `t`, scanned up
/// to `cut` >= K, each <= the cap or masked to infinity), relaxed together from `fi` = f + i:
/// out[m] = min(out[m], f[i + r] + t[m − r]) over the K rows, so each f entry is loaded and stored
/// once per K rows (a row at a time reloads, 8 bytes further on, what the previous row just
/// stored: on the 1M-sample split that store-to-load stall was most of the solve). The same sums
/// and minima as K relax_row() calls in order (f[i + r] is final once rows < i + r are relaxed).
template <std::size_t K>
inline void relax_run_rows(double* fi, const double* t, std::size_t cut) noexcept {
    double* out = fi + 1;
    double from[K];
    from[0] = fi[0];
    for (std::size_t m = 0; m + 1 < K; ++m) {  // out[m] = f[i + m + 1]: final after rows 0..m
        double v = out[m];
        for (std::size_t r = 0; r <= m; ++r) v = std::min(v, from[r] + t[m - r]);
        out[m] = from[m + 1] = v;
    }
    for (std::size_t m = K - 1; m < cut; ++m) {
        double v = out[m];
        for (std::size_t r = 0; r < K; ++r) v = std::min(v, from[r] + t[m - r]);
        out[m] = v;
    }
    for (std::size_t m = cut; m + 1 < cut + K; ++m) {  // the last rows' ends past row 0's cut
        double v = out[m];
        for (std::size_t r = m - cut + 1; r < K; ++r) v = std::min(v, from[r] + t[m - r]);
        out[m] = v;
    }
}

/// Rows i + 1 .. i + k − 1 (k <= K) all equal to row i (range_costs::same_as_previous): 1 + how many.
template <std::size_t K>
inline std::size_t run_rows_from(const range_costs& rc, std::size_t i) noexcept {
    std::size_t k = 1;
    while (k < K && i + k < rc.size() && rc.same_as_previous(i + k)) ++k;
    return k;
}

/// min Σ t over splits whose ranges all have t ≤ cap. The forward pass keeps only the
/// prefix minima f (a branch-free, vectorisable inner loop); the split is recovered
/// backwards by finding, for each end j, the smallest start i with f[i] + t(i, j − i) == f[j]
/// (the same floating-point sum, so the match is exact and deterministic).
inline capped_solution solve_capped(const range_costs& rc, double cap, std::vector<double>& f) {
    const std::size_t n = rc.size();
    constexpr double inf = std::numeric_limits<double>::infinity();
    f.assign(n + 1, inf);
    f[0] = 0;
    double next_cap = inf;
    // Rows equal to the previous one (range_costs::same_as_previous: a run of one sample length
    // in the sorted order) share the cut, the smallest cost above the cap and the costs scanned,
    // found once per run: for a row that is not monotone and starts a run of two or more, its
    // costs up to the cut with those above the cap made infinite. A row alone (most
    // encoder-decoder rows) relaxes its own costs, those past `clear` with the cap test. Four
    // rows of one run relax together (relax_run_rows) when the cut spans at least four ranges.
    std::size_t cut = 0, clear = 0;
    bool have_cut = false;
    const double* t = nullptr;
    std::vector<double> masked;
    for (std::size_t i = 0; i < n; ++i) {
        if (!rc.same_as_previous(i)) have_cut = false;
        const double fi = f[i];
        if (fi == inf) continue;
        double* out = f.data() + i + 1;
        if (!have_cut) {
            next_cap = std::min(next_cap, capped_row_cut(rc, i, cap, cut, clear));
            have_cut = true;
            t = rc.row_costs(i).data();
            if (clear < cut) {
                if (i + 1 == n || !rc.same_as_previous(i + 1)) {
                    relax_row(out, t, fi, cap, clear, cut);
                    continue;
                }
                masked.assign(t, t + cut);
                for (std::size_t m = clear; m < cut; ++m)
                    if (masked[m] > cap) masked[m] = inf;
                t = masked.data();
            }
        }
        constexpr std::size_t block = 4;
        if (cut >= block && run_rows_from<block>(rc, i) == block) {
            relax_run_rows<block>(f.data() + i, t, cut);
            i += block - 1;
            continue;
        }
        relax_row(out, t, fi, cap, cut, cut);
    }
    capped_solution s;
    s.next_cap = next_cap;
    if (f[n] == inf) return s;
    s.sum = f[n];
    // The longest range ending at each j bounds the backward search.
    s.tmax = -inf;
    std::size_t j = n;
    s.bounds.push_back(static_cast<int>(n));
    while (j > 0) {
        const std::size_t lo = j - static_cast<std::size_t>(std::max(1, rc.max_len_ending(j)));
        std::size_t found = j;
        for (std::size_t i = lo; i < j; ++i) {
            const auto row = rc.row_costs(i);
            const std::size_t m = j - i;
            if (m > row.size() || f[i] == inf) continue;
            const double t = row[m - 1];
            if (t <= cap && f[i] + t == f[j]) {
                found = i;
                s.tmax = std::max(s.tmax, t);
                break;
            }
        }
        if (found == j) throw error("solve_range_split: internal error: no predecessor found");
        j = found;
        s.bounds.push_back(static_cast<int>(j));
    }
    std::reverse(s.bounds.begin(), s.bounds.end());
    return s;
}

/// min over splits of the largest t (the smallest feasible cap). The inner loop is branch-free
/// (min of max: the compiler vectorises it; a compare and branch per range was 5 % of a 1M plan).
inline double min_bottleneck(const range_costs& rc) {
    const std::size_t n = rc.size();
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> h(n + 1, inf);
    h[0] = -inf;
    for (std::size_t i = 0; i < n; ++i) {
        const double hi = h[i];
        if (hi == inf) continue;
        const auto row = rc.row_costs(i);
        const double* t = row.data();
        double* out = h.data() + i + 1;
        for (std::size_t m = 0, len = row.size(); m < len; ++m) out[m] = std::min(out[m], std::max(hi, t[m]));
    }
    return h[n];
}

}  // namespace detail

/// The capped solves of one range table that do not depend on the objective (the uncapped one
/// and the one at the smallest feasible cap): solve_range_split() fills it on its first call and
/// reuses it when the same table is solved again with another fill coefficient (reweighted
/// splits), which saves two capped solves and a bottleneck pass per extra solve.
struct range_split_cache {
    bool has_top = false, has_lo = false;
    detail::capped_solution top, lo;  ///< lo: solved at the smallest feasible cap
};

namespace detail {

/// Throws invalid_argument unless fill_coeff ≥ 0, dp ≥ 1 and relative_tolerance ≥ 0 (all finite).
inline void check_range_split_arguments(double fill_coeff, double dp, double relative_tolerance) {
    if (!(fill_coeff >= 0) || !std::isfinite(fill_coeff))
        throw invalid_argument("solve_range_split: fill coefficient must be finite and >= 0");
    if (!(dp >= 1) || !std::isfinite(dp)) throw invalid_argument("solve_range_split: dp must be >= 1");
    if (!(relative_tolerance >= 0) || !std::isfinite(relative_tolerance))
        throw invalid_argument("solve_range_split: relative tolerance must be finite and >= 0");
}

/// Moves up to `alternatives` of the `seen` solutions other than `best`'s into
/// best.alternatives, by objective (ties: the order they were solved in).
inline void keep_runner_ups(range_split_solution& best, std::vector<range_split_solution>& seen, std::size_t alternatives) {
    std::stable_sort(seen.begin(), seen.end(), [](const range_split_solution& x, const range_split_solution& y) {
        return x.objective_ms < y.objective_ms;
    });
    for (auto& o : seen)
        if (o.bounds != best.bounds && best.alternatives.size() < alternatives) best.alternatives.push_back(std::move(o));
}

}  // namespace detail

/// The exact optimum of a · max t + Σ t / dp over contiguous splits (see the file comment).
/// `fill_coeff` = a = (S − 1) / C ≥ 0, `dp` ≥ 1. `relative_tolerance` ≥ 0 (0 = exact) lets the
/// search stop once no gap can improve the best objective by more than that fraction.
/// `upper_bound` (e.g. the objective of a split already known to the caller) prunes every gap
/// that cannot beat it: the result is then exact whenever the optimum is below the bound, and
/// otherwise the best split found (whose objective is ≥ the bound).
/// Throws invalid_argument for bad arguments or an empty row (an item no range can hold).
/// `alternatives` > 0 also returns up to that many runner-ups (range_split_solution::alternatives):
/// splits the search solved anyway, so they cost nothing extra; the optimum is unchanged.
/// `cache` (optional, for one `rc` only) shares the objective-free solves between calls.
[[nodiscard]] inline range_split_solution solve_range_split(range_costs& rc, double fill_coeff, double dp,
                                                        double relative_tolerance = 0,
                                                        double upper_bound = std::numeric_limits<double>::infinity(),
                                                        std::size_t alternatives = 0, range_split_cache* cache = nullptr) {
    detail::check_range_split_arguments(fill_coeff, dp, relative_tolerance);
    if (!rc.finalized()) rc.finalize();
    range_split_solution best;
    if (rc.size() == 0) {
        best.bounds = {0};
        return best;
    }
    std::vector<double> f;
    const auto objective = [&](const detail::capped_solution& s) { return fill_coeff * s.tmax + s.sum / dp; };
    std::vector<range_split_solution> seen;  // every distinct solved split (alternatives > 0)
    const auto take = [&](detail::capped_solution&& s) {
        const double g = objective(s);
        if (alternatives > 0 && s.feasible() &&
            std::none_of(seen.begin(), seen.end(), [&](const range_split_solution& o) { return o.bounds == s.bounds; }))
            seen.push_back(range_split_solution{s.bounds, s.sum, s.tmax, g, 0, {}});
        if (best.bounds.empty() || g < best.objective_ms) {
            best.objective_ms = g;
            best.sum_ms = s.sum;
            best.tmax_ms = s.tmax;
            best.bounds = std::move(s.bounds);
        }
    };
    constexpr double inf = std::numeric_limits<double>::infinity();
    range_split_cache own;
    range_split_cache& pc = cache ? *cache : own;
    int solves = 0;
    if (!pc.has_top) pc.top = detail::solve_capped(rc, inf, f), pc.has_top = true, ++solves;
    const double top_sum = pc.top.sum, top_r = pc.top.tmax;
    take(detail::capped_solution(pc.top));
    if (fill_coeff > 0) {
        if (!pc.has_lo) {
            pc.lo = detail::solve_capped(rc, detail::min_bottleneck(rc), f), pc.has_lo = true, ++solves;
        }
        const double lo_sum = pc.lo.sum;
        const double lo_next = pc.lo.next_cap;
        take(detail::capped_solution(pc.lo));
        // Gap: the caps in [a_next, b_r) above a solved cap c_a — F(c_a) = a_sum, constant up to
        // a_next (the next reachable range cost: capped_solution::next_cap), and F >= b_sum below b_r.
        struct gap {
            double bound, a_sum, a_next, b_r, b_sum;
            bool operator<(const gap& o) const noexcept { return bound > o.bound; }  // min-heap
        };
        std::priority_queue<gap> open;
        constexpr double bisect_at = 0.75;  // where in a gap [a_next, b_r) the search solves (below)
        const auto push = [&](double a_sum, double a_next, double b_r, double b_sum) {
            if (!(a_next < b_r) || !(a_sum > b_sum)) return;
            open.push(gap{fill_coeff * a_next + b_sum / dp, a_sum, a_next, b_r, b_sum});
        };
        push(lo_sum, lo_next, top_r, top_sum);
        while (!open.empty()) {
            const gap g = open.top();
            open.pop();
            const double target = std::min(best.objective_ms, upper_bound);
            const double margin = relative_tolerance * std::abs(target);
            if (g.bound >= target - margin) break;  // best-first: every other gap too
            // Caps c with a · c + F(c_b) / dp ≥ target cannot improve. When that cuts the gap,
            // solve at the cut: the gap's top then has an exact F (a tighter bound below it).
            const double useful = (target - margin - g.b_sum / dp) / fill_coeff;
            const double top_cap = std::nextafter(g.b_r, -inf);
            if (useful < top_cap) {
                if (!(useful >= g.a_next)) continue;
                detail::capped_solution s = detail::solve_capped(rc, useful, f);
                ++solves;
                const double s_sum = s.sum, s_r = s.tmax;
                take(std::move(s));
                push(g.a_sum, g.a_next, s_r, s_sum);
                continue;
            }
            // No cap of the gap is cut off: its upper split's objective is (up to rounding) the
            // best so far. F is flat near the best, and solving three quarters up the gap took
            // fewer solves than its middle (BM_plan_t5_mixed_fresh 313 -> 294, the 1M-sample GPT
            // plan's bisections 73 -> 62; the same splits).
            double mid = g.a_next + (top_cap - g.a_next) * bisect_at;
            if (!(mid >= g.a_next) || !(mid <= top_cap)) mid = top_cap;
            detail::capped_solution s = detail::solve_capped(rc, mid, f);
            ++solves;
            const double s_sum = s.sum, s_r = s.tmax, s_next = s.next_cap;
            take(std::move(s));
            push(g.a_sum, g.a_next, s_r, s_sum);
            push(s_sum, s_next, g.b_r, g.b_sum);
        }
    }
    best.solves = solves;
    if (alternatives > 0) detail::keep_runner_ups(best, seen, alternatives);
    return best;
}

}  // namespace pipeplan::batching
