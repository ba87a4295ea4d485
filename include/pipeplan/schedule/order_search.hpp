// pipeplan/schedule/order_search.hpp — choose the micro-batch order (and, for the adaptive
// schedule, the in-flight limit) that minimizes the makespan under a device memory limit.
//
// Method (seeded, deterministic):
//  1. structured starts (or only opt.start, to continue an earlier search): the given order, longest-work-first, shortest-first, and
//     "big/small alternating" (largest, smallest, second largest, ...), which spreads large
//     micro-batches so that their memory peaks and long stages do not coincide; with M >= 4
//     also "light ends": the two lightest micro-batches first and last (both ways round) and
//     the others longest- or shortest-first between them, which shortens the pipeline's fill
//     and drain to what the lightest micro-batches allow;
//  2. for the adaptive schedule, the in-flight limit is chosen on the best start from
//     {none, 1 .. 2·S} (coarsely for large S);
//  3. local search from the best start: seeded random swap and insertion moves, a move kept
//     when it does not increase the makespan (strictly better resets the patience), until the
//     evaluation budget is spent; then the in-flight limit is re-chosen on the final order.
// An evaluation generates the schedule for the reordered scenario and simulates it (one
// reused scenario and simulator workspace, order_evaluator) — unless the generator already
// simulated its orders (replay_facts: adaptive, zb-h1), whose makespan is then the replay's
// bit for bit and whose memory stays within its limit; only the winner is simulated for its
// reported peak. An (order, limit) evaluated before is looked up (detail::evaluation_memo).
// A factory that also takes the makespan to beat (the best so far for a start, the current
// order's in the local search) lets its generator give up above it (the V schedules' quick
// form: zb_v::give_up_above_ms): only whether an evaluation beats that makespan steers the
// search, so the search's course and result are those of complete evaluations.
// An order whose peak memory exceeds the limit (or whose generator cannot meet it:
// limit_exceeded) is infeasible; a schedule that is invalid or deadlocks is reported as that
// error (invalid_argument).
// Unlike trying random permutations (or random permutations of size clusters), the search
// starts from orders that are already good and only spends evaluations near them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/simulator.hpp"

namespace pipeplan::schedule {

using pipeplan::splitmix64;  // the seeded PRNG of the order search (core/random.hpp)

/// How many structured starts the search evaluates (for M >= 4; fewer below): with
/// max_evaluations at most this, the search is its starts alone (a quick screen).
inline constexpr std::size_t order_search_starts = 8;

struct order_search_options {
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< per device
    std::uint64_t seed = 1;
    std::size_t max_evaluations = 96;  ///< orders evaluated (a repeated one is looked up, not simulated again)
    bool search_inflight_limit = false;  ///< vary the factory's in-flight argument
    /// Non-empty: the search starts from this order (a permutation of 0..M-1) alone, without the
    /// structured starts — to continue an earlier search from its best order.
    std::vector<std::uint32_t> start;
    /// The makespan to beat from the first evaluation on (infinite: none): only faster orders
    /// are kept, so a generator may give up above it at once (generator_of()); when no order is
    /// faster, the result is infeasible. For a caller that only needs to know whether this
    /// scenario beats another's best (planner's screen of extra splits).
    double beat_ms = std::numeric_limits<double>::infinity();
    /// When the winner's makespan came from the generator's replay_facts (not simulated),
    /// simulate it once for order_search_result::peak_memory_mb; false leaves that NaN (callers
    /// that simulate the chosen order themselves save the simulation).
    bool simulate_winner = true;
};

struct order_search_result {
    std::vector<std::uint32_t> order;  ///< order[i] = original index of the i-th micro-batch
    std::size_t inflight_limit = 0;    ///< chosen in-flight limit (0 = none / not searched)
    double makespan_ms = std::numeric_limits<double>::infinity();
    double peak_memory_mb = 0.0;       ///< max over devices (NaN: see order_search_options::simulate_winner)
    bool feasible = false;             ///< some order met the memory limit
    std::size_t evaluations = 0;
};

/// Evaluates micro-batch orders of one scenario: generates the schedule for the reordered
/// scenario and simulates it, reusing one reordered scenario and one simulator workspace for
/// every evaluation (no copies of the scenario per evaluation).
class order_evaluator {
public:
    /// `sc` must outlive the evaluator.
    explicit order_evaluator(const scenario& sc) : base_(&sc), scratch_(sc) {
        opt_.record_timeline = false;
        opt_.record_memory_curve = false;
        opt_.compute_lower_bound = false;
    }

