// pipeplan/energy/min_cut.hpp — minimum s-t cut of a network whose arcs carry flow bounds.
//
// Phillips–Dessouky's step needs, on the critical DAG, the s-t cut minimising
//   sum of ub over arcs leaving the source side  -  sum of lb over arcs entering it,
// which is the max-flow value of the network with flow bounds lb <= flow <= ub. It is found in
// two max-flows (Boost.Graph's Boykov–Kolmogorov): first a feasible flow (arcs of capacity
// ub - lb, each lower bound moved to a super source / super sink, an infinite t -> s arc), then
// an augmentation from s to t in what that flow leaves; the source side is what s still reaches.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

// g++ 12 at -O2/-O3 reports false maybe-uninitialized warnings inside Boost.Graph's edge
// iterators (boost::optional); they are silenced for Boost's code only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace pipeplan::energy {

/// An arc u -> v allowing a flow in [lb, ub]; ub >= flow_infinity means unbounded.
struct flow_arc {
    std::uint32_t from = 0;
    std::uint32_t to = 0;
    double lb = 0.0;
    double ub = 0.0;
};

inline constexpr double flow_infinity = 1e12;

/// The result of min_cut_with_bounds().
struct bounded_cut {
    bool feasible = true;             ///< a flow within the bounds exists (else lb were dropped)
    bool infinite = false;            ///< every cut crosses an unbounded arc forward
    double value = 0.0;               ///< sum ub (forward) - sum lb (backward)
    std::vector<char> source_side;    ///< [vertex]: 1 on the source side
};

namespace detail {

using flow_traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using flow_graph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS,
    boost::property<boost::vertex_color_t, boost::default_color_type,
                    boost::property<boost::vertex_distance_t, long,
                                    boost::property<boost::vertex_predecessor_t, flow_traits::edge_descriptor>>>,
    boost::property<boost::edge_capacity_t, double,
                    boost::property<boost::edge_residual_capacity_t, double,
                                    boost::property<boost::edge_reverse_t, flow_traits::edge_descriptor>>>>;

/// Adds u -> v of capacity `cap` and its zero-capacity reverse; returns the forward edge.
inline flow_traits::edge_descriptor add_flow_edge(flow_graph& g, std::size_t u, std::size_t v, double cap) {
    const auto e = boost::add_edge(u, v, g).first;
    const auto r = boost::add_edge(v, u, g).first;
    boost::put(boost::edge_capacity, g, e, cap);
    boost::put(boost::edge_capacity, g, r, 0.0);
    boost::put(boost::edge_reverse, g, e, r);
    boost::put(boost::edge_reverse, g, r, e);
    return e;
}

inline flow_graph make_flow_graph(std::size_t n) { return flow_graph(n); }

/// Max flow s -> t on g (capacities set); returns the value.
inline double max_flow(flow_graph& g, std::size_t s, std::size_t t) {
    return boost::boykov_kolmogorov_max_flow(g, boost::vertex(s, g), boost::vertex(t, g));
}

/// Flow on each arc of the feasibility network, or empty when no feasible flow exists.
inline std::vector<double> feasible_flow(const std::vector<flow_arc>& arcs, std::size_t n, std::size_t s,
                                         std::size_t t, double tol) {
    flow_graph g = make_flow_graph(n + 2);
    const std::size_t ss = n, tt = n + 1;
    std::vector<double> excess(n, 0.0);
    std::vector<flow_traits::edge_descriptor> es;
    es.reserve(arcs.size());
    for (const flow_arc& a : arcs) {
        es.push_back(add_flow_edge(g, a.from, a.to, a.ub >= flow_infinity ? flow_infinity : a.ub - a.lb));
        excess[a.to] += a.lb;
        excess[a.from] -= a.lb;
    }
    add_flow_edge(g, t, s, flow_infinity);
    double need = 0.0;
    for (std::size_t v = 0; v < n; ++v) {
        if (excess[v] > 0.0) {
            add_flow_edge(g, ss, v, excess[v]);
            need += excess[v];
        } else if (excess[v] < 0.0) {
            add_flow_edge(g, v, tt, -excess[v]);
        }
    }
    if (need == 0.0) return std::vector<double>(arcs.size(), 0.0);
    const double got = max_flow(g, ss, tt);
    if (got < need - tol * (1.0 + need)) return {};
    std::vector<double> f(arcs.size());
    for (std::size_t i = 0; i < arcs.size(); ++i)
        f[i] = boost::get(boost::edge_capacity, g, es[i]) - boost::get(boost::edge_residual_capacity, g, es[i]);
    return f;
}

}  // namespace detail

/// Minimum cut separating s from t in the network of `n` vertices and `arcs` with flow bounds
/// (see the file comment). When no flow meets the lower bounds (which Phillips–Dessouky's
/// invariants rule out, up to rounding), the lower bounds are dropped and `feasible` is false.
[[nodiscard]] inline bounded_cut min_cut_with_bounds(const std::vector<flow_arc>& arcs, std::size_t n, std::size_t s,
                                                     std::size_t t, double tol = 1e-9) {
    bounded_cut cut;
    std::vector<double> f = detail::feasible_flow(arcs, n, s, t, tol);
    if (f.empty()) {
        cut.feasible = false;
        f.assign(arcs.size(), 0.0);
    }
    // Residual network of the feasible flow: u -> v can still take (ub - lb) - f, v -> u can
    // give back f (lower bounds are kept by measuring flow above them).
    detail::flow_graph g = detail::make_flow_graph(n);
    for (std::size_t i = 0; i < arcs.size(); ++i) {
        const flow_arc& a = arcs[i];
        const double lb = cut.feasible ? a.lb : 0.0;
        const double room = a.ub >= flow_infinity ? flow_infinity : std::max(0.0, a.ub - lb - f[i]);
        detail::add_flow_edge(g, a.from, a.to, room);
        if (f[i] > 0.0) detail::add_flow_edge(g, a.to, a.from, f[i]);
    }
    detail::max_flow(g, s, t);
    // Source side: what s reaches through arcs with residual capacity left.
    cut.source_side.assign(n, 0);
    std::vector<std::size_t> stack{s};
    cut.source_side[s] = 1;
    while (!stack.empty()) {
        const std::size_t u = stack.back();
        stack.pop_back();
        for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
            const std::size_t v = boost::target(*e, g);
            if (!cut.source_side[v] && boost::get(boost::edge_residual_capacity, g, *e) > tol) {
                cut.source_side[v] = 1;
                stack.push_back(v);
            }
        }
    }
    for (const flow_arc& a : arcs) {
        const bool fwd = cut.source_side[a.from] && !cut.source_side[a.to];
        const bool bwd = !cut.source_side[a.from] && cut.source_side[a.to];
        if (fwd) {
            if (a.ub >= flow_infinity) cut.infinite = true;
            else cut.value += a.ub;
        } else if (bwd && cut.feasible) {
            cut.value -= a.lb;
        }
    }
    if (cut.source_side[t]) cut.infinite = true;
    return cut;
}

}  // namespace pipeplan::energy
