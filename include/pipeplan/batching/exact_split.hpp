// pipeplan/batching/exact_split.hpp — the exact micro-batch splitter (DynaPipe-style dynamic program).
//
// exact_split orders the samples (ordering.hpp), then for each rung of the memory ladder
// (split_context.hpp) whose single samples all fit, builds the range-cost rows and solves the
// exact range split (range_split.hpp). Range costs come from dense per-shape tables:
//   * decoder-only, sorted descending: a range [i, i+m) is padded to (m, len_i), so row i is a
//     prefix of the table row of len_i — one table row per distinct length, built once, for
//     m up to the first size that does not fit (memory is taken as non-decreasing in mbs);
//   * encoder-decoder (or any 2-D order): row i follows the running maxima (E, D) of the range;
//     tables are memoised per (E, D) and extended on demand; a row stops at the first range
//     that does not fit (memory non-decreasing in mbs and lengths);
//   * packing: row i adds samples first-fit into rows of len_i; t is the cheaper of padded and
//     packed, and the range may grow while the packed rows fit.
// Complexity: O(N log N) ordering + O(distinct shapes) model queries + O(Σ row lengths) per
// capped solve, Σ row lengths ≤ N · K with K the largest micro-batch that fits.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeplan/batching/ordering.hpp"
#include "pipeplan/batching/packing.hpp"
#include "pipeplan/batching/range_split.hpp"
#include "pipeplan/batching/split_context.hpp"

namespace pipeplan::batching {

namespace detail {

/// Dense per-shape cost tables under one rung: t(m) for m = 1.. while (m, E, D) fits.
template <cost_model Model>
class shape_tables {
public:
    shape_tables(const split_context<Model>& ctx, const memory_rung& rung) : ctx_(&ctx), rung_(rung) {}

    using prepared_shape = typename stage_cost_evaluator<Model>::prepared_shape;
    struct entry {
        std::vector<double> t;
        /// rise_from[k]: the first j with t[j .. k] non-decreasing (a copied stretch's order, known
        /// without reading it: append_2d_row).
        std::vector<int> rise_from;
        int nonfinite_at = std::numeric_limits<int>::max();  ///< the first non-finite t (none: max)
        bool closed = false;
        shape_cost_cache::row* cached = nullptr;  ///< the context's cache row of this shape
        std::unique_ptr<prepared_shape> prepared;  ///< the shape's lengths, looked up once
    };

    /// The table entry of (E, D) (created empty).
    entry& get(int seqlen, int dec_seqlen) { return table_[key(seqlen, dec_seqlen)]; }

    /// t(m) of `e` (shape (m, seqlen, dec_seqlen)), extending the row by one evaluation at a time
    /// (each size priced by the evaluator's prepared row: the lengths are looked up once);
    /// false when m does not fit (nor any larger size).
    bool at(entry& e, int seqlen, int dec_seqlen, int m, double& t) {
        if (!e.closed && static_cast<int>(e.t.size()) < m) extend(e, seqlen, dec_seqlen, m);
        if (static_cast<int>(e.t.size()) < m) return false;
        t = e.t[static_cast<std::size_t>(m) - 1];
        return true;
    }