    /// Makespan and max peak of `gen` on the scenario reordered by `order`. The makespan is
    /// infinite when the peak exceeds `memory_limit_mb` or the generator cannot meet the limit
    /// (pipeplan::limit_exceeded). A schedule that is invalid or deadlocks is an error
    /// (pipeplan::invalid_argument propagates), not an infinitely long schedule.
    template <schedule_generator G>
    [[nodiscard]] std::pair<double, double> operator()(const G& gen, const std::vector<std::uint32_t>& order,
                                                       double memory_limit_mb) {
        return evaluate(gen, order, memory_limit_mb, false);
    }

    /// operator()'s makespan without simulating when the generator's replay_facts settle it
    /// (their memory limit within `memory_limit_mb`); the peak (second) is then NaN. The order
    /// search's evaluations.
    template <schedule_generator G>
    [[nodiscard]] std::pair<double, double> makespan(const G& gen, const std::vector<std::uint32_t>& order,
                                                     double memory_limit_mb) {
        return evaluate(gen, order, memory_limit_mb, true);
    }

private:
    template <schedule_generator G>
    std::pair<double, double> evaluate(const G& gen, const std::vector<std::uint32_t>& order, double memory_limit_mb,
                                       bool use_replay) {
        constexpr double inf = std::numeric_limits<double>::infinity();
        reorder_into(scratch_, *base_, order);
        pipeline_schedule s;
        try {
            s = pipeline_schedule(gen(scratch_));
        } catch (const limit_exceeded&) {
            return {inf, 0.0};
        }
        if (use_replay && s.replay && s.replay->memory_limit_mb <= memory_limit_mb)
            return {s.replay->makespan_ms, std::numeric_limits<double>::quiet_NaN()};
        simulate_into(result_, scratch_, s, opt_, ws_);
        const double peak = *std::max_element(result_.peak_memory_mb.begin(), result_.peak_memory_mb.end());
        if (peak > memory_limit_mb + 1e-6) return {inf, peak};
        return {result_.makespan_ms, peak};
    }

