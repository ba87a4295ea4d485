// pipeplan/energy/frontier.hpp — Perseus's iteration time–energy frontier of a schedule.
//
// Method (Phillips–Dessouky's time–cost tradeoff, as lowtime runs it for Perseus):
// - Each op's cost is its energy minus the idle energy of the same time (problem.hpp); over its
//   Pareto options the cost is made a convex, decreasing function of the op's duration by taking
//   the lower convex hull of its (time, cost) points, linear in between.
// - Start from every op at its slowest (minimum-energy) option. Repeatedly: compute the
//   earliest and latest times of the op DAG (schedule/op_graph.hpp: the simulator's timing
//   model); on the critical sub-DAG (ops and edges whose slack is at most half a step) find
//   the minimum cut where shortening an op costs its cost slope and lengthening an op earns it
//   (energy/min_cut.hpp, Boost.Graph max-flow; by default the mean slopes over one step either
//   way, as lowtime's quantized solver does); shorten the cut's forward ops and lengthen its
//   backward ops by one step (--step-ms, default: the makespan at the top clock / 100), clamped
//   at their fastest and slowest times. If that did not shorten the iteration, the step is cut
//   to the least slack outside the cut (half of it when ops got slower). With
//   exact_breakpoints every step also stops where a cut op's slope changes (exact
//   Phillips–Dessouky on the convex costs). Stop when every cut crosses an op that cannot go
//   faster: the iteration then runs at the makespan with every op at the top clock.
// - After every step, each op runs at its slowest option that is not slower than its planned
//   duration, then slows further into the slack this leaves up to the planned makespan
//   (fill_slack), and that plan is replayed through the simulator: the sweep's points are
//   those replayed (time, energy) pairs, so every point is reproduced by simulation. The
//   frontier is the sweep's non-dominated points (time up, energy strictly down).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/energy/min_cut.hpp"
#include "pipeplan/energy/problem.hpp"

namespace pipeplan::energy {

struct frontier_options {
    double step_ms = 0.0;                 ///< time cut per step; 0 = makespan at the top clock / 100
    std::size_t max_iterations = 1000000;  ///< safety limit on Phillips–Dessouky steps
    /// false (default): every step is a full step and an op's cut capacities are its mean cost
    /// slopes over one step either way, as lowtime's quantized solver does (few steps);
    /// true: steps also stop where an op's cost slope changes (exact Phillips–Dessouky on the
    /// convex costs; many more steps, for small schedules).
    bool exact_breakpoints = false;
};

/// One plan of the frontier: its replayed time and energy and every op's option.
struct frontier_point {
    double time_ms = 0.0;
    double energy_j = 0.0;
    frequency_choice choice;  ///< [op id]: index into energy_problem::options
};

struct frontier_result {
    std::vector<frontier_point> sweep;     ///< every step's plan, slowest first
    std::vector<frontier_point> frontier;  ///< non-dominated sweep points, fastest first
    plan_cost all_max;                     ///< every op at the top clock
    plan_cost all_min_energy;              ///< every op at its minimum-energy clock
    double step_ms = 0.0;
    std::size_t iterations = 0;            ///< Phillips–Dessouky steps taken
    std::size_t relaxed_cuts = 0;          ///< steps whose lower bounds had to be dropped (rounding)
};

namespace detail {

/// Lower convex hull of an op's (time, cost) options, time ascending.
struct cost_hull {
    std::vector<double> t, c;

