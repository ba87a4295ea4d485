// pipeplan/cost/profile_grid.hpp — one profiled metric as a dense (possibly ragged) grid over
// (mbs, encoder length, decoder length), and the interpolation schemes that read it.
//
// A grid has three axes: 0 = micro-batch size (sequences), 1 = encoder / decoder-only sequence
// length (tokens), 2 = decoder length (tokens). An axis whose only value is 0 is *independent*:
// the metric does not depend on that coordinate (e.g. GPT layers have no decoder length; T5's
// LM head is keyed by the decoder length only). Values that were not profiled (the profiler
// ran out of memory) are NaN.
//
// Interpolation policy (all schemes):
//  - Above the largest profiled value of a dependent axis: estimate::out_of_range().
//  - A query coordinate < 1 on a dependent axis: estimate::unsupported() (not a valid query).
//  - Below the smallest profiled value: every scheme but `linear_extrapolating` clamps the
//    coordinate to the smallest profiled value (the answer is the value at the grid's edge, a
//    conservative over-estimate; it is always > 0 when the profiled values are > 0). `linear_extrapolating`
//    extends the first interval linearly (as scipy's RegularGridInterpolator with
//    fill_value=None does); it can return small, zero or negative numbers below the grid.
//  - Corners whose interpolation weight is exactly 0 are not read, so queries on grid lines
//    next to an unprofiled point still work.
//  - Ragged grids: when a corner with weight > 0 was not profiled, the query is interpolated on
//    the simplex spanned by the cell's lowest corner and its axis neighbours, if the query lies
//    in it (sum of the cell-local coordinates <= 1) and those points were profiled — a convex
//    combination of measured values, never larger than the largest of them. Otherwise the
//    query lies beyond the profiled (memory) frontier: estimate::out_of_range().
//    `linear_extrapolating` (DynaPipe's scheme) has no simplex fallback: DynaPipe fills a
//    never-measured cell with 1e100, so any query that gives such a corner a weight > 0 is
//    infeasible there, and out_of_range() here.
//
// Queries do not allocate; axes are searched by a branch-free binary search.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/estimate.hpp"
#include "pipeplan/core/names.hpp"