    const scenario* base_;
    scenario scratch_;
    simulation_options opt_;
    simulation_workspace ws_;
    simulation_result result_;
};

/// Evaluates one order (order_evaluator, once).
template <schedule_generator G>
[[nodiscard]] std::pair<double, double> evaluate_order(const scenario& sc, const G& gen,
                                                       const std::vector<std::uint32_t>& order,
                                                       double memory_limit_mb) {
    order_evaluator ev(sc);
    return ev(gen, order, memory_limit_mb);
}

namespace detail {

/// The (order, in-flight limit) pairs one order search evaluated, with their results: when the
/// search comes back to one (the final in-flight sweep over an unchanged best order, a local
/// move that recreates an order seen before), it is looked up instead of generated and
/// simulated again. Evaluations are deterministic, so the search's course is unchanged.
class evaluation_memo {
public:
    using result = std::pair<double, double>;
    [[nodiscard]] const result* find(const std::vector<std::uint32_t>& order, std::size_t limit) const {
        const std::uint64_t h = hash(order, limit);
        for (const entry& e : entries_)
            if (e.hash == h && e.limit == limit && e.size == order.size() &&
                std::equal(order.begin(), order.end(), orders_.begin() + static_cast<std::ptrdiff_t>(e.offset)))
                return &e.value;
        return nullptr;
    }
    void add(const std::vector<std::uint32_t>& order, std::size_t limit, result value) {
        entries_.push_back({hash(order, limit), limit, orders_.size(), order.size(), value});
        orders_.insert(orders_.end(), order.begin(), order.end());
    }

private:
    struct entry {
        std::uint64_t hash;
        std::size_t limit;
        std::size_t offset;  // into orders_
        std::size_t size;
        result value;
    };
    static std::uint64_t hash(const std::vector<std::uint32_t>& order, std::size_t limit) noexcept {
        std::uint64_t h = 0x9e3779b97f4a7c15ull ^ limit;
        for (std::uint32_t x : order) h = (h ^ x) * 0x100000001b3ull;
        return h;
    }
    std::vector<entry> entries_;
    std::vector<std::uint32_t> orders_;
};

/// The generator of `factory` for in-flight limit `limit`: factory(limit, beat_ms) when the
/// factory takes the makespan to beat (its generator may then give up above it, reporting an
/// infinite makespan: zb_v::give_up_above_ms), else factory(limit).
template <class Factory>
[[nodiscard]] decltype(auto) generator_of(const Factory& factory, std::size_t limit, double beat_ms) {
    if constexpr (std::is_invocable_v<const Factory&, std::size_t, double>) return factory(limit, beat_ms);
    else return factory(limit);
}

/// The generator type of a factory (generator_of()).
template <class Factory>
using factory_generator_t =
    decltype(generator_of(std::declval<const Factory&>(), std::size_t{}, std::numeric_limits<double>::infinity()));

/// Throws when the caller's start order is not a permutation of the M micro-batches.
inline void check_start_order(const std::vector<std::uint32_t>& start, std::size_t M) {
    std::vector<char> seen(M, 0);
    bool perm = start.size() == M;
    for (std::size_t k = 0; perm && k < M; ++k) perm = start[k] < M && !seen[start[k]]++;
    if (!perm)
        throw invalid_argument("order search: the start order is not a permutation of the " + std::to_string(M) +
                               " micro-batches");
}

/// The structured starts, in the order they are evaluated (see the file comment): the given
/// order, longest-work-first, shortest-first, big/small alternating, and with M >= 4 the light
/// ends — the two lightest micro-batches first and last (either way round), the others by work
/// in between (either direction). The fill before the last stage starts and the drain after the
/// first stage ends are then as short as the scenario allows (the terms the lower bound takes
/// from its lightest micro-batches); the middle keeps neighbours alike.
inline std::vector<std::vector<std::uint32_t>> structured_starts(const scenario& sc) {
    const std::size_t M = sc.microbatches;
    std::vector<std::uint32_t> id(M);
    std::iota(id.begin(), id.end(), 0u);
    std::vector<double> work(M);
    for (std::size_t j = 0; j < M; ++j) work[j] = sc.work_ms(j);
    auto desc = id;
    std::stable_sort(desc.begin(), desc.end(), [&](auto a, auto b) { return work[a] > work[b]; });
    auto asc = desc;
    std::reverse(asc.begin(), asc.end());
    std::vector<std::uint32_t> zig;
    for (std::size_t lo = 0, hi = M; lo < hi;) {
        zig.push_back(desc[lo++]);
        if (lo < hi) zig.push_back(desc[--hi]);
    }
    std::vector<std::vector<std::uint32_t>> out{id, desc, asc, zig};
    if (M < 4) return out;
    const std::uint32_t light = desc[M - 1], second = desc[M - 2];
    for (const auto& [head, tail] : {std::pair{light, second}, std::pair{second, light}})
        for (const bool down : {true, false}) {
            std::vector<std::uint32_t> o{head};
            if (down) o.insert(o.end(), desc.begin(), desc.end() - 2);
            else o.insert(o.end(), asc.begin() + 2, asc.end());
            o.push_back(tail);
            out.push_back(std::move(o));
        }
    return out;
}

/// A random neighbour of `cur` (M >= 2): two micro-batches swapped, or one moved elsewhere.
inline std::vector<std::uint32_t> random_move(const std::vector<std::uint32_t>& cur, splitmix64& rng) {
    const std::size_t M = cur.size();
    auto cand = cur;
    const std::size_t i = rng.below(M);
    std::size_t j = rng.below(M - 1);
    if (j >= i) ++j;
    if (rng() & 1u) {
        std::swap(cand[i], cand[j]);
    } else {
        const auto x = cand[i];
        cand.erase(cand.begin() + static_cast<std::ptrdiff_t>(i));
        cand.insert(cand.begin() + static_cast<std::ptrdiff_t>(j), x);
    }
    return cand;
}

/// One search's evaluations (memoized) and its best (order, limit) so far.
template <class Factory>
class order_search_state {
public:
    order_search_state(const scenario& sc, const Factory& factory, const order_search_options& opt)
        : sc_(sc), factory_(factory), opt_(opt), evaluator_(sc) {}