    [[nodiscard]] double t_min() const noexcept { return t.front(); }
    [[nodiscard]] double t_max() const noexcept { return t.back(); }
    /// Cost saved per ms of the segment k (between vertices k and k+1).
    [[nodiscard]] double slope(std::size_t k) const noexcept { return (c[k] - c[k + 1]) / (t[k + 1] - t[k]); }
    /// The next hull vertex faster than d (d > t_min): a step stops there, where the slope changes.
    [[nodiscard]] double vertex_below(double d, double tol) const noexcept {
        return *(std::lower_bound(t.begin(), t.end(), d - tol) - 1);
    }
    /// The next hull vertex slower than d (d < t_max).
    [[nodiscard]] double vertex_above(double d, double tol) const noexcept {
        return *std::upper_bound(t.begin(), t.end(), d + tol);
    }
    /// The cost at duration d in [t_min, t_max] (linear between vertices).
    [[nodiscard]] double cost(double d) const noexcept {
        if (d <= t.front()) return c.front();
        if (d >= t.back()) return c.back();
        const auto k = static_cast<std::size_t>(std::upper_bound(t.begin(), t.end(), d) - t.begin());
        const double a = (d - t[k - 1]) / (t[k] - t[k - 1]);
        return c[k - 1] + a * (c[k] - c[k - 1]);
    }
    /// Mean cost per ms of shortening from d by up to `step` (infinite at the fastest time).
    [[nodiscard]] double speed_up_slope_over(double d, double step, double tol) const noexcept {
        if (d <= t_min() + tol) return flow_infinity;
        const double to = std::max(t_min(), d - step);
        return (cost(to) - cost(d)) / (d - to);
    }
    /// Mean cost per ms saved by lengthening from d by up to `step` (0 at the slowest time).
    [[nodiscard]] double slow_down_slope_over(double d, double step, double tol) const noexcept {
        if (d >= t_max() - tol) return 0.0;
        const double to = std::min(t_max(), d + step);
        return (cost(d) - cost(to)) / (to - d);
    }
    /// Cost per ms of shortening from d (infinite at the fastest time).
    [[nodiscard]] double speed_up_slope(double d, double tol) const noexcept {
        if (d <= t_min() + tol) return flow_infinity;
        const auto k = static_cast<std::size_t>(std::lower_bound(t.begin(), t.end(), d - tol) - t.begin());
        return slope(k - 1);
    }
    /// Cost per ms saved by lengthening from d (0 at the slowest time).
    [[nodiscard]] double slow_down_slope(double d, double tol) const noexcept {
        if (d >= t_max() - tol) return 0.0;
        const auto k = static_cast<std::size_t>(std::upper_bound(t.begin(), t.end(), d + tol) - t.begin());
        return slope(k - 1);
    }
};

inline cost_hull make_cost_hull(const std::vector<energy_point>& options, double idle_power_w) {
    cost_hull h;
    for (const energy_point& p : options) {
        const double c = p.energy_j - idle_power_w * p.time_ms * 1e-3;
        while (h.t.size() >= 2) {
            const std::size_t n = h.t.size();
            const double cross = (h.t[n - 1] - h.t[n - 2]) * (c - h.c[n - 2]) - (h.c[n - 1] - h.c[n - 2]) * (p.time_ms - h.t[n - 2]);
            if (cross > 0.0) break;
            h.t.pop_back();
            h.c.pop_back();
        }
        h.t.push_back(p.time_ms);
        h.c.push_back(c);
    }
    return h;
}

/// Compressed adjacency of the op graph with a topological order.
struct dag_index {
    std::vector<std::uint32_t> out_start, out_edge, in_start, in_edge, topo;