    /// The table row of (E, D), extended to at least `m` entries if it fits that far (its size
    /// may be < m: larger sizes do not fit).
    const std::vector<double>& row(int seqlen, int dec_seqlen, int m) { return row(get(seqlen, dec_seqlen), seqlen, dec_seqlen, m); }
    /// As above, of the entry `e` of (E, D).
    const std::vector<double>& row(entry& e, int seqlen, int dec_seqlen, int m) {
        double t = 0;
        (void)at(e, seqlen, dec_seqlen, m, t);
        return e.t;
    }

private:
    // Prices the sizes t.size() + 1 .. m of `e` block by block (stage_cost_evaluator::
    // evaluate_row; at most row_block sizes past the first that does not fit, which stay in the
    // context's cache) and keeps those up to the first that does not fit.
    void extend(entry& e, int seqlen, int dec_seqlen, int m) {
        using evaluator = stage_cost_evaluator<Model>;
        const auto& ev = ctx_->evaluator();
        // The shape is prepared when first priced (not for sizes the cache holds already).
        const auto price_row = [&](int first, std::size_t n, microbatch_cost* out) {
            if (!e.prepared) {
                e.prepared = std::make_unique<prepared_shape>();
                ev.prepare(seqlen, dec_seqlen, rung_.recompute, *e.prepared, &parts_);
            }
            estimate_status failed = estimate_status::ok;
            return ev.evaluate_row(*e.prepared, first, n, out, failed);
        };
        shape_cost_cache* cache = ctx_->cache();
        if (cache && !e.cached) e.cached = &cache->at(seqlen, dec_seqlen, rung_.recompute);
        while (!e.closed && static_cast<int>(e.t.size()) < m) {
            const int next = static_cast<int>(e.t.size()) + 1;
            const int n = std::min(m - next + 1, static_cast<int>(evaluator::row_block));
            const std::span<const microbatch_cost> got =
                cache ? cache->costs(*e.cached, next, n, price_row)
                      : std::span<const microbatch_cost>(own_.data(), price_row(next, static_cast<std::size_t>(n), own_.data()));
            for (const microbatch_cost& c : got) {
                if (!rung_.fits(c)) {
                    e.closed = true;
                    break;
                }
                push(e, c.time_ms);
            }
            if (static_cast<int>(got.size()) < n) e.closed = true;
        }
    }

    static void push(entry& e, double t) {
        const int k = static_cast<int>(e.t.size());
        if (k == 0) {
            e.t.reserve(64);  // a T5 row holds ~45 sizes: one allocation
            e.rise_from.reserve(64);
        }
        e.t.push_back(t);
        e.rise_from.push_back(k > 0 && !(t < e.t[static_cast<std::size_t>(k) - 1]) ? e.rise_from.back() : k);
        if (!std::isfinite(t)) e.nonfinite_at = std::min(e.nonfinite_at, k);
    }

    static std::uint64_t key(int e, int d) noexcept {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(e)) << 32) | static_cast<std::uint32_t>(d);
    }
    const split_context<Model>* ctx_;
    memory_rung rung_;
    typename stage_cost_evaluator<Model>::part_memo parts_;  ///< component prices the entries share
    std::unordered_map<std::uint64_t, entry> table_;
    std::array<microbatch_cost, stage_cost_evaluator<Model>::row_block> own_;  ///< extend()'s costs without a cache
};

}  // namespace detail

namespace detail {
template <cost_model Model>
[[nodiscard]] split_result assemble_bounds(const split_context<Model>& ctx, std::span<const int> order,
                                           const memory_rung& rung, const std::vector<int>& bounds,
                                           shape_tables<Model>& tables, bool head_padded);
}  // namespace detail