    /// Makespan and peak of `order` with in-flight limit `lim` (counted; looked up when known).
    /// Only whether the makespan exceeds `beat_ms` matters to the caller, so a generator may give
    /// up above it (generator_of()) and report infinity: every later comparison of the search is
    /// with a makespan to beat that is not larger (best and the local search's current order only
    /// improve), so a memoized infinity decides as the true makespan would.
    std::pair<double, double> eval(const std::vector<std::uint32_t>& order, std::size_t lim, double beat_ms) {
        ++best.evaluations;
        if (const auto* known = memo_.find(order, lim)) return *known;
        const auto r = evaluator_.makespan(generator_of(factory_, lim, beat_ms), order, opt_.memory_limit_mb);
        memo_.add(order, lim, r);
        return r;
    }
    void keep_if_better(const std::vector<std::uint32_t>& order, std::size_t lim, double ms, double peak) {
        if (ms >= best.makespan_ms) return;
        best.makespan_ms = ms;
        best.peak_memory_mb = peak;
        best.order = order;
        best.inflight_limit = lim;
        best.feasible = true;
    }
    void consider(const std::vector<std::uint32_t>& order, std::size_t lim) {
        const auto [ms, peak] = eval(order, lim, best.makespan_ms);
        keep_if_better(order, lim, ms, peak);
    }
    /// The in-flight limit on the best order, from {none, 1 .. 2·S} (coarsely for large S).
    void choose_limit() {
        if (!opt_.search_inflight_limit) return;
        const std::size_t top = std::min<std::size_t>(2 * sc_.stages, sc_.microbatches);
        const std::size_t step = std::max<std::size_t>(1, top / 8);
        const auto order = best.order;
        for (std::size_t l = 1; l <= top; l += step) consider(order, l);
    }
    /// Local search from the best order with limit `limit` until the evaluation budget is spent:
    /// a move is kept when it does not increase the makespan.
    void local_search(std::size_t limit) {
        splitmix64 rng(opt_.seed);
        auto cur = best.order;
        double cur_ms = best.makespan_ms;
        while (best.evaluations + (opt_.search_inflight_limit ? 8 : 0) < opt_.max_evaluations) {
            auto cand = random_move(cur, rng);
            const auto [ms, peak] = eval(cand, limit, cur_ms);
            if (ms <= cur_ms) {
                keep_if_better(cand, limit, ms, peak);
                cur = std::move(cand);
                cur_ms = ms;
            }
        }
    }
    /// The winner's peak when it came from replay_facts (opt.simulate_winner).
    void settle_peak() {
        if (opt_.simulate_winner && best.feasible && std::isnan(best.peak_memory_mb))
            best.peak_memory_mb =
                evaluator_(generator_of(factory_, best.inflight_limit, std::numeric_limits<double>::infinity()), best.order,
                           opt_.memory_limit_mb)
                    .second;
    }

    order_search_result best;

private:
    const scenario& sc_;
    const Factory& factory_;
    const order_search_options& opt_;
    order_evaluator evaluator_;
    evaluation_memo memo_;
};

}  // namespace detail

/// Searches the order (see the file comment). `factory(inflight_limit)` returns the generator
/// to use (inflight_limit 0 = none); it is only varied when opt.search_inflight_limit. A factory
/// may take the makespan to beat as a second argument (detail::generator_of()).
template <class Factory>
    requires schedule_generator<detail::factory_generator_t<Factory>>
[[nodiscard]] order_search_result search_order_with(const scenario& sc, const Factory& factory,
                                                    const order_search_options& opt = {}) {
    const std::size_t M = sc.microbatches;
    if (!opt.start.empty()) detail::check_start_order(opt.start, M);
    detail::order_search_state<Factory> st(sc, factory, opt);
    st.best.makespan_ms = opt.beat_ms;
    // 1. structured starts (or the caller's start alone).
    if (!opt.start.empty()) {
        st.best.order = opt.start;
        st.consider(opt.start, 0);
    } else {
        const auto starts = detail::structured_starts(sc);
        st.best.order = starts.front();
        for (const auto& o : starts) st.consider(o, 0);
    }
    // 2. in-flight limit on the best start.
    st.choose_limit();
    // 3. local search, then the limit chosen again on the final order.
    if (M >= 2) st.local_search(st.best.inflight_limit);
    if (opt.search_inflight_limit) {
        st.consider(st.best.order, 0);
        st.choose_limit();
    }
    st.settle_peak();
    return std::move(st.best);
}

/// search_order_with() for a fixed generator (no in-flight limit to vary).
template <schedule_generator G>
[[nodiscard]] order_search_result search_order(const scenario& sc, const G& gen, const order_search_options& opt = {}) {
    order_search_options o = opt;
    o.search_inflight_limit = false;
    return search_order_with(sc, [&](std::size_t) -> const G& { return gen; }, o);
}

}  // namespace pipeplan::schedule