    explicit dag_index(const schedule::op_graph& g) {
        const std::size_t n = g.size();
        out_start.assign(n + 1, 0);
        in_start.assign(n + 1, 0);
        for (const auto& e : g.edges) {
            ++out_start[e.from + 1];
            ++in_start[e.to + 1];
        }
        for (std::size_t i = 0; i < n; ++i) {
            out_start[i + 1] += out_start[i];
            in_start[i + 1] += in_start[i];
        }
        out_edge.resize(g.edges.size());
        in_edge.resize(g.edges.size());
        std::vector<std::uint32_t> fo(out_start.begin(), out_start.end() - 1), fi(in_start.begin(), in_start.end() - 1);
        for (std::uint32_t k = 0; k < g.edges.size(); ++k) {
            out_edge[fo[g.edges[k].from]++] = k;
            in_edge[fi[g.edges[k].to]++] = k;
        }
        std::vector<std::uint32_t> indeg(n);
        for (std::size_t i = 0; i < n; ++i) {
            indeg[i] = in_start[i + 1] - in_start[i];
            if (indeg[i] == 0) topo.push_back(static_cast<std::uint32_t>(i));
        }
        for (std::size_t h = 0; h < topo.size(); ++h)
            for (std::uint32_t k = out_start[topo[h]]; k < out_start[topo[h] + 1]; ++k)
                if (--indeg[g.edges[out_edge[k]].to] == 0) topo.push_back(g.edges[out_edge[k]].to);
        if (topo.size() != n) throw invalid_argument("energy: the op graph has a cycle");
    }
};

/// Earliest starts `es` and latest finishes `lf` of the ops of `g` with durations `d`, for an
/// iteration of at least `min_makespan_ms`; returns the makespan (the longer of the two).
inline double dag_times(const schedule::op_graph& g, const dag_index& idx, const std::vector<double>& d,
                        double min_makespan_ms, std::vector<double>& es, std::vector<double>& lf) {
    double T = min_makespan_ms;
    for (const std::uint32_t v : idx.topo) {
        double s = 0.0;
        for (std::uint32_t k = idx.in_start[v]; k < idx.in_start[v + 1]; ++k) {
            const auto& e = g.edges[idx.in_edge[k]];
            s = std::max(s, es[e.from] + d[e.from] + e.delay_ms);
        }
        es[v] = s;
        T = std::max(T, s + d[v]);
    }
    for (auto it = idx.topo.rbegin(); it != idx.topo.rend(); ++it) {
        const std::uint32_t u = *it;
        double f = T;
        for (std::uint32_t k = idx.out_start[u]; k < idx.out_start[u + 1]; ++k) {
            const auto& e = g.edges[idx.out_edge[k]];
            f = std::min(f, lf[e.to] - d[e.to] - e.delay_ms);
        }
        lf[u] = f;
    }
    return T;
}

/// The Phillips–Dessouky state: planned (continuous) op durations and the DAG's times.
class pd_solver {
public:
    pd_solver(const energy_problem& p, double step_ms, bool exact) : p_(p), idx_(p.graph), step_(step_ms), exact_(exact) {
        hulls_.reserve(p.size());
        for (const auto& o : p.options) hulls_.push_back(make_cost_hull(o, p.idle_power_w));
        d_.resize(p.size());
        for (std::size_t i = 0; i < p.size(); ++i) d_[i] = hulls_[i].t_max();
        es_.resize(p.size());
        lf_.resize(p.size());
        tol_ = 1e-9 * std::max(1.0, makespan_ms());
    }

    /// Makespan of the DAG with the planned durations (updates earliest/latest times).
    double makespan_ms() { return dag_times(p_.graph, idx_, d_, 0.0, es_, lf_); }

