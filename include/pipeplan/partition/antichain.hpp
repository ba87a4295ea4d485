// pipeplan/partition/antichain.hpp — the antichain DAG of a layer graph (PipeDream's states).
//
// PipeDream's optimizer cuts a layer DAG only where every layer before the cut precedes every
// layer after it. A cut is described by an antichain (a set of mutually unordered layers, the
// last ones before the cut) closed as PipeDream closes it ("augmented": an ancestor with an
// edge leaving the antichain's past is kept in it). The antichains reachable from the first
// layer by advancing one layer at a time form a DAG; its topological order numbers the states
// 0..n-1, and a stage is a range of positions (start, end] of that order. For a chain the states
// are the layers themselves.
//
// Like PipeDream (graph/graph.py: antichain_dag, topological_sort) the DAG is explored
// breadth-first from the first source, and sorted by a depth-first search in discovery order.
// Where PipeDream iterates a Python set (an augmented antichain's extra layers, a state's
// layers when summing, a state's ancestors) this code takes vertex (file) order and position
// order. PipeDream's sets iterate in the order of object addresses, which changes from run to
// run; with them iterated in these orders its printed partitions are this code's
// (tests/partition/pipedream_ties.cpp).
// Before exploring, inputs (sources described "Input...") and unused "__getitem__" sinks are
// set aside as PipeDream sets them aside (the input always goes with the first stage).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "pipeplan/core/error.hpp"
#include "pipeplan/partition/layer_graph.hpp"