namespace detail {

/// Per position p of `len`, the first position q > p with len[q] > len[p] (len.size(): none),
/// into `out`: where a stretch whose running maximum is len[p] ends (append_2d_row).
inline void next_greater(const std::vector<int>& len, std::vector<int>& out, std::vector<int>& stack) {
    const int n = static_cast<int>(len.size());
    out.assign(len.size(), n);
    stack.clear();
    for (int q = 0; q < n; ++q) {
        while (!stack.empty() && len[static_cast<std::size_t>(stack.back())] < len[static_cast<std::size_t>(q)]) {
            out[static_cast<std::size_t>(stack.back())] = q;
            stack.pop_back();
        }
        stack.push_back(q);
    }
}

/// The lengths of a 2-D order, one array each, with their next_greater() positions.
struct order_lengths {
    std::vector<int> e, d;            ///< encoder / decoder length at each position
    std::vector<int> next_e, next_d;  ///< next_greater(e), next_greater(d)
};

/// Appends the row of ranges starting at position `i` of the order to `rc` (2-D orders):
/// stretches of ranges with the same running maxima (E, D) read one table row, each copied from
/// it, up to the first size that does not fit. A stretch whose maxima are those of positions
/// pe and pd ends before the first later position with a greater length (next_greater: every
/// length between pe and that position is at most E, those between pd and it at most D).
/// Returns the row's length.
template <cost_model Model>
int append_2d_row(range_costs& rc, shape_tables<Model>& tables, const order_lengths& ol, int i) {
    rc.start_row();
    const int n = static_cast<int>(ol.e.size());
    const int remaining = n - i;
    int pe = i, pd = i, len = 0;  // positions holding the running maxima
    bool finite = true, rising = true;  // the row's checks (range_costs::set_row_checked)
    for (int m = 1; m <= remaining;) {
        const int p = i + m - 1;
        if (ol.e[static_cast<std::size_t>(p)] > ol.e[static_cast<std::size_t>(pe)]) pe = p;
        if (ol.d[static_cast<std::size_t>(p)] > ol.d[static_cast<std::size_t>(pd)]) pd = p;
        const int e = ol.e[static_cast<std::size_t>(pe)], d = ol.d[static_cast<std::size_t>(pd)];
        // The stretch is m .. last. Pricing it prices the table row up to `last` or up to the
        // first size that does not fit (the row ends there).
        const int last = std::min(ol.next_e[static_cast<std::size_t>(pe)], ol.next_d[static_cast<std::size_t>(pd)]) - i;
        auto& entry = tables.get(e, d);
        const std::vector<double>& t = tables.row(entry, e, d, last);
        const int fit = std::min(last, static_cast<int>(t.size()));
        if (fit >= m) {
            const auto from = static_cast<std::size_t>(m - 1), to = static_cast<std::size_t>(fit - 1);
            finite = finite && entry.nonfinite_at > fit - 1;
            rising = rising && entry.rise_from[to] <= m - 1 && (len == 0 || !(t[from] < rc.last_cost()));
            rc.append_to_row(std::span<const double>(t.data() + from, to - from + 1));
            len += fit - m + 1;
        }
        if (fit < last) break;
        m = last + 1;
    }
    if (finite) rc.set_row_checked(rising);
    return len;
}

/// The range-cost rows of `order` under the tables' rung (see the file comment); sets
/// `head_padded` (decoder-only, lengths non-increasing) and `entries` (Σ row lengths).
template <cost_model Model>
[[nodiscard]] range_costs build_range_costs(const split_context<Model>& ctx, std::span<const int> order,
                                            shape_tables<Model>& tables, bool& head_padded, long long& entries) {
    const auto& shapes = ctx.shapes();
    const std::size_t n = order.size();
    const bool enc_dec = ctx.evaluator().encoder_decoder();
    const bool pack = ctx.options().packing.enabled;
    const int sep = ctx.options().packing.separator_tokens;
    range_costs rc;
    rc.reserve(n);
    const auto sh = [&](std::size_t pos) -> const sample_shape& { return shapes[static_cast<std::size_t>(order[pos])]; };
    // Is the order padded by its first element (decoder-only, lengths non-increasing)?
    head_padded = !enc_dec;
    for (std::size_t i = 1; head_padded && i < n; ++i) head_padded = sh(i).seqlen_tokens <= sh(i - 1).seqlen_tokens;
    entries = 0;
    std::vector<double> buf;
    // The order's lengths in one array each, with where each stretch ends (append_2d_row).
    order_lengths ol;
    if (!head_padded) {
        ol.e.resize(n);
        ol.d.resize(n);
        for (std::size_t p = 0; p < n; ++p) ol.e[p] = sh(p).seqlen_tokens, ol.d[p] = sh(p).dec_seqlen_tokens;
        std::vector<int> stack;
        next_greater(ol.e, ol.next_e, stack);
        next_greater(ol.d, ol.next_d, stack);
    }
    // The table row of the current run of one length (sorted order: a length's first row asks
    // for the most entries, so the later rows of its run need no lookup).
    const std::vector<double>* run_row = nullptr;
    int run_seqlen = -1;
    for (std::size_t i = 0; i < n; ++i) {
        const int remaining = static_cast<int>(n - i);
        if (head_padded && !pack) {
            if (sh(i).seqlen_tokens != run_seqlen) {
                run_seqlen = sh(i).seqlen_tokens;
                run_row = &tables.row(run_seqlen, 0, remaining);
            }
            const auto& t = *run_row;
            const int len = std::min(remaining, static_cast<int>(t.size()));
            rc.add_borrowed_row(t.data(), len);
            entries += len;
            continue;
        }
        if (pack && head_padded) {
            buf.clear();
            const int cap = sh(i).seqlen_tokens;
            const auto& t = tables.row(cap, 0, remaining);
            const int k = static_cast<int>(t.size());
            first_fit_packer packer(cap, sep);
            for (int m = 1; m <= remaining; ++m) {
                packer.add(sh(i + static_cast<std::size_t>(m) - 1).raw_tokens);
                const int rows = packer.rows();
                if (rows > k) break;
                double v = t[static_cast<std::size_t>(rows) - 1];
                if (m <= k) v = std::min(v, t[static_cast<std::size_t>(m) - 1]);
                buf.push_back(v);
            }
            entries += static_cast<long long>(buf.size());
            rc.add_row(buf);
        } else {
            entries += append_2d_row(rc, tables, ol, static_cast<int>(i));
        }
    }
    return rc;
}

}  // namespace detail

