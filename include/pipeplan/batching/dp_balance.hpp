// pipeplan/batching/dp_balance.hpp — distributing micro-batches over data-parallel ranks.
//
// Minimises the largest rank's total time (multiway number partitioning). Candidates: greedy
// longest-processing-time (LPT) and the Karmarkar–Karp largest differencing method generalised
// to k ways; the better one is then improved by a local search (moves and swaps off the most
// loaded rank), so the result is never worse than LPT. Each rank keeps its micro-batches in
// their original order (indices ascending). Deterministic (ties by index).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <queue>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/batching/result.hpp"
#include "pipeplan/core/error.hpp"

namespace pipeplan::batching {

/// Micro-batch indices per rank (ascending) and each rank's total time.
struct dp_assignment {
    std::vector<std::vector<int>> groups;
    std::vector<double> group_ms;
    [[nodiscard]] double max_ms() const noexcept {
        return group_ms.empty() ? 0.0 : *std::max_element(group_ms.begin(), group_ms.end());
    }
};

namespace detail {
inline void check_balance_args(std::span<const double> times, int dp) {
    if (dp < 1) throw invalid_argument("data-parallel degree " + std::to_string(dp) + " is invalid (must be >= 1)");
    for (double t : times)
        if (!(t >= 0) || !std::isfinite(t)) throw invalid_argument("micro-batch times must be finite and >= 0");
}
inline dp_assignment finish(std::vector<std::vector<int>> groups, std::span<const double> times) {
    dp_assignment a;
    for (auto& g : groups) {
        std::sort(g.begin(), g.end());
        double s = 0;
        for (int i : g) s += times[static_cast<std::size_t>(i)];
        a.group_ms.push_back(s);
    }
    a.groups = std::move(groups);
    return a;
}
}  // namespace detail

/// Greedy LPT: longest first, each to the currently least loaded rank (lowest index on ties).
[[nodiscard]] inline dp_assignment balance_lpt(std::span<const double> times, int dp) {
    detail::check_balance_args(times, dp);
    std::vector<int> idx(times.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
        return times[static_cast<std::size_t>(a)] > times[static_cast<std::size_t>(b)];
    });
    std::vector<std::vector<int>> groups(static_cast<std::size_t>(dp));
    std::vector<double> load(static_cast<std::size_t>(dp), 0.0);
    for (int i : idx) {
        const auto r = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
        groups[r].push_back(i);
        load[r] += times[static_cast<std::size_t>(i)];
    }
    return detail::finish(std::move(groups), times);
}

/// Karmarkar–Karp largest differencing, k-way: every item starts as a k-tuple (t, 0, ..., 0);
/// the two tuples with the largest spread are merged largest-with-smallest until one is left.
[[nodiscard]] inline dp_assignment balance_karmarkar_karp(std::span<const double> times, int dp) {
    detail::check_balance_args(times, dp);
    const auto k = static_cast<std::size_t>(dp);
    struct tuple {
        std::vector<double> sum;              // descending
        std::vector<std::vector<int>> items;  // parallel to sum
    };
    std::vector<tuple> pool;
    pool.reserve(times.size() * 2);
    struct key {
        double spread;
        std::size_t id;
        bool operator<(const key& o) const noexcept {
            return spread != o.spread ? spread < o.spread : id > o.id;  // max-heap, lowest id first
        }
    };
    std::priority_queue<key> heap;
    for (std::size_t i = 0; i < times.size(); ++i) {
        tuple t;
        t.sum.assign(k, 0.0);
        t.items.assign(k, {});
        t.sum[0] = times[i];
        t.items[0].push_back(static_cast<int>(i));
        pool.push_back(std::move(t));
        heap.push({times[i], i});
    }
    if (heap.empty()) return detail::finish(std::vector<std::vector<int>>(k), times);
    while (heap.size() > 1) {
        const std::size_t a = heap.top().id;
        heap.pop();
        const std::size_t b = heap.top().id;
        heap.pop();
        tuple m;
        m.sum.resize(k);
        m.items.resize(k);
        for (std::size_t j = 0; j < k; ++j) {
            m.sum[j] = pool[a].sum[j] + pool[b].sum[k - 1 - j];
            m.items[j] = std::move(pool[a].items[j]);
            auto& from = pool[b].items[k - 1 - j];
            m.items[j].insert(m.items[j].end(), from.begin(), from.end());
        }
        pool[a] = tuple{};
        pool[b] = tuple{};
        std::vector<std::size_t> ord(k);
        std::iota(ord.begin(), ord.end(), std::size_t{0});
        std::stable_sort(ord.begin(), ord.end(), [&](std::size_t x, std::size_t y) { return m.sum[x] > m.sum[y]; });
        tuple sorted;
        for (std::size_t j : ord) {
            sorted.sum.push_back(m.sum[j]);
            sorted.items.push_back(std::move(m.items[j]));
        }
        const double spread = sorted.sum.front() - sorted.sum.back();
        pool.push_back(std::move(sorted));
        heap.push({spread, pool.size() - 1});
    }
    return detail::finish(std::move(pool[heap.top().id].items), times);
}