    /// One step; false when the makespan cannot be cut any more.
    bool step(std::size_t& relaxed_cuts) {
        const double T0 = makespan_ms();
        // Near-critical ops (slack up to half a step) join the cut so that a step is not cut
        // short by every path that is almost critical; when that leaves no finite cut, the
        // strictly critical sub-DAG decides.
        double thr = std::max(tol_, step_ / 2.0);
        build_network(thr);
        bounded_cut cut = min_cut_with_bounds(arcs_, 2 + 2 * crit_.size(), 0, 1, 1e-12);
        if (cut.infinite && thr > tol_) {
            thr = tol_;
            build_network(thr);
            cut = min_cut_with_bounds(arcs_, 2 + 2 * crit_.size(), 0, 1, 1e-12);
        }
        if (cut.infinite) return false;
        if (!cut.feasible) ++relaxed_cuts;
        double delta = step_;
        std::vector<std::uint32_t> faster, slower;
        for (std::size_t k = 0; k < crit_.size(); ++k) {
            const bool in_s = cut.source_side[2 + 2 * k] != 0, out_s = cut.source_side[3 + 2 * k] != 0;
            const std::uint32_t i = crit_[k];
            if (in_s && !out_s) {
                faster.push_back(i);
                if (exact_) delta = std::min(delta, d_[i] - hulls_[i].vertex_below(d_[i], tol_));
            } else if (!in_s && out_s && cut.feasible && d_[i] < hulls_[i].t_max() - tol_) {
                slower.push_back(i);
                if (exact_) delta = std::min(delta, hulls_[i].vertex_above(d_[i], tol_) - d_[i]);
            }
        }
        if (faster.empty()) return false;
        if (!exact_) {
            // A full step (ops clamped at their fastest and slowest times), kept when it made the
            // iteration shorter.
            saved_ = d_;
            apply(faster, slower, delta);
            if (makespan_ms() < T0 - tol_) return true;
            d_.swap(saved_);
            makespan_ms();
        }
        // A path outside the cut becomes critical after its slack; one through a lengthened op
        // after half of it.
        delta = std::min(delta, min_noncritical_slack(thr) / (slower.empty() ? 1.0 : 2.0));
        if (!(delta > tol_)) return false;
        apply(faster, slower, delta);
        return true;
    }

    void apply(const std::vector<std::uint32_t>& faster, const std::vector<std::uint32_t>& slower, double delta) {
        for (const std::uint32_t i : faster) d_[i] = std::max(hulls_[i].t_min(), d_[i] - delta);
        for (const std::uint32_t i : slower) d_[i] = std::min(hulls_[i].t_max(), d_[i] + delta);
    }

    /// Each op at its slowest option that meets its planned duration.
    [[nodiscard]] frequency_choice rounded() const {
        frequency_choice c(p_.size());
        for (std::size_t i = 0; i < p_.size(); ++i) {
            const auto& o = p_.options[i];
            std::size_t k = 0;
            while (k + 1 < o.size() && o[k + 1].time_ms <= d_[i] + tol_) ++k;
            c[i] = static_cast<std::uint16_t>(k);
        }
        return c;
    }

    [[nodiscard]] double tolerance_ms() const noexcept { return tol_; }

private:
    /// The flow network of the critical sub-DAG: vertex 0 = source, 1 = sink, op k of crit_ has
    /// in = 2 + 2k and out = 3 + 2k.
    void build_network(double thr) {
        const auto& g = p_.graph;
        const std::size_t n = p_.size();
        crit_.clear();
        arcs_.clear();
        slot_.assign(n, UINT32_MAX);
        for (std::size_t i = 0; i < n; ++i)
            if (lf_[i] - d_[i] - es_[i] <= thr) {
                slot_[i] = static_cast<std::uint32_t>(crit_.size());
                crit_.push_back(static_cast<std::uint32_t>(i));
            }
        std::vector<char> has_in(crit_.size(), 0), has_out(crit_.size(), 0);
        for (const auto& e : g.edges) {
            const std::uint32_t a = slot_[e.from], b = slot_[e.to];
            if (a == UINT32_MAX || b == UINT32_MAX || edge_slack(e) > thr) continue;
            arcs_.push_back({3 + 2 * a, 2 + 2 * b, 0.0, flow_infinity});
            has_out[a] = has_in[b] = 1;
        }
        for (std::uint32_t k = 0; k < crit_.size(); ++k) {
            const std::uint32_t i = crit_[k];
            const cost_hull& h = hulls_[i];
            if (exact_)
                arcs_.push_back({2 + 2 * k, 3 + 2 * k, h.slow_down_slope(d_[i], tol_), h.speed_up_slope(d_[i], tol_)});
            else
                arcs_.push_back({2 + 2 * k, 3 + 2 * k, h.slow_down_slope_over(d_[i], step_, tol_),
                                 h.speed_up_slope_over(d_[i], step_, tol_)});
            if (!has_in[k]) arcs_.push_back({0, 2 + 2 * k, 0.0, flow_infinity});
            if (!has_out[k]) arcs_.push_back({3 + 2 * k, 1, 0.0, flow_infinity});
        }
    }