/// Relative tolerance of the reweighted splits (split_options::fill_weights): they are only
/// candidates for a simulator to compare, so exactness is not worth its solves.
inline constexpr double reweighted_tolerance = 0.003;

/// Statistics of one exact split (benchmarks and docs).
struct exact_split_stats {
    int capped_solves = 0;       ///< capped solves run by the exact search
    long long range_entries = 0; ///< Σ row lengths (feasible ranges)
    int orders = 0;              ///< orders solved
};

namespace detail {

/// The range-cost table of one order with its objective-free solves (range_split_cache): what
/// the reweighted splits of that order need (exact_split keeps the best order's).
struct order_table {
    range_costs rc;
    bool head_padded = false;
    range_split_cache cache;
};

/// One split of the table's order per options().fill_weights entry w, into `out`: the optimum
/// with the fill term weighted by w. Candidates for a simulator to judge, under a weight that is
/// itself an estimate: solved to within reweighted_tolerance (or the options' tolerance, if looser).
template <cost_model Model>
void reweighted_splits(const split_context<Model>& ctx, std::span<const int> order, const memory_rung& rung,
                       order_table& table, shape_tables<Model>& tables, std::vector<split_result>& out) {
    const auto& cfg = ctx.config();
    const double a = static_cast<double>(cfg.stages - 1) / cfg.virtual_chunks;
    const double tol = std::max(ctx.options().relative_tolerance, reweighted_tolerance);
    out.clear();
    for (double w : ctx.options().fill_weights) {
        const range_split_solution ws =
            solve_range_split(table.rc, w * a, cfg.dp, tol, std::numeric_limits<double>::infinity(), 0, &table.cache);
        out.push_back(assemble_bounds(ctx, order, rung, ws.bounds, tables, table.head_padded));
    }
}

}  // namespace detail