namespace pipeplan::partition {

/// A set of vertices as a bitset.
class vertex_set {
public:
    explicit vertex_set(std::size_t n = 0) : words_((n + 63) / 64, 0) {}
    void insert(std::size_t v) { words_[v / 64] |= std::uint64_t{1} << (v % 64); }
    [[nodiscard]] bool contains(std::size_t v) const { return (words_[v / 64] >> (v % 64)) & 1U; }
    vertex_set& operator|=(const vertex_set& o) {
        for (std::size_t i = 0; i < words_.size(); ++i) words_[i] |= o.words_[i];
        return *this;
    }
    template <class F>
    void for_each(F&& f) const {
        for (std::size_t i = 0; i < words_.size(); ++i)
            for (std::uint64_t w = words_[i]; w != 0; w &= w - 1)
                f(i * 64 + static_cast<std::size_t>(__builtin_ctzll(w)));
    }

private:
    std::vector<std::uint64_t> words_;
};

/// One state of the antichain DAG, with PipeDream's cumulative sums over every layer up to and
/// including its antichain.
struct antichain_state {
    std::vector<layer_vertex> antichain;  ///< augmented antichain (PipeDream's `antichain`)
    double compute_ms = 0;                ///< forward + backward of every layer up to here
    double forward_ms = 0;                ///< forward of every layer up to here
    double activation_bytes = 0;          ///< activation bytes of every layer up to here
    double parameter_bytes = 0;           ///< parameter bytes of every layer up to here
    double output_activation_bytes = 0;   ///< activations leaving the antichain (sent at a cut)
    std::vector<std::size_t> ancestors;   ///< positions of the states before it in the DAG (ascending)
};

/// The antichain DAG in topological order, plus what the optimizer needs to map back.
struct antichain_dag {
    std::vector<antichain_state> states;  ///< position = index
    std::vector<layer_vertex> inputs;     ///< input layers set aside (stage 0 when partitioned)
    std::vector<layer_vertex> dropped_sinks;  ///< "__getitem__" sinks set aside
    std::vector<vertex_set> ancestors_of_state;  ///< ancestor positions of each state, as sets
    std::vector<vertex_set> layers_up_to;  ///< layers in or before each state's antichain
    std::vector<double> layer_compute_ms;  ///< forward + backward of each layer, by vertex
};

namespace detail {

/// The layer DAG restricted to the layers PipeDream keeps, with ancestor / descendant sets.
struct kept_graph {
    std::size_t n = 0;
    std::vector<bool> kept;
    std::vector<std::vector<layer_vertex>> out;
    std::vector<vertex_set> anc, desc;
};

[[nodiscard]] inline kept_graph keep_layers(const layer_graph& g, antichain_dag& dag) {
    kept_graph k;
    k.n = boost::num_vertices(g);
    k.kept.assign(k.n, true);
    for (layer_vertex v = 0; v < k.n; ++v)
        if (boost::in_degree(v, g) == 0 && g[v].description.starts_with("Input")) {
            k.kept[v] = false;
            dag.inputs.push_back(v);
        }
    std::vector<layer_vertex> sinks;
    for (layer_vertex v = 0; v < k.n; ++v) {
        if (!k.kept[v]) continue;
        std::size_t outs = 0;
        for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) outs += k.kept[boost::target(*e, g)] ? 1 : 0;
        if (outs == 0 && g[v].description.starts_with("__getitem__")) sinks.push_back(v);
    }
    for (layer_vertex v : sinks) {
        k.kept[v] = false;
        dag.dropped_sinks.push_back(v);
    }
    k.out.assign(k.n, {});
    for (layer_vertex v = 0; v < k.n; ++v)
        if (k.kept[v])
            for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
                if (k.kept[boost::target(*e, g)]) k.out[v].push_back(boost::target(*e, g));
    const auto order = topological_order(g);
    if (!order) throw invalid_argument("layer graph has a cycle");
    k.anc.assign(k.n, vertex_set(k.n));
    k.desc.assign(k.n, vertex_set(k.n));
    for (layer_vertex v : *order)
        for (layer_vertex w : k.out[v]) {
            k.anc[w] |= k.anc[v];
            k.anc[w].insert(v);
        }
    for (auto it = order->rbegin(); it != order->rend(); ++it)
        for (layer_vertex w : k.out[*it]) {
            k.desc[*it] |= k.desc[w];
            k.desc[*it].insert(w);
        }
    return k;
}

/// PipeDream's augment_antichain: the antichain plus every ancestor of one of its layers with
/// an edge to a layer outside that layer's past (other than the layer itself).
[[nodiscard]] inline std::vector<layer_vertex> augment(const kept_graph& k, const std::vector<layer_vertex>& a) {
    std::vector<bool> extra(k.n, false);
    for (layer_vertex x : a)
        k.anc[x].for_each([&](std::size_t p) {
            for (layer_vertex w : k.out[p])
                if (!k.anc[x].contains(w) && w != x) extra[p] = true;
        });
    std::vector<layer_vertex> out;
    for (layer_vertex v = 0; v < k.n; ++v)
        if (extra[v]) out.push_back(v);
    out.insert(out.end(), a.begin(), a.end());
    return out;
}

/// PipeDream's deaugment: the layers of `aug` with no descendant in `aug`, first occurrences.
[[nodiscard]] inline std::vector<layer_vertex> deaugment(const kept_graph& k, const std::vector<layer_vertex>& aug) {
    std::vector<layer_vertex> out;
    for (layer_vertex x : aug) {
        bool dominated = false;
        for (layer_vertex y : aug) dominated = dominated || k.desc[x].contains(y);
        if (!dominated && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
    }
    return out;
}

/// The antichains one step after `a` (PipeDream's next_antichains), in PipeDream's order.
[[nodiscard]] inline std::vector<std::vector<layer_vertex>> next_antichains(const kept_graph& k,
                                                                           const std::vector<layer_vertex>& a) {
    std::vector<std::vector<layer_vertex>> out;
    const auto aug = augment(k, a);
    for (layer_vertex u : aug)
        for (layer_vertex v : k.out[u]) {
            if (std::find(a.begin(), a.end(), v) != a.end()) continue;
            bool next = true;
            for (layer_vertex y : aug) next = next && !k.desc[v].contains(y);
            if (!next) continue;
            auto replaced = aug;
            for (auto& x : replaced)
                if (x == u) x = v;
            out.push_back(deaugment(k, replaced));
        }
    return out;
}

[[nodiscard]] inline std::vector<layer_vertex> sorted_key(std::vector<layer_vertex> a) {
    std::sort(a.begin(), a.end());
    return a;
}

/// Reverse post-order of a depth-first search over `succ`, roots in index order.
[[nodiscard]] inline std::vector<std::size_t> reverse_postorder(const std::vector<std::vector<std::size_t>>& succ) {
    const std::size_t n = succ.size();
    std::vector<char> mark(n, 0);
    std::vector<std::size_t> post;
    post.reserve(n);
    std::vector<std::pair<std::size_t, std::size_t>> stack;
    for (std::size_t root = 0; root < n; ++root) {
        if (mark[root]) continue;
        mark[root] = 1;
        stack.push_back({root, 0});
        while (!stack.empty()) {
            auto& [v, next] = stack.back();
            if (next < succ[v].size()) {
                const std::size_t w = succ[v][next++];
                if (!mark[w]) {
                    mark[w] = 1;
                    stack.push_back({w, 0});
                }
            } else {
                post.push_back(v);
                stack.pop_back();
            }
        }
    }
    std::reverse(post.begin(), post.end());
    return post;
}

}  // namespace detail

/// The default cap on antichain states: graphs with many wide parallel branches (Inception's
/// modules) have a number of antichains that grows as the product of the branch lengths.
inline constexpr std::size_t default_max_antichain_states = 20000;

/// Builds the antichain DAG of `g` and its states in topological order. Throws invalid_argument
/// for an empty graph (after inputs are set aside), pipeplan::error when there are more than
/// `max_states` antichains.
[[nodiscard]] inline antichain_dag build_antichain_dag(const layer_graph& g,
                                                       std::size_t max_states = default_max_antichain_states) {
    antichain_dag dag;
    const auto k = detail::keep_layers(g, dag);
    layer_vertex first = k.n;
    for (layer_vertex v = 0; v < k.n && first == k.n; ++v) {
        if (!k.kept[v]) continue;
        bool source = true;
        for (auto [e, end] = boost::in_edges(v, g); e != end; ++e) source = source && !k.kept[boost::source(*e, g)];
        if (source) first = v;
    }
    if (first == k.n) throw invalid_argument("layer graph has no layer to partition (only inputs)");

    // Breadth-first exploration: discovery order numbers the antichains.
    std::map<std::vector<layer_vertex>, std::size_t> id_of;
    std::vector<std::vector<layer_vertex>> antichains;  // deaugmented, by id
    std::vector<std::vector<std::size_t>> succ;
    std::vector<char> expanded;
    const auto intern = [&](const std::vector<layer_vertex>& a) {
        const auto [it, fresh] = id_of.emplace(detail::sorted_key(a), antichains.size());
        if (fresh) {
            antichains.push_back(a);
            succ.emplace_back();
            expanded.push_back(0);
        }
        return it->second;
    };
    std::deque<std::vector<layer_vertex>> queue{{first}};
    intern({first});
    while (!queue.empty()) {
        const auto a = std::move(queue.front());
        queue.pop_front();
        const std::size_t id = id_of.at(detail::sorted_key(a));
        if (expanded[id]) continue;
        expanded[id] = 1;
        for (auto& next : detail::next_antichains(k, a)) {
            const std::size_t nid = intern(next);
            if (antichains.size() > max_states)
                throw error("layer graph: more than " + std::to_string(max_states) +
                            " antichain states (parallel branches multiply them); the optimizer would not finish");
            succ[id].push_back(nid);
            queue.push_back(std::move(next));
        }
    }

    // Topological order; then the states with PipeDream's cumulative sums.
    const auto order = detail::reverse_postorder(succ);
    std::vector<std::size_t> position(order.size());
    for (std::size_t p = 0; p < order.size(); ++p) position[order[p]] = p;
    const std::size_t n = order.size();
    dag.states.resize(n);
    dag.ancestors_of_state.assign(n, vertex_set(n));
    dag.layers_up_to.assign(n, vertex_set(k.n));
    for (std::size_t p = 0; p < n; ++p) {
        const std::size_t id = order[p];
        for (std::size_t s : succ[id]) {
            const std::size_t q = position[s];
            dag.ancestors_of_state[q] |= dag.ancestors_of_state[p];
            dag.ancestors_of_state[q].insert(p);
        }
        auto& st = dag.states[p];
        st.antichain = detail::augment(k, antichains[id]);
        vertex_set& past = dag.layers_up_to[p];
        for (layer_vertex x : st.antichain) {
            st.output_activation_bytes += g[x].activation_bytes();
            past |= k.anc[x];
            past.insert(x);
        }
        past.for_each([&](std::size_t v) {
            st.compute_ms += g[v].compute_ms();
            st.forward_ms += g[v].forward_ms;
            st.activation_bytes += g[v].activation_bytes();
            st.parameter_bytes += g[v].parameter_bytes;
        });
    }
    for (layer_vertex v = 0; v < k.n; ++v) dag.layer_compute_ms.push_back(g[v].compute_ms());
    for (std::size_t p = 0; p < n; ++p) dag.ancestors_of_state[p].for_each([&](std::size_t q) {
        dag.states[p].ancestors.push_back(q);
    });
    return dag;
}

}  // namespace pipeplan::partition