namespace pipeplan {

/// How a profile cost model interpolates between (and beyond) profiled points.
enum class interpolation_mode : std::uint8_t {
    linear = 0,       ///< plain multilinear in raw (mbs, s[, d]); clamps below the grid
    /// DynaPipe's cost model: repeated measurements aggregated by their maximum (profile.hpp),
    /// multilinear, extrapolating linearly below the grid, unprofiled cells out of range
    dynapipe = 1,
    recommended = 2,  ///< the scheme with the lowest leave-one-out error (docs/cost-models.md)
};
inline constexpr std::array<interpolation_mode, 3> all_interpolation_modes{
    interpolation_mode::linear, interpolation_mode::dynapipe, interpolation_mode::recommended};

/// "linear", "dynapipe", "default" (the recommended mode).
[[nodiscard]] constexpr auto enum_names(interpolation_mode) noexcept {
    return name_table<interpolation_mode, 4>{"interpolation mode",
                                             {{{interpolation_mode::linear, "linear"},
                                               {interpolation_mode::dynapipe, "dynapipe"},
                                               {interpolation_mode::recommended, "default"},
                                               {interpolation_mode::recommended, "recommended"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(interpolation_mode m) noexcept { return name_of(m); }

/// Parses "linear", "dynapipe", "default" (or "recommended"); throws invalid_argument listing
/// the valid names otherwise.
[[nodiscard]] inline interpolation_mode parse_interpolation_mode(std::string_view s) {
    return parse_name<interpolation_mode>(s);
}

/// The interpolation arithmetic itself. The public modes map onto these; the leave-one-out
/// study (pipeplan profile-error) compares all of them.
enum class interpolation_scheme : std::uint8_t {
    linear = 0,                ///< multilinear in raw coordinates and values, clamped below
    /// multilinear, linear extrapolation below the grid, unprofiled corners out of range
    /// (scipy's RegularGridInterpolator as DynaPipe builds it: fill_value=None, 1e100 holes)
    linear_extrapolating = 1,
    log_log = 2,               ///< multilinear in log(coordinates), log(value); clamped below
    log_axes = 3,              ///< multilinear in log(coordinates), raw values; clamped below
    /// Exact for the known shape f = a(s) + mbs * (b*s + c*s^2) per cell: linear in mbs; along
    /// the length axis the intercept a(s) is interpolated linearly and the per-sequence slope
    /// as b*s + c*s^2 (through the origin; for decoder grids with both lengths: affine in the
    /// encoder length, b*d + c*d^2 in the decoder length). Clamped below; falls back to
    /// `linear` where the grid has one mbs value or the shape would give a value <= 0.
    quadratic_shape = 4,
};
inline constexpr std::array<interpolation_scheme, 5> all_interpolation_schemes{
    interpolation_scheme::linear, interpolation_scheme::linear_extrapolating,
    interpolation_scheme::log_log, interpolation_scheme::log_axes, interpolation_scheme::quadratic_shape};

[[nodiscard]] constexpr auto enum_names(interpolation_scheme) noexcept {
    return name_table<interpolation_scheme, 5>{"interpolation scheme",
                                               {{{interpolation_scheme::linear, "linear"},
                                                 {interpolation_scheme::linear_extrapolating, "linear-extrapolating"},
                                                 {interpolation_scheme::log_log, "log-log"},
                                                 {interpolation_scheme::log_axes, "log-axes"},
                                                 {interpolation_scheme::quadratic_shape, "quadratic-shape"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(interpolation_scheme s) noexcept { return name_of(s); }

/// The scheme a mode uses. `recommended` is quadratic_shape: it has the lowest median
/// leave-one-out error on the A100 profiles of GPT-6.7B and T5-11B, time and memory (table and
/// method in docs/cost-models.md, "Profile interpolation"; `pipeplan profile-error`).
[[nodiscard]] constexpr interpolation_scheme scheme_of(interpolation_mode m) noexcept {
    switch (m) {
        case interpolation_mode::linear: return interpolation_scheme::linear;
        case interpolation_mode::dynapipe: return interpolation_scheme::linear_extrapolating;
        case interpolation_mode::recommended: return interpolation_scheme::quadratic_shape;
    }
    return interpolation_scheme::linear;
}

/// One profiled metric over (mbs, s, d). See the file comment for the interpolation policy.
class profile_grid {
public:
    static constexpr std::size_t axes = 3;

    profile_grid() = default;

    /// `axis_values[k]`: strictly increasing; either exactly {0} (independent axis) or all > 0.
    /// `values`: row-major over (axis 0, axis 1, axis 2), NaN where not profiled, otherwise
    /// finite. Throws invalid_argument when these conditions do not hold.
    profile_grid(std::array<std::vector<double>, axes> axis_values, std::vector<double> values)
        : values_(std::move(values)) {
        std::size_t total = 1;
        for (std::size_t k = 0; k < axes; ++k) {
            const auto& a = axis_values[k];
            if (a.empty()) throw invalid_argument("profile_grid: axis " + std::to_string(k) + " is empty");
            for (std::size_t i = 0; i < a.size(); ++i) {
                if (!std::isfinite(a[i]) || (i > 0 && !(a[i] > a[i - 1])))
                    throw invalid_argument("profile_grid: axis " + std::to_string(k) +
                                           " is not strictly increasing and finite");
            }
            independent_[k] = a.size() == 1 && a[0] == 0.0;
            if (!independent_[k] && !(a[0] > 0))
                throw invalid_argument("profile_grid: axis " + std::to_string(k) +
                                       " mixes 0 with positive values (or is negative)");
            size_[k] = static_cast<std::uint32_t>(a.size());
            total *= a.size();
        }
        if (values_.size() != total)
            throw invalid_argument("profile_grid: expected " + std::to_string(total) + " values, got " +
                                   std::to_string(values_.size()));
        stride_[2] = 1;
        stride_[1] = size_[2];
        stride_[0] = size_[1] * size_[2];
        for (std::size_t k = 0; k < axes; ++k) {
            offset_[k] = static_cast<std::uint32_t>(axis_.size());
            for (double v : axis_values[k]) {
                axis_.push_back(v);
                log_axis_.push_back(v > 0 ? std::log(v) : 0.0);
            }
        }
        all_positive_ = true;
        log_values_.resize(values_.size());
        for (std::size_t i = 0; i < values_.size(); ++i) {
            const double v = values_[i];
            if (std::isnan(v)) {
                log_values_[i] = v;
                continue;
            }
            if (!std::isfinite(v)) throw invalid_argument("profile_grid: infinite value");
            ++profiled_;
            if (v > 0) log_values_[i] = std::log(v);
            else all_positive_ = false, log_values_[i] = 0.0;
        }
    }

    /// Number of values on axis k.
    [[nodiscard]] std::size_t size(std::size_t k) const noexcept { return size_[k]; }
    /// Value `i` of axis k.
    [[nodiscard]] double axis_value(std::size_t k, std::size_t i) const noexcept {
        return axis_[offset_[k] + i];
    }
    /// True when the metric does not depend on axis k (the axis is {0}).
    [[nodiscard]] bool independent(std::size_t k) const noexcept { return independent_[k]; }
    /// Number of profiled (non-NaN) points.
    [[nodiscard]] std::size_t profiled_points() const noexcept { return profiled_; }
    /// The profiled value at grid indices (i, j, l), or nullopt when not profiled (or an index
    /// is outside the grid).
    [[nodiscard]] std::optional<double> at_index(std::size_t i, std::size_t j, std::size_t l) const noexcept {
        if (i >= size_[0] || j >= size_[1] || l >= size_[2]) return std::nullopt;
        const double v = values_[i * stride_[0] + j * stride_[1] + l * stride_[2]];
        if (std::isnan(v)) return std::nullopt;
        return v;
    }

    /// Interpolated value at (mbs, s, d) — coordinates of independent axes are ignored.
    [[nodiscard]] estimate<double> at(double mbs, double s, double d,
                                      interpolation_scheme scheme) const noexcept {
        const std::array<double, axes> x{mbs, s, d};
        std::array<bracket, axes> b{};
        for (std::size_t k = 0; k < axes; ++k) {
            const estimate_status st = locate(k, x[k], scheme, b[k]);
            if (st != estimate_status::ok) return estimate<double>::failed(st);
        }
        return combine(b, scheme, true);
    }

    /// True when `other` has exactly the same axes (then at_shared() may serve both).
    [[nodiscard]] bool same_axes(const profile_grid& other) const noexcept {
        return size_ == other.size_ && axis_ == other.axis_;
    }

    /// Interpolates `count` grids that all have the same axes (same_axes()) at one point,
    /// searching the axes once: out[i] = grids[i]->at(mbs, s, d, scheme).
    static void at_shared(const profile_grid* const* grids, std::size_t count, double mbs, double s, double d,
                          interpolation_scheme scheme, estimate<double>* out) noexcept {
        if (count == 0) return;
        const std::array<double, axes> x{mbs, s, d};
        std::array<bracket, axes> b{};
        for (std::size_t k = 0; k < axes; ++k) {
            const estimate_status st = grids[0]->locate(k, x[k], scheme, b[k]);
            if (st != estimate_status::ok) {
                for (std::size_t i = 0; i < count; ++i) out[i] = estimate<double>::failed(st);
                return;
            }
        }
        const profile_grid& g0 = *grids[0];
        stencil st;
        g0.make_stencil(b, scheme, st);
        for (std::size_t i = 0; i < count; ++i) out[i] = grids[i]->apply(st, b, scheme, true);
    }

    /// A query's length axes (1 and 2) located once, with the quadratic_shape weights that
    /// depend on them only: pricing many micro-batch sizes at the same lengths (the exact
    /// split's rows of shapes (m, E, D), m = 1, 2, ...) searches those axes once. Filled by
    /// locate_lengths(); read by at_shared_located().
    struct located_lengths {
        std::array<std::uint32_t, axes> lo{}, hi{};
        std::array<double, axes> t{};
        std::array<std::array<double, 2>, axes> w_a{}, w_b{};  // see make_stencil()
        estimate_status status = estimate_status::ok;
        /// quadratic_shape: the (s, d) corners of the cell in stencil order (shape_stencil()),
        /// each with its intercept and slope weight and its offset in the grids' values.
        std::array<double, 4> corner_wa{}, corner_wb{};
        std::array<std::size_t, 4> corner_offset{};
        std::uint32_t corners = 0;
        bool on_grid = false;  ///< both lengths on grid points (or independent)
    };

    /// What at_shared_located() keeps between calls at the same located lengths (one per
    /// prepared query, so not shared between threads): the last mbs cell and, per grid, its
    /// corner values (pricing m = 1, 2, ... meets each mbs cell many times in a row).
    struct mbs_cell_memo {
        static constexpr std::size_t max_grids = 4;
        static constexpr std::uint32_t none = 0xffffffffU;
        std::uint32_t lo = none;  ///< the cell's lower mbs index (none: nothing kept)
        /// Per corner entry e (corner u's f(m0) at 2u, f(m1) at 2u + 1), each grid's value (grids
        /// past the count: 0), so a size's sums over the grids run side by side.
        std::array<std::array<double, max_grids>, 8> values;
        std::array<bool, max_grids> complete{};  ///< no corner value of the grid is NaN
    };

    /// Locates (s, d) on axes 1 and 2 of this grid (and of every grid with the same axes).
    void locate_lengths(double s, double d, interpolation_scheme scheme, located_lengths& out) const noexcept {
        const std::array<double, axes> x{0.0, s, d};
        out.status = estimate_status::ok;
        std::array<bracket, axes> b{};
        for (std::size_t k = 1; k < axes; ++k) {
            const estimate_status st = locate(k, x[k], scheme, b[k]);
            if (st != estimate_status::ok) {
                out.status = st;
                return;
            }
        }
        for (std::size_t k = 1; k < axes; ++k) out.lo[k] = b[k].lo, out.hi[k] = b[k].hi, out.t[k] = b[k].t;
        out.on_grid = on_grid_point(b);  // axis 0's bracket is {0, 0}: on a grid point
        out.corners = 0;
        if (scheme != interpolation_scheme::quadratic_shape) return;
        length_weights(b, out.w_a, out.w_b);
        for (unsigned corner = 0; corner < 4; ++corner) {  // as shape_stencil() walks them
            const unsigned u1 = corner & 1U, u2 = (corner >> 1) & 1U;
            if ((u1 && b[1].lo == b[1].hi) || (u2 && b[2].lo == b[2].hi)) continue;
            out.corner_wa[out.corners] = out.w_a[1][u1] * out.w_a[2][u2];
            out.corner_wb[out.corners] = out.w_b[1][u1] * out.w_b[2][u2];
            out.corner_offset[out.corners++] =
                (u1 ? b[1].hi : b[1].lo) * stride_[1] + (u2 ? b[2].hi : b[2].lo) * stride_[2];
        }
    }

    /// at_shared(grids, count, mbs, s, d, scheme, out), bit for bit, with (s, d) located by
    /// grids[0]->locate_lengths(s, d, scheme, lengths).
    /// `memo` (optional, one per `lengths`, reset to mbs_cell_memo{} whenever `lengths` change)
    /// keeps the mbs cell's corner values between calls; the answers are the same without it.
    static void at_shared_located(const profile_grid* const* grids, std::size_t count, double mbs,
                                  const located_lengths& lengths, interpolation_scheme scheme,
                                  estimate<double>* out, mbs_cell_memo* memo = nullptr) noexcept {
        if (count == 0) return;
        std::array<bracket, axes> b{};
        const profile_grid& g0 = *grids[0];
        // Inside the memo's cell (strictly between its mbs values) locate() finds that cell.
        const bool in_cell = memo && memo->lo != mbs_cell_memo::none && scheme == interpolation_scheme::quadratic_shape &&
                             mbs >= 1.0 && g0.axis_value(0, memo->lo) < mbs && mbs < g0.axis_value(0, memo->lo + 1);
        estimate_status st = estimate_status::ok;
        if (in_cell) b[0] = {memo->lo, memo->lo + 1, g0.local(0, memo->lo, memo->lo + 1, mbs, scheme)};
        else st = g0.locate(0, mbs, scheme, b[0]);
        if (st == estimate_status::ok) st = lengths.status;
        if (st != estimate_status::ok) {
            for (std::size_t i = 0; i < count; ++i) out[i] = estimate<double>::failed(st);
            return;
        }
        for (std::size_t k = 1; k < axes; ++k) b[k] = {lengths.lo[k], lengths.hi[k], lengths.t[k]};
        const bool shape = scheme == interpolation_scheme::quadratic_shape && b[0].lo != b[0].hi &&
                           !(lengths.on_grid && (b[0].t == 0 || b[0].t == 1));
        if (shape && memo && count <= mbs_cell_memo::max_grids)
            return shape_located(grids, count, b, lengths, *memo, out);
        stencil sc;
        if (shape) g0.shape_stencil(b, lengths.w_a, lengths.w_b, sc);
        else g0.make_stencil(b, scheme, sc);
        for (std::size_t i = 0; i < count; ++i) out[i] = grids[i]->apply(sc, b, scheme, true);
    }

    /// at_shared_located(grids, count, mbs, lengths, scheme, out, &memo) at each size mbs =
    /// first + k, k = 0 .. n − 1, bit for bit, handing grid i's value at size first + k to
    /// put(k, i, value): the sizes in one mbs cell (quadratic_shape, all corners profiled) are
    /// interpolated from its corner values without a search or stencil (shape_run()).
    template <class Put>
    static void at_shared_located_row(const profile_grid* const* grids, std::size_t count, int first, std::size_t n,
                                      const located_lengths& lengths, interpolation_scheme scheme, mbs_cell_memo& memo,
                                      Put&& put) {
        if (count == 0) return;
        const bool shapes = scheme == interpolation_scheme::quadratic_shape && lengths.status == estimate_status::ok &&
                            count <= mbs_cell_memo::max_grids;
        for (std::size_t k = 0; k < n;) {
            const int mbs = first + static_cast<int>(k);
            if (shapes) load_cell(grids, count, mbs, lengths, memo);
            const std::size_t run = shapes ? shape_run_length(grids, count, mbs, n - k, lengths, memo) : 0;
            if (run > 0) {
                shape_run(grids, count, mbs, run, lengths, memo, [&](std::size_t j, std::size_t i, const estimate<double>& v) {
                    put(k + j, i, v);
                });
                k += run;
                continue;
            }
            std::array<estimate<double>, mbs_cell_memo::max_grids> one;
            at_shared_located(grids, std::min(count, one.size()), mbs, lengths, scheme, one.data(), &memo);
            for (std::size_t i = 0; i < count; ++i) put(k, i, one[i]);
            ++k;
        }
    }

    /// Leave-one-out prediction of the profiled point at grid indices `idx`: every dependent
    /// axis with >= 3 values must have the point strictly inside (0 < i < n-1); the point is
    /// predicted from the cell spanned by its neighbours (i-1, i+1) on each such axis, which
    /// must all be profiled. nullopt when the point is not profiled or not interior.
    [[nodiscard]] std::optional<double> predict_left_out(std::array<std::size_t, axes> idx,
                                                         interpolation_scheme scheme) const noexcept {
        if (!at_index(idx[0], idx[1], idx[2])) return std::nullopt;
        std::array<bracket, axes> b{};
        bool any = false;
        for (std::size_t k = 0; k < axes; ++k) {
            const std::uint32_t i = static_cast<std::uint32_t>(idx[k]);
            if (independent_[k] || size_[k] == 1) {
                b[k] = {i, i, 0.0};
                continue;
            }
            if (i == 0 || i + 1 >= size_[k]) return std::nullopt;
            b[k] = {i - 1, i + 1, local(k, i - 1, i + 1, axis_value(k, i), scheme)};
            any = true;
        }
        if (!any) return std::nullopt;
        const estimate<double> e = combine(b, scheme, false);
        if (!e.ok()) return std::nullopt;
        return e.value_or(0.0);
    }

private:
    struct bracket {
        std::uint32_t lo = 0, hi = 0;
        double t = 0;  // weight of `hi`
    };

    [[nodiscard]] static bool uses_log_axes(interpolation_scheme s) noexcept {
        return s == interpolation_scheme::log_log || s == interpolation_scheme::log_axes;
    }

    // Local coordinate of x between axis points lo and hi.
    [[nodiscard]] double local(std::size_t k, std::uint32_t lo, std::uint32_t hi, double x,
                               interpolation_scheme scheme) const noexcept {
        if (uses_log_axes(scheme)) {
            const double a = log_axis_[offset_[k] + lo], c = log_axis_[offset_[k] + hi];
            return (std::log(x) - a) / (c - a);
        }
        const double a = axis_[offset_[k] + lo], c = axis_[offset_[k] + hi];
        return (x - a) / (c - a);
    }

    [[nodiscard]] estimate_status locate(std::size_t k, double x, interpolation_scheme scheme,
                                         bracket& out) const noexcept {
        if (independent_[k]) {
            out = {0, 0, 0.0};
            return estimate_status::ok;
        }
        if (!(x >= 1.0)) return estimate_status::unsupported;  // also rejects NaN
        const double* a = axis_.data() + offset_[k];
        const std::uint32_t n = size_[k];
        if (x > a[n - 1]) return estimate_status::out_of_profiled_range;
        if (n == 1 || x <= a[0]) {
            if (n > 1 && x < a[0] && scheme == interpolation_scheme::linear_extrapolating) {
                out = {0, 1, (x - a[0]) / (a[1] - a[0])};
                return estimate_status::ok;
            }
            // At or clamped to the first point (the shape scheme keeps a two-point mbs cell).
            if (n > 1 && k == 0 && scheme == interpolation_scheme::quadratic_shape) out = {0, 1, 0.0};
            else out = {0, 0, 0.0};
            return estimate_status::ok;
        }
        // The cell: the largest i <= n-2 with a[i] <= x (branch-free binary search).
        std::uint32_t i = 0, len = n - 1;
        while (len > 1) {
            const std::uint32_t half = len / 2;
            i = a[i + half] <= x ? i + half : i;
            len -= half;
        }
        out = {i, i + 1, local(k, i, i + 1, x, scheme)};
        return estimate_status::ok;
    }

    [[nodiscard]] const std::vector<double>& space(interpolation_scheme scheme) const noexcept {
        return scheme == interpolation_scheme::log_log && all_positive_ ? log_values_ : values_;
    }
    [[nodiscard]] double back(double v, interpolation_scheme scheme) const noexcept {
        return scheme == interpolation_scheme::log_log && all_positive_ ? std::exp(v) : v;
    }

    // The interpolation of one query as a weighted sum of at most 8 grid values (corners with
    // weight 0 are left out). It depends only on the axes, so grids with the same axes share it.
    struct stencil {
        // Only the first `count` entries are set (left uninitialised: this is the hot path).
        std::array<std::size_t, 8> index;
        std::array<double, 8> weight;
        unsigned count = 0;
        bool exact = false;  // a single grid point with weight 1
        bool shape = false;  // quadratic_shape weights (raw values); else the scheme's own space
    };

    void multilinear_stencil(const std::array<bracket, axes>& b, stencil& st) const noexcept {
        // Built axis by axis: an axis with two corners of non-zero weight doubles the entries.
        unsigned count = 1;
        std::size_t base = 0;  // offset shared by all entries (axes with a single corner)
        st.index[0] = 0;
        st.weight[0] = 1.0;
        for (std::size_t k = 0; k < axes; ++k) {
            const bracket& bk = b[k];
            if (bk.lo == bk.hi || bk.t == 0 || bk.t == 1) {
                base += (bk.lo != bk.hi && bk.t == 1 ? bk.hi : bk.lo) * stride_[k];
                continue;
            }
            const std::size_t off_lo = bk.lo * stride_[k], off_hi = bk.hi * stride_[k];
            for (unsigned i = 0; i < count; ++i) {
                st.index[count + i] = st.index[i] + off_hi;
                st.weight[count + i] = st.weight[i] * bk.t;
                st.index[i] += off_lo;
                st.weight[i] *= 1.0 - bk.t;
            }
            count *= 2;
        }
        for (unsigned i = 0; i < count; ++i) st.index[i] += base;
        st.count = count;
        st.exact = count == 1;
        st.shape = false;
    }

    // quadratic_shape (see interpolation_scheme): f = A(x) + mbs * B(x) with, at each length
    // corner, B = (f(m1) - f(m0)) / (m1 - m0) and A = f(m0) - m0 * B; A is interpolated with
    // linear weights, B with weights through the origin. Expanded, that is a fixed weighted sum
    // of the corner values. Brackets hold raw local coordinates.
    void make_stencil(const std::array<bracket, axes>& b, interpolation_scheme scheme, stencil& st) const noexcept {
        if (scheme != interpolation_scheme::quadratic_shape) return multilinear_stencil(b, st);
        // Grid points (returned exactly) and single-mbs grids: plain multilinear.
        if (on_grid_point(b) || b[0].lo == b[0].hi) return multilinear_stencil(b, st);
        std::array<std::array<double, 2>, axes> w_a{}, w_b{};
        length_weights(b, w_a, w_b);
        shape_stencil(b, w_a, w_b, st);
    }

    [[nodiscard]] static bool on_grid_point(const std::array<bracket, axes>& b) noexcept {
        bool on = true;
        for (const bracket& bk : b) on = on && (bk.lo == bk.hi || bk.t == 0 || bk.t == 1);
        return on;
    }

    // Per length axis: weights of the intercept (linear) and of the slope (through origin).
    void length_weights(const std::array<bracket, axes>& b, std::array<std::array<double, 2>, axes>& w_a,
                        std::array<std::array<double, 2>, axes>& w_b) const noexcept {
        for (std::size_t k = 1; k < axes; ++k) {
            if (b[k].lo == b[k].hi) {
                w_a[k] = w_b[k] = {1.0, 0.0};
                continue;
            }
            const double s0 = axis_value(k, b[k].lo), s1 = axis_value(k, b[k].hi);
            const double x = s0 + b[k].t * (s1 - s0);
            w_a[k] = {1.0 - b[k].t, b[k].t};
            // A decoder layer's per-sequence cost is b*d + c*d^2 + e*d*s: through the origin in
            // the decoder length d but affine in the encoder length s, so when both lengths
            // are axes the encoder axis is interpolated linearly.
            if (k == 1 && !independent_[2]) w_b[k] = w_a[k];
            else w_b[k] = {x * (s1 - x) / (s0 * (s1 - s0)), x * (x - s0) / (s1 * (s1 - s0))};
        }
    }

    // The quadratic_shape stencil of a query off the grid points with two mbs corners, from its
    // length weights (length_weights()).
    void shape_stencil(const std::array<bracket, axes>& b, const std::array<std::array<double, 2>, axes>& w_a,
                       const std::array<std::array<double, 2>, axes>& w_b, stencil& st) const noexcept {
        const double m0 = axis_value(0, b[0].lo), m1 = axis_value(0, b[0].hi);
        const double m = m0 + b[0].t * (m1 - m0);
        const double inv_dm = 1.0 / (m1 - m0);
        st.count = 0;
        for (unsigned corner = 0; corner < 4; ++corner) {
            const unsigned u1 = corner & 1U, u2 = (corner >> 1) & 1U;
            if ((u1 && b[1].lo == b[1].hi) || (u2 && b[2].lo == b[2].hi)) continue;
            const double wa = w_a[1][u1] * w_a[2][u2], wb = w_b[1][u1] * w_b[2][u2];
            const double c = (wb * m - wa * m0) * inv_dm;  // weight of f(m1); f(m0) gets wa - c
            const std::size_t index = (u1 ? b[1].hi : b[1].lo) * stride_[1] + (u2 ? b[2].hi : b[2].lo) * stride_[2];
            if (wa - c != 0) {
                st.index[st.count] = index + b[0].lo * stride_[0];
                st.weight[st.count++] = wa - c;
            }
            if (c != 0) {
                st.index[st.count] = index + b[0].hi * stride_[0];
                st.weight[st.count++] = c;
            }
        }
        st.exact = false;
        st.shape = true;
    }

    // The mbs cell `lo`'s corner values of each grid into `memo` (shape_located()).
    static void fill_memo(const profile_grid* const* grids, std::size_t count, std::uint32_t lo,
                          const located_lengths& lengths, mbs_cell_memo& memo) noexcept {
        const std::size_t lo0 = lo * grids[0]->stride_[0], hi0 = (lo + 1) * grids[0]->stride_[0];
        memo.lo = lo;
        for (std::size_t i = 0; i < mbs_cell_memo::max_grids; ++i) {
            bool complete = true;
            for (std::uint32_t u = 0; u < lengths.corners; ++u) {
                if (i >= count) {
                    memo.values[2 * u][i] = memo.values[2 * u + 1][i] = 0;
                    continue;
                }
                const double* v = grids[i]->values_.data() + lengths.corner_offset[u];
                memo.values[2 * u][i] = v[lo0];
                memo.values[2 * u + 1][i] = v[hi0];
                complete = complete && !std::isnan(v[lo0]) && !std::isnan(v[hi0]);
            }
            memo.complete[i] = complete;
        }
    }

    // Makes the memo hold the mbs cell that locate() finds for `mbs` (shape_located() would
    // load it there), unless it holds it already or mbs lies outside the grid's mbs range.
    static void load_cell(const profile_grid* const* grids, std::size_t count, int mbs, const located_lengths& lengths,
                          mbs_cell_memo& memo) noexcept {
        const profile_grid& g0 = *grids[0];
        const double x = mbs;
        if (memo.lo != mbs_cell_memo::none && g0.axis_value(0, memo.lo) <= x && x < g0.axis_value(0, memo.lo + 1)) return;
        bracket b;
        if (g0.locate(0, x, interpolation_scheme::quadratic_shape, b) != estimate_status::ok || b.lo == b.hi ||
            x < g0.axis_value(0, b.lo))
            return;
        fill_memo(grids, count, b.lo, lengths, memo);
    }

    // How many of the sizes first, first + 1, ... (at most n) lie in the memo's mbs cell (its
    // lower point included: locate() finds that cell there too, at local coordinate 0) and take
    // shape_located() there with every grid's corners profiled: the sizes shape_run() prices
    // together. 0 when the memo holds no cell or a grid is incomplete.
    [[nodiscard]] static std::size_t shape_run_length(const profile_grid* const* grids, std::size_t count, int first,
                                                      std::size_t n, const located_lengths& lengths,
                                                      const mbs_cell_memo& memo) noexcept {
        if (memo.lo == mbs_cell_memo::none || count > mbs_cell_memo::max_grids) return 0;
        for (std::size_t i = 0; i < count; ++i)
            if (!memo.complete[i]) return 0;
        const profile_grid& g0 = *grids[0];
        const double m0 = g0.axis_value(0, memo.lo), m1 = g0.axis_value(0, memo.lo + 1);
        std::size_t run = 0;
        for (; run < n; ++run) {
            const double mbs = first + static_cast<int>(run);
            if (!(mbs >= 1.0 && m0 <= mbs && mbs < m1)) break;
            const double t = g0.local(0, memo.lo, memo.lo + 1, mbs, interpolation_scheme::quadratic_shape);
            if (lengths.on_grid && (t == 0 || t == 1)) break;
        }
        return run;
    }

    /// shape_located() at the sizes first .. first + run − 1 of one mbs cell whose corners are
    /// all profiled (shape_run_length()): put(k, i, value) receives grid i's value at size first + k.
    /// Per size the same operations in the same order; the grids' sums run side by side (the
    /// memo's values are laid out per corner entry), which the compiler vectorises.
    template <class Put>
    static void shape_run(const profile_grid* const* grids, std::size_t count, int first, std::size_t run,
                          const located_lengths& lengths, const mbs_cell_memo& memo, Put&& put) {
        constexpr std::size_t lanes = mbs_cell_memo::max_grids;
        const profile_grid& g0 = *grids[0];
        const std::uint32_t lo = memo.lo, corners = lengths.corners;
        const double m0 = g0.axis_value(0, lo), m1 = g0.axis_value(0, lo + 1);
        const double inv_dm = 1.0 / (m1 - m0);
        for (std::size_t k = 0; k < run; ++k) {
            const double t = g0.local(0, lo, lo + 1, first + static_cast<int>(k), interpolation_scheme::quadratic_shape);
            const double m = m0 + t * (m1 - m0);
            std::array<double, lanes> sum{};
            for (std::uint32_t u = 0; u < corners; ++u) {
                const double wa = lengths.corner_wa[u];
                const double c = (lengths.corner_wb[u] * m - wa * m0) * inv_dm;
                const double w0 = wa - c;
                for (std::size_t i = 0; i < lanes; ++i) sum[i] += w0 * memo.values[2 * u][i];
                for (std::size_t i = 0; i < lanes; ++i) sum[i] += c * memo.values[2 * u + 1][i];
            }
            for (std::size_t i = 0; i < count; ++i) {
                if (sum[i] > 0) {
                    put(k, i, estimate<double>(sum[i]));
                    continue;
                }
                std::array<bracket, axes> b{};
                b[0] = {lo, lo + 1, t};
                for (std::size_t a = 1; a < axes; ++a) b[a] = {lengths.lo[a], lengths.hi[a], lengths.t[a]};
                put(k, i, grids[i]->combine(b, interpolation_scheme::linear, true));
            }
        }
    }

    // at_shared_located()'s quadratic_shape stencil (off the grid points, two mbs corners) from
    // the lengths' corners and the memo's corner values: shape_stencil() + apply(), the same
    // floating-point operations in the same order; a grid with a NaN corner takes apply().
    static void shape_located(const profile_grid* const* grids, std::size_t count, const std::array<bracket, axes>& b,
                              const located_lengths& lengths, mbs_cell_memo& memo, estimate<double>* out) noexcept {
        const profile_grid& g0 = *grids[0];
        const std::uint32_t corners = lengths.corners;
        if (memo.lo != b[0].lo) fill_memo(grids, count, b[0].lo, lengths, memo);
        const double m0 = g0.axis_value(0, b[0].lo), m1 = g0.axis_value(0, b[0].hi);
        const double m = m0 + b[0].t * (m1 - m0);
        const double inv_dm = 1.0 / (m1 - m0);
        std::array<double, 8> w;  // per corner: weight of f(m0), of f(m1)
        for (std::uint32_t u = 0; u < corners; ++u) {
            const double wa = lengths.corner_wa[u];
            const double c = (lengths.corner_wb[u] * m - wa * m0) * inv_dm;
            w[2 * u] = wa - c;
            w[2 * u + 1] = c;
        }
        for (std::size_t i = 0; i < count; ++i) {
            if (!memo.complete[i]) {
                stencil sc;
                g0.shape_stencil(b, lengths.w_a, lengths.w_b, sc);
                out[i] = grids[i]->apply(sc, b, interpolation_scheme::quadratic_shape, true);
                continue;
            }
            // apply() leaves out the entries of weight 0; adding w · v = ±0 for them instead
            // changes no sum but a zero one, which takes the fallback either way.
            double sum = 0;
            for (std::uint32_t e = 0; e < 2 * corners; ++e) sum += w[e] * memo.values[e][i];
            out[i] = sum > 0 ? estimate<double>(sum) : grids[i]->combine(b, interpolation_scheme::linear, true);
        }
    }

    // Applies a stencil to this grid; falls back (ragged cell, non-positive shape value) as the
    // file comment describes. `allow_simplex` enables the ragged-cell fallback.
    [[nodiscard]] estimate<double> apply(const stencil& st, const std::array<bracket, axes>& b,
                                         interpolation_scheme scheme, bool allow_simplex) const noexcept {
        const std::vector<double>& v = st.shape ? values_ : space(scheme);
        double sum = 0;
        bool incomplete = false;
        for (unsigned i = 0; i < st.count; ++i) {
            const double value = v[st.index[i]];
            incomplete |= std::isnan(value);
            sum += st.weight[i] * value;
        }
        if (!incomplete) {
            // A query on a grid point returns the profiled number exactly (no exp(log(x)) ulps).
            if (st.exact) return values_[st.index[0]];
            if (st.shape) return sum > 0 ? estimate<double>(sum) : combine(b, interpolation_scheme::linear, allow_simplex);
            return back(sum, scheme);
        }
        if (st.shape) return combine(b, interpolation_scheme::linear, allow_simplex);
        if (!allow_simplex || scheme == interpolation_scheme::linear_extrapolating)
            return estimate<double>::out_of_range();
        return simplex(b, scheme);
    }

    [[nodiscard]] estimate<double> combine(const std::array<bracket, axes>& b, interpolation_scheme scheme,
                                           bool allow_simplex) const noexcept {
        stencil st;
        make_stencil(b, scheme, st);
        return apply(st, b, scheme, allow_simplex);
    }

    // Ragged cell: the simplex of the lowest corner and its axis neighbours.
    [[nodiscard]] estimate<double> simplex(const std::array<bracket, axes>& b,
                                           interpolation_scheme scheme) const noexcept {
        const std::vector<double>& v = space(scheme);
        std::size_t base = 0;
        double t_sum = 0;
        for (std::size_t k = 0; k < axes; ++k) {
            base += b[k].lo * stride_[k];
            if (b[k].lo != b[k].hi) t_sum += b[k].t;
        }
        if (t_sum > 1.0 + 1e-12) return estimate<double>::out_of_range();
        const double f0 = v[base];
        if (std::isnan(f0)) return estimate<double>::out_of_range();
        double result = f0;
        for (std::size_t k = 0; k < axes; ++k) {
            if (b[k].lo == b[k].hi || b[k].t == 0) continue;
            const double fk = v[base + (b[k].hi - b[k].lo) * stride_[k]];
            if (std::isnan(fk)) return estimate<double>::out_of_range();
            result += b[k].t * (fk - f0);
        }
        return back(result, scheme);
    }

    std::vector<double> axis_;      // all axes' values, concatenated
    std::vector<double> log_axis_;  // log of axis_ (0 for the independent axes' 0)
    std::vector<double> values_;    // row-major, NaN = not profiled
    std::vector<double> log_values_;
    std::array<std::uint32_t, axes> size_{1, 1, 1};
    std::array<std::uint32_t, axes> offset_{0, 0, 0};
    std::array<std::size_t, axes> stride_{1, 1, 1};
    std::array<bool, axes> independent_{true, true, true};
    std::size_t profiled_ = 0;
    bool all_positive_ = true;
};

}  // namespace pipeplan