/// The exact split over a given order of the context's samples, under `rung` (all singletons must
/// fit under it). Returns the micro-batches (ids), their packed rows, and the solution.
/// `shared_tables` (optional) lets several orders under the same rung share the shape tables;
/// `upper_bound` prunes the search as in solve_range_split (exact whenever the optimum is below it).
/// `alternatives` (optional) receives up to options().alternative_splits runner-up splits of this
/// order (solve_range_split's), best first. `reweighted` (optional) receives one split of this
/// order per options().fill_weights entry w: the exact optimum with the fill term weighted by w.
/// `keep` (optional) receives the order's range-cost table and its objective-free solves, for
/// reweighted splits of this order later (detail::reweighted_splits), unless its rows borrow
/// the shape tables' rows (a sorted decoder-only order without packing: keep stays empty).
template <cost_model Model>
[[nodiscard]] split_result exact_split_ordered(const split_context<Model>& ctx, std::span<const int> order,
                                            const memory_rung& rung, exact_split_stats* stats = nullptr,
                                            detail::shape_tables<Model>* shared_tables = nullptr,
                                            double upper_bound = std::numeric_limits<double>::infinity(),
                                            std::vector<split_result>* alternatives = nullptr,
                                            std::vector<split_result>* reweighted = nullptr,
                                            std::optional<detail::order_table>* keep = nullptr) {
    std::optional<detail::shape_tables<Model>> own;
    if (!shared_tables) own.emplace(ctx, rung);
    detail::shape_tables<Model>& tables = shared_tables ? *shared_tables : *own;
    detail::order_table table;
    long long entries = 0;
    table.rc = detail::build_range_costs(ctx, order, tables, table.head_padded, entries);
    const auto& cfg = ctx.config();
    const double a = static_cast<double>(cfg.stages - 1) / cfg.virtual_chunks;
    // table.cache: the objective-free solves, shared with the reweighted splits
    range_split_solution sol = solve_range_split(table.rc, a, cfg.dp, ctx.options().relative_tolerance, upper_bound,
                                             alternatives ? static_cast<std::size_t>(ctx.options().alternative_splits) : 0,
                                             &table.cache);
    if (stats) {
        stats->capped_solves = sol.solves;
        stats->range_entries = entries;
    }
    if (alternatives) {
        alternatives->clear();
        for (const auto& alt : sol.alternatives)
            alternatives->push_back(detail::assemble_bounds(ctx, order, rung, alt.bounds, tables, table.head_padded));
    }
    if (reweighted) detail::reweighted_splits(ctx, order, rung, table, tables, *reweighted);
    split_result r = detail::assemble_bounds(ctx, order, rung, sol.bounds, tables, table.head_padded);
    const bool borrowed = table.head_padded && !ctx.options().packing.enabled;  // build_range_costs' borrowed rows
    if (keep && !borrowed) keep->emplace(std::move(table));
    return r;
}

namespace detail {

/// The split of `order` cut at `bounds` (packed rows where packing is strictly cheaper).
template <cost_model Model>
[[nodiscard]] split_result assemble_bounds(const split_context<Model>& ctx, std::span<const int> order,
                                           const memory_rung& rung, const std::vector<int>& bounds,
                                           shape_tables<Model>& tables, bool head_padded) {
    const auto& shapes = ctx.shapes();
    const bool pack = ctx.options().packing.enabled;
    const int sep = ctx.options().packing.separator_tokens;
    const auto sh = [&](std::size_t pos) -> const sample_shape& { return shapes[static_cast<std::size_t>(order[pos])]; };
    std::vector<std::vector<int>> mbs;
    std::vector<std::vector<std::vector<int>>> rows;
    for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
        const auto b = static_cast<std::size_t>(bounds[k]), e = static_cast<std::size_t>(bounds[k + 1]);
        std::vector<int> ids(order.begin() + static_cast<std::ptrdiff_t>(b), order.begin() + static_cast<std::ptrdiff_t>(e));
        std::vector<std::vector<int>> packed;
        if (pack && head_padded) {
            // Packed only where strictly cheaper than padding (as in the table).
            const int cap = sh(b).seqlen_tokens;
            auto r = pack_first_fit(ids, shapes, cap, sep);
            const int m = static_cast<int>(ids.size());
            const auto& t = tables.row(cap, 0, m);
            const int k_fit = static_cast<int>(t.size());
            const double packed_t = t[r.size() - 1];
            if (m > k_fit || packed_t < t[static_cast<std::size_t>(m) - 1]) packed = std::move(r);
        }
        mbs.push_back(std::move(ids));
        rows.push_back(std::move(packed));
    }
    return ctx.assemble("dp", std::move(mbs), packed_layout{std::move(rows), {}, {}}, rung);
}

}  // namespace detail