/// The better of KK (when n · dp ≤ 2^22, its memory) and LPT, improved by moves and swaps off the most loaded rank while that
/// lowers the largest load (at most `max_rounds` improvements). Never worse than LPT.
[[nodiscard]] inline dp_assignment balance_data_parallel(std::span<const double> times, int dp, int max_rounds = 10000) {
    dp_assignment best = balance_lpt(times, dp);
    // k-way KK holds up to n k-tuples: only where that stays small (n * dp <= 2^22 entries).
    if (static_cast<double>(times.size()) * dp <= static_cast<double>(1 << 22)) {
        dp_assignment kk = balance_karmarkar_karp(times, dp);
        if (kk.max_ms() < best.max_ms()) best = std::move(kk);
    }
    const auto k = best.groups.size();
    const auto t = [&](int i) { return times[static_cast<std::size_t>(i)]; };
    for (int round = 0; round < max_rounds && k > 1; ++round) {
        const auto hi = static_cast<std::size_t>(std::max_element(best.group_ms.begin(), best.group_ms.end()) -
                                                 best.group_ms.begin());
        const double top = best.group_ms[hi];
        // Best single change: the pair (hi, r) whose new max is smallest and below `top`.
        double best_new = top;
        std::size_t br = 0, bi = 0, bj = 0;
        bool swap = false, found = false;
        for (std::size_t r = 0; r < k; ++r) {
            if (r == hi) continue;
            for (std::size_t i = 0; i < best.groups[hi].size(); ++i) {
                const double x = t(best.groups[hi][i]);
                const double mv = std::max(top - x, best.group_ms[r] + x);
                if (mv < best_new) best_new = mv, br = r, bi = i, swap = false, found = true;
                for (std::size_t j = 0; j < best.groups[r].size(); ++j) {
                    const double y = t(best.groups[r][j]);
                    if (y >= x) continue;
                    const double sw = std::max(top - x + y, best.group_ms[r] - y + x);
                    if (sw < best_new) best_new = sw, br = r, bi = i, bj = j, swap = true, found = true;
                }
            }
        }
        if (!found) break;
        auto& from = best.groups[hi];
        auto& to = best.groups[br];
        const int x = from[bi];
        if (swap) {
            const int y = to[bj];
            from[bi] = y;
            to[bj] = x;
        } else {
            from.erase(from.begin() + static_cast<std::ptrdiff_t>(bi));
            to.push_back(x);
        }
        best = detail::finish(std::move(best.groups), times);
    }
    return best;
}

/// Balances a split's micro-batches over `dp` ranks (default: the result's dp) and records
/// dp_groups / dp_group_ms in it.
inline void balance_result(split_result& r, int dp = 0) {
    if (dp == 0) dp = r.dp;
    std::vector<double> times;
    times.reserve(r.per_microbatch.size());
    for (const auto& m : r.per_microbatch) times.push_back(std::max(0.0, m.cost.time_ms));
    dp_assignment a = balance_data_parallel(times, dp);
    r.dp_groups = std::move(a.groups);
    r.dp_group_ms = std::move(a.group_ms);
}

/// Replica `replica`'s share of a balanced split (balance_result): its micro-batches, in order, as
/// a split of their own (dp_groups cleared), e.g. to build the pipeline scenario that replica
/// runs. An unbalanced split (no dp_groups) has one replica, the whole split.
[[nodiscard]] inline split_result replica_split(const split_result& r, std::size_t replica) {
    if (r.dp_groups.empty()) {
        if (replica != 0) throw invalid_argument("replica_split: replica " + std::to_string(replica) + " of an unbalanced split");
        return r;
    }
    if (replica >= r.dp_groups.size())
        throw invalid_argument("replica_split: replica " + std::to_string(replica) + " of " +
                               std::to_string(r.dp_groups.size()));
    split_result sub = r;
    sub.microbatches.clear();
    sub.per_microbatch.clear();
    sub.dp_groups.clear();
    sub.dp_group_ms.clear();
    for (const int j : r.dp_groups[replica]) {
        sub.microbatches.push_back(r.microbatches.at(static_cast<std::size_t>(j)));
        sub.per_microbatch.push_back(r.per_microbatch.at(static_cast<std::size_t>(j)));
    }
    return sub;
}

}  // namespace pipeplan::batching