    [[nodiscard]] double edge_slack(const schedule::op_graph::edge& e) const noexcept {
        return (lf_[e.to] - d_[e.to]) - (es_[e.from] + d_[e.from] + e.delay_ms);
    }

    /// The least slack of an op or edge outside the critical sub-DAG (infinite if none).
    [[nodiscard]] double min_noncritical_slack(double thr) const {
        double m = std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < p_.size(); ++i) {
            const double s = lf_[i] - d_[i] - es_[i];
            if (s > thr) m = std::min(m, s);
        }
        for (const auto& e : p_.graph.edges) {
            const double s = edge_slack(e);
            if (s > thr) m = std::min(m, s);
        }
        return m;
    }

    const energy_problem& p_;
    dag_index idx_;
    double step_ = 0.0, tol_ = 0.0;
    bool exact_ = false;
    std::vector<cost_hull> hulls_;
    std::vector<double> d_, es_, lf_, saved_;
    std::vector<std::uint32_t> crit_, slot_;
    std::vector<flow_arc> arcs_;
};

/// Slows ops down into their slack without making the iteration longer than `deadline_ms` (or
/// than plan `c` itself, when that is longer): with the latest finish times of `c` for that
/// deadline, each op in topological order takes its slowest option that still ends by its
/// latest finish (starting when its inputs are there). Each change trades time the plan does
/// not need for energy (a slower Pareto option uses less). Rounding the continuous plan down to
/// real frequencies leaves such slack, up to the continuous plan's makespan.
inline void fill_slack(const energy_problem& p, const dag_index& idx, frequency_choice& c, double deadline_ms,
                       double tol_ms) {
    const auto& g = p.graph;
    const std::size_t n = p.size();
    std::vector<double> d(n), start(n, 0.0), lf(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = p.options[i][c[i]].time_ms;
    dag_times(g, idx, d, deadline_ms, start, lf);
    std::fill(start.begin(), start.end(), 0.0);
    for (const std::uint32_t v : idx.topo) {
        for (std::uint32_t k = idx.in_start[v]; k < idx.in_start[v + 1]; ++k) {
            const auto& e = g.edges[idx.in_edge[k]];
            start[v] = std::max(start[v], start[e.from] + d[e.from] + e.delay_ms);
        }
        const auto& o = p.options[v];
        std::size_t k = c[v];
        while (k + 1 < o.size() && start[v] + o[k + 1].time_ms <= lf[v] + tol_ms) ++k;
        c[v] = static_cast<std::uint16_t>(k);
        d[v] = o[k].time_ms;
    }
}

/// The non-dominated points of `sweep`, fastest first (time up, energy strictly down).
inline std::vector<frontier_point> non_dominated(const std::vector<frontier_point>& sweep, double tol_ms) {
    std::vector<const frontier_point*> v;
    for (const auto& x : sweep) v.push_back(&x);
    std::stable_sort(v.begin(), v.end(), [](const frontier_point* a, const frontier_point* b) {
        return a->time_ms != b->time_ms ? a->time_ms < b->time_ms : a->energy_j < b->energy_j;
    });
    std::vector<frontier_point> out;
    for (const frontier_point* x : v) {
        if (!out.empty() && x->time_ms <= out.back().time_ms + tol_ms) {
            if (x->energy_j < out.back().energy_j) out.back() = *x;  // same time: keep the cheaper
            continue;
        }
        if (out.empty() || x->energy_j < out.back().energy_j) out.push_back(*x);
    }
    // Merging equal times may have left a point no cheaper than its predecessor.
    std::vector<frontier_point> mono;
    for (auto& x : out)
        if (mono.empty() || x.energy_j < mono.back().energy_j) mono.push_back(std::move(x));
    return mono;
}

}  // namespace detail

/// The time–energy frontier of `p` (see the file comment).
[[nodiscard]] inline frontier_result compute_frontier(const energy_problem& p, const frontier_options& opt = {}) {
    frontier_result r;
    schedule::simulator sim;
    const frequency_choice fastest = all_fastest(p), cheapest = all_min_energy(p);
    r.all_max = replay(p, fastest, sim);
    r.all_min_energy = replay(p, cheapest, sim);
    r.step_ms = opt.step_ms > 0.0 ? opt.step_ms : r.all_max.time_ms / 100.0;
    if (!std::isfinite(r.step_ms) || r.step_ms < 0.0) throw option_error("step_ms", "energy: {} must be > 0");
    if (r.step_ms == 0.0) r.step_ms = 1.0;  // an empty iteration: any step ends at once
    r.sweep.push_back({r.all_min_energy.time_ms, r.all_min_energy.energy_j, cheapest});
    detail::pd_solver pd(p, r.step_ms, opt.exact_breakpoints);
    const detail::dag_index dag(p.graph);
    frequency_choice last = cheapest;
    while (r.iterations < opt.max_iterations && pd.step(r.relaxed_cuts)) {
        ++r.iterations;
        frequency_choice c = pd.rounded();
        detail::fill_slack(p, dag, c, pd.makespan_ms(), pd.tolerance_ms());
        if (c == last) continue;
        last = c;
        const plan_cost pc = replay(p, c, sim);
        r.sweep.push_back({pc.time_ms, pc.energy_j, std::move(c)});
    }
    // Rounding keeps every point a real plan; should the steps stall above the top-clock
    // makespan (they do not in exact arithmetic), the all-top-clock plan closes the sweep.
    const double tol = 1e-9 * std::max(1.0, r.all_max.time_ms);
    if (r.sweep.back().time_ms > r.all_max.time_ms + tol) r.sweep.push_back({r.all_max.time_ms, r.all_max.energy_j, fastest});
    r.frontier = detail::non_dominated(r.sweep, tol);
    return r;
}

/// The plan picked for an iteration time.
struct chosen_point {
    frontier_point point;
    double target_ms = 0.0;             ///< the iteration time the devices are held to
    double energy_at_target_j = 0.0;    ///< energy + idle power of every device until target_ms
    double all_max_at_target_j = 0.0;   ///< the same for every op at the top clock
};

/// The sweep plan of least energy over an iteration of `target_ms` (e.g. a straggler's time):
/// among plans no slower than the target, the one minimising its energy plus the idle energy of
/// every device from its end to the target. Throws pipeplan::invalid_argument when the target is
/// below the minimum iteration time.
[[nodiscard]] inline chosen_point choose_for_target(const energy_problem& p, const frontier_result& r, double target_ms) {
    const double tol = 1e-9 * std::max(1.0, r.all_max.time_ms);
    if (!std::isfinite(target_ms) || target_ms < r.all_max.time_ms - tol)
        throw option_error("target_ms", "energy: {} " + std::to_string(target_ms) + " is below the minimum iteration time " +
                                            std::to_string(r.all_max.time_ms) + " ms");
    const double idle_w = p.idle_power_w * static_cast<double>(p.graph.devices()) * 1e-3;
    auto at_target = [&](double time_ms, double energy_j) { return energy_j + idle_w * std::max(0.0, target_ms - time_ms); };
    chosen_point best;
    best.target_ms = target_ms;
    best.energy_at_target_j = std::numeric_limits<double>::infinity();
    for (const frontier_point& x : r.sweep)
        if (x.time_ms <= target_ms + tol && at_target(x.time_ms, x.energy_j) < best.energy_at_target_j) {
            best.point = x;
            best.energy_at_target_j = at_target(x.time_ms, x.energy_j);
        }
    best.all_max_at_target_j = at_target(r.all_max.time_ms, r.all_max.energy_j);
    return best;
}

/// The fastest frontier point (minimum iteration time at the least energy there).
[[nodiscard]] inline chosen_point choose_min_time(const energy_problem& p, const frontier_result& r) {
    return choose_for_target(p, r, r.frontier.front().time_ms);
}

}  // namespace pipeplan::energy