namespace detail {

/// DP-guided refinement from `start`: up to `passes` times, re-order the samples inside each
/// micro-batch of the chain's incumbent split (decoder length descending, then encoder length
/// descending, alternately) and solve the new order (`solve(order, bound)`, exact below the
/// incumbent's objective); stop after two passes without gain. The incumbent stays contiguous in
/// each new order, so the chain's objective never rises. The orders are kept in `keep`.
template <class Solve>
void refine_chain(const std::vector<sample_shape>& shapes, split_result start, int passes,
                  std::vector<std::vector<int>>& keep, Solve&& solve) {
    split_result incumbent = std::move(start);
    int misses = 0;
    for (int pass = 0; pass < passes && misses < 2; ++pass) {
        std::vector<int> order;
        order.reserve(shapes.size());
        for (auto mb : incumbent.microbatches) {
            std::stable_sort(mb.begin(), mb.end(), [&](int a, int b) {
                const auto& x = shapes[static_cast<std::size_t>(a)];
                const auto& y = shapes[static_cast<std::size_t>(b)];
                return pass % 2 == 0 ? x.dec_seqlen_tokens > y.dec_seqlen_tokens : x.seqlen_tokens > y.seqlen_tokens;
            });
            order.insert(order.end(), mb.begin(), mb.end());
        }
        keep.push_back(std::move(order));
        split_result r = solve(std::span<const int>(keep.back()), incumbent.objective_ms);
        if (r.objective_ms < incumbent.objective_ms) {
            incumbent = std::move(r);
            misses = 0;
        } else {
            ++misses;
        }
    }
}

}  // namespace detail

/// The orders exact_split solves first (automatic_candidate_orders for the default
/// encoder-decoder search, else order_samples' one order), kept for later splits of the same
/// samples: the planner's splits of one batch (preferred and available memory, each
/// recomputation mode, each memory re-plan) differ in their limits, not in their orders.
/// exact_split reuses the orders while the samples' shapes, the model kind and the ordering
/// method are those they were made for, and otherwise makes and keeps new ones; its result is
/// the same with or without a memo.
struct order_memo {
    std::vector<sample_shape> shapes;  ///< the padded shapes the orders were made for
    bool encoder_decoder = false;
    ordering_method method = ordering_method::automatic;
    std::vector<std::vector<int>> orders;  ///< empty until a split made them
};

namespace detail {

/// The initial orders of `shapes` (see order_memo): the memo's when it holds them, else made
/// into the memo (or into `local` without one).
inline const std::vector<std::vector<int>>& initial_orders(std::span<const sample_shape> shapes, bool enc_dec,
                                                           ordering_method method, order_memo* memo,
                                                           std::vector<std::vector<int>>& local) {
    if (memo && !memo->orders.empty() && memo->encoder_decoder == enc_dec && memo->method == method &&
        std::equal(shapes.begin(), shapes.end(), memo->shapes.begin(), memo->shapes.end()))
        return memo->orders;
    std::vector<std::vector<int>>& out = memo ? memo->orders : local;
    out.clear();
    if (enc_dec && method == ordering_method::automatic) {
        for (auto& c : automatic_candidate_orders(shapes)) out.push_back(std::move(c.ids));
    } else {
        out.push_back(order_samples(shapes, enc_dec, method));
    }
    if (memo) {
        memo->shapes.assign(shapes.begin(), shapes.end());
        memo->encoder_decoder = enc_dec;
        memo->method = method;
    }
    return out;
}

}  // namespace detail

/// Splits `batch` into micro-batches minimising (S − 1) · t_max / C + Σ t / dp exactly over the
/// contiguous partitions of the chosen order, under the first rung of the memory ladder where
/// a split exists. Encoder-decoder with ordering `automatic`: the automatic_candidate_orders
/// (lexicographic, two tours, two decoder-band orders) are solved, sharing the shape tables, each
/// pruned by the best objective so far; the two best splits are then refined (each up to
/// options.refine_passes re-orderings inside its micro-batches, solved exactly) — never worse
/// than any candidate order alone. The result is exact for the final order.
/// `cache` (optional, batching/cost_cache.hpp) keeps the shape costs for later splits with the
/// same model, configuration and accounting; the result is the same with or without it.
/// `alternatives` (optional) receives up to options.alternative_splits runner-ups: distinct
/// splits of the final order that the exact search solved on the way, by objective (candidates
/// for a planner that compares splits by simulation); the result is the same with or without.
/// `reweighted` (optional) receives, per options.fill_weights entry w, the exact split of the
/// final order under the chosen rung with the fill term weighted by w (w < 1: fewer, larger
/// micro-batches; a planner whose schedules put light micro-batches at the pipeline's ends pays
/// less than (S − 1) · t_max / C of fill and drain, so it compares these by simulation too).
/// `orders_memo` (optional, order_memo) keeps the initial orders for later splits of the same samples.
/// Throws split_error (empty batch, sample too long, model states, no feasible split) or
/// invalid_argument (configuration, options, token counts).
template <cost_model Model>
[[nodiscard]] split_result exact_split(const Model& model, std::span<const sample> batch, const pipeline_config& config,
                                    const split_options& options = {}, exact_split_stats* stats = nullptr,
                                    shape_cost_cache* cache = nullptr,
                                    std::vector<split_result>* alternatives = nullptr,
                                    std::vector<split_result>* reweighted = nullptr, order_memo* orders_memo = nullptr) {
    split_context<Model> ctx(model, batch, config, options);
    ctx.use_cache(cache);
    const bool enc_dec = ctx.evaluator().encoder_decoder();
    if (options.packing.enabled && options.order != ordering_method::automatic &&
        options.order != ordering_method::sorted && options.order != ordering_method::lexicographic)
        throw invalid_argument("packing inside micro-batches needs the sorted order (got '" +
                               std::string(to_string(options.order)) + "')");
    const bool refine = enc_dec && options.order == ordering_method::automatic;
    std::vector<std::vector<int>> local_orders;
    const std::vector<std::vector<int>>& orders =
        detail::initial_orders(ctx.shapes(), enc_dec, options.order, orders_memo, local_orders);
    for (const auto& rung : ctx.ladder()) {
        if (!ctx.singletons_fit(rung)) continue;
        split_result best;
        bool have = false;
        std::span<const int> best_order;
        detail::shape_tables<Model> tables(ctx, rung);
        // One order: the reweighted splits come with its solve; several: from the final order.
        const bool single = orders.size() == 1 && !refine;
        std::vector<std::vector<int>> refined;  // keeps the refined orders alive
        // The best order's table (several orders with reweighted splits): its reweighted splits
        // need no second build and no second search.
        std::optional<detail::order_table> best_table;
        const bool keep_best = reweighted && !single;
        // Solves `order` (exact below `bound`); the result becomes the best when it is better.
        const auto solve = [&](std::span<const int> order, double bound) {
            exact_split_stats st;
            std::vector<split_result> alts, rws;
            std::optional<detail::order_table> table;
            split_result r = exact_split_ordered(ctx, order, rung, &st, &tables, std::min(bound, options.objective_bound_ms),
                                              alternatives ? &alts : nullptr, reweighted && single ? &rws : nullptr,
                                              keep_best ? &table : nullptr);
            if (stats) {
                stats->capped_solves += st.capped_solves;
                stats->range_entries += st.range_entries;
                ++stats->orders;
            }
            if (!have || r.objective_ms < best.objective_ms) {
                best = r;
                have = true;
                best_order = order;
                if (alternatives) *alternatives = std::move(alts);
                if (reweighted) *reweighted = std::move(rws);
                best_table = std::move(table);
            }
            return r;
        };
        std::vector<split_result> starts;
        for (const auto& order : orders) starts.push_back(solve(order, have ? best.objective_ms : options.objective_bound_ms));
        if (refine) {
            // DP-guided refinement of the two best candidates (each a chain of its own).
            std::vector<std::size_t> rank(starts.size());
            std::iota(rank.begin(), rank.end(), std::size_t{0});
            std::stable_sort(rank.begin(), rank.end(),
                             [&](std::size_t x, std::size_t y) { return starts[x].objective_ms < starts[y].objective_ms; });
            for (std::size_t k = 0; k < std::min<std::size_t>(2, rank.size()); ++k)
                detail::refine_chain(ctx.shapes(), std::move(starts[rank[k]]), options.refine_passes, refined, solve);
        }
        if (keep_best) {  // the final order's reweighted splits (its table rebuilt only if not kept)
            if (!best_table) {
                best_table.emplace();
                long long entries = 0;
                best_table->rc = detail::build_range_costs(ctx, best_order, tables, best_table->head_padded, entries);
            }
            detail::reweighted_splits(ctx, best_order, rung, *best_table, tables, *reweighted);
        }
        return best;
    }
    ctx.throw_no_rung();
}

}  // namespace pipeplan::batching
