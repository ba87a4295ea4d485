// pipeplan/partition/layer_graph.hpp — a model as a DAG of layers, and PipeDream's graph.txt.
//
// A layer graph is a Boost.Graph `adjacency_list` (vectors, bidirectional) whose vertices carry
// a `layer_node` bundle: PipeDream's profile of one layer (forward / backward time in ms for one
// minibatch, output activation bytes, parameter bytes) and, once partitioned, its stage.
// Edges carry the order they were read in, so a graph is written back exactly as it was read.
//
// graph.txt (PipeDream's profiler and optimizer; docs/formats.md), one item per line:
//   node: `<id> -- <description> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
//          activation_size=<bytes or [a; b; ...]>, parameter_size=<bytes>[ -- stage_id=<k>]`
//   edge: a line starting with a tab: `\t<src id> -- <dst id>`
// A list of activation sizes (a layer with several outputs) counts as its sum. Errors (unknown
// node in an edge, a duplicate id, a bad number, a cycle, a malformed line) throw
// pipeplan::input_error naming the file and line.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"

namespace pipeplan::partition {

/// One layer's profile (PipeDream's node).
struct layer_node {
    std::string id;           ///< node id, e.g. "node4" (unique in a graph)
    std::string description;  ///< e.g. "Conv2d(3, 64, ...)"; "Input..." marks an input
    double forward_ms = 0;    ///< forward time of one minibatch
    double backward_ms = 0;   ///< backward time of one minibatch
    /// Output activation bytes; several for a layer with several outputs (their sum counts).
    std::vector<double> activation_parts_bytes;
    double parameter_bytes = 0;
    std::optional<int> stage_id;  ///< set in a partitioned graph

    [[nodiscard]] double activation_bytes() const noexcept {
        double s = 0;
        for (double a : activation_parts_bytes) s += a;
        return s;
    }
    [[nodiscard]] double compute_ms() const noexcept { return forward_ms + backward_ms; }
};

/// An edge's position among the graph's edges (the order they are written in).
struct layer_edge {
    std::size_t order = 0;
};

using layer_graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, layer_node,
                                          layer_edge>;
using layer_vertex = boost::graph_traits<layer_graph>::vertex_descriptor;

/// Adds a node; returns its vertex.
inline layer_vertex add_layer(layer_graph& g, layer_node node) { return boost::add_vertex(std::move(node), g); }

/// Adds an edge u -> v after the existing ones (in write order).
inline void add_dependency(layer_graph& g, layer_vertex u, layer_vertex v) {
    boost::add_edge(u, v, layer_edge{boost::num_edges(g)}, g);
}

/// A topological order of the vertices (Kahn's algorithm, smallest index first among the
/// ready ones); empty optional when the graph has a cycle, with `on_cycle` set to a vertex on it.
[[nodiscard]] inline std::optional<std::vector<layer_vertex>> topological_order(const layer_graph& g,
                                                                               layer_vertex* on_cycle = nullptr) {
    const std::size_t n = boost::num_vertices(g);
    std::vector<std::size_t> indegree(n, 0);
    for (layer_vertex v = 0; v < n; ++v) indegree[v] = boost::in_degree(v, g);
    std::vector<layer_vertex> order, ready;
    order.reserve(n);
    for (layer_vertex v = n; v-- > 0;)
        if (indegree[v] == 0) ready.push_back(v);
    while (!ready.empty()) {
        const layer_vertex v = ready.back();
        ready.pop_back();
        order.push_back(v);
        for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
            if (--indegree[boost::target(*e, g)] == 0) ready.push_back(boost::target(*e, g));
    }
    if (order.size() == n) return order;
    if (on_cycle != nullptr)
        for (layer_vertex v = 0; v < n; ++v)
            if (indegree[v] > 0) {
                *on_cycle = v;
                break;
            }
    return std::nullopt;
}

namespace detail {

/// Ranges of a graph's values: times (ms) and sizes (bytes); sums over any graph stay finite.
inline constexpr double max_graph_time_ms = 1e9;
inline constexpr double max_graph_bytes = 1e18;

[[nodiscard]] inline double parse_graph_number(std::string_view text, const std::string& source, std::size_t line,
                                               const std::string& field) {
    const double hi = field.find("time") != std::string::npos ? max_graph_time_ms : max_graph_bytes;
    double v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size() || !std::isfinite(v) || v < 0 || v > hi)
        throw input_error(source, line, field,
                          "'" + printable(text) + "' is not a number in " + range_text(0, hi) +
                              (hi == max_graph_time_ms ? " ms" : " bytes"));
    return v;
}

/// The value of `key=value` (the key must match).
[[nodiscard]] inline std::string_view graph_field(std::string_view item, std::string_view key,
                                                  const std::string& source, std::size_t line) {
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || item.substr(0, eq) != key)
        throw input_error(source, line, std::string(key),
                          "expected '" + std::string(key) + "=...', found '" + std::string(item) + "'");
    return item.substr(eq + 1);
}

/// Splits `s` on `sep`.
[[nodiscard]] inline std::vector<std::string_view> split_on(std::string_view s, std::string_view sep) {
    std::vector<std::string_view> out;
    std::size_t pos = 0;
    for (;;) {
        const auto next = s.find(sep, pos);
        if (next == std::string_view::npos) {
            out.push_back(s.substr(pos));
            return out;
        }
        out.push_back(s.substr(pos, next - pos));
        pos = next + sep.size();
    }
}

[[nodiscard]] inline std::vector<double> parse_activation(std::string_view v, const std::string& source,
                                                          std::size_t line) {
    std::vector<double> parts;
    if (!v.empty() && v.front() == '[') {
        if (v.back() != ']') throw input_error(source, line, "activation_size", "unterminated list");
        for (auto item : split_on(v.substr(1, v.size() - 2), "; "))
            parts.push_back(parse_graph_number(item, source, line, "activation_size"));
    } else {
        parts.push_back(parse_graph_number(v, source, line, "activation_size"));
    }
    return parts;
}

[[nodiscard]] inline layer_node parse_node_line(std::string_view text, const std::string& source, std::size_t line) {
    auto tokens = split_on(text, " -- ");
    std::optional<int> stage;
    if (tokens.size() >= 4 && tokens.back().starts_with("stage_id=")) {
        const auto v = graph_field(tokens.back(), "stage_id", source, line);
        int k = 0;
        const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), k);
        if (ec != std::errc{} || p != v.data() + v.size() || k < 0)
            throw input_error(source, line, "stage_id", "'" + std::string(v) + "' is not a stage number");
        stage = k;
        tokens.pop_back();
    }
    if (tokens.size() < 3)
        throw input_error(source, line, "", "expected '<id> -- <description> -- <metadata>'");
    layer_node n;
    n.id = std::string(tokens.front());
    if (n.id.empty()) throw input_error(source, line, "id", "empty node id");
    for (std::size_t i = 1; i + 1 < tokens.size(); ++i) {
        if (i > 1) n.description.append(" -- ");
        n.description.append(tokens[i]);
    }
    const auto meta = split_on(tokens.back(), ", ");
    if (meta.size() != 4)
        throw input_error(source, line, "",
                          "expected forward_compute_time, backward_compute_time, activation_size, parameter_size");
    n.forward_ms = parse_graph_number(graph_field(meta[0], "forward_compute_time", source, line), source, line,
                                      "forward_compute_time");
    n.backward_ms = parse_graph_number(graph_field(meta[1], "backward_compute_time", source, line), source, line,
                                       "backward_compute_time");
    n.activation_parts_bytes = parse_activation(graph_field(meta[2], "activation_size", source, line), source, line);
    n.parameter_bytes = parse_graph_number(graph_field(meta[3], "parameter_size", source, line), source, line,
                                           "parameter_size");
    n.stage_id = stage;
    return n;
}

[[nodiscard]] inline std::string format_graph_number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
}

}  // namespace detail

/// Parses graph.txt text; `source` names it in errors. Edges may name only nodes defined on
/// an earlier line (as PipeDream's reader requires).
[[nodiscard]] inline layer_graph parse_layer_graph(std::string_view text, const std::string& source) {
    layer_graph g;
    std::unordered_map<std::string, layer_vertex> by_id;
    std::vector<std::size_t> vertex_line;
    std::size_t pos = 0, line = 0;
    while (pos < text.size()) {
        ++line;
        auto end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view l = text.substr(pos, end - pos);
        pos = end + 1;
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        if (l.find_first_not_of(" \t") == std::string_view::npos) continue;
        if (l.front() == '\t') {
            const auto ends = detail::split_on(l.substr(1), " -- ");
            if (ends.size() != 2) throw input_error(source, line, "edge", "expected '\\t<src id> -- <dst id>'");
            layer_vertex uv[2]{};
            for (int k = 0; k < 2; ++k) {
                const auto it = by_id.find(std::string(ends[static_cast<std::size_t>(k)]));
                if (it == by_id.end())
                    throw input_error(source, line, "edge",
                                      "unknown node '" + std::string(ends[static_cast<std::size_t>(k)]) + "'");
                uv[k] = it->second;
            }
            add_dependency(g, uv[0], uv[1]);
            continue;
        }
        layer_node n = detail::parse_node_line(l, source, line);
        if (by_id.contains(n.id))
            throw input_error(source, line, "id",
                              "duplicate node id '" + n.id + "' (first on line " +
                                  std::to_string(vertex_line[by_id[n.id]]) + ")");
        const std::string id = n.id;
        by_id.emplace(id, add_layer(g, std::move(n)));
        vertex_line.push_back(line);
    }
    layer_vertex on_cycle = 0;
    if (!topological_order(g, &on_cycle))
        throw input_error(source, vertex_line[on_cycle], "edge",
                          "the graph has a cycle through node '" + g[on_cycle].id + "'");
    return g;
}

/// Reads a graph.txt file (input_error when it cannot be opened or is malformed).
[[nodiscard]] inline layer_graph read_layer_graph(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw input_error(path.string(), 0, "", "cannot open file");
    std::ostringstream ss;
    ss << in.rdbuf();
    return parse_layer_graph(ss.str(), path.string());
}

/// The graph in graph.txt format: nodes in vertex order, then edges in their order; numbers
/// with three decimals (as PipeDream writes them); ` -- stage_id=<k>` where a stage is set.
[[nodiscard]] inline std::string format_layer_graph(const layer_graph& g) {
    std::string out;
    for (layer_vertex v = 0; v < boost::num_vertices(g); ++v) {
        const layer_node& n = g[v];
        out.append(n.id).append(" -- ").append(n.description).append(" -- forward_compute_time=");
        out.append(detail::format_graph_number(n.forward_ms)).append(", backward_compute_time=");
        out.append(detail::format_graph_number(n.backward_ms)).append(", activation_size=");
        if (n.activation_parts_bytes.size() == 1) {
            out.append(detail::format_graph_number(n.activation_parts_bytes.front()));
        } else {
            out.append("[");
            for (std::size_t i = 0; i < n.activation_parts_bytes.size(); ++i)
                out.append(i > 0 ? "; " : "").append(detail::format_graph_number(n.activation_parts_bytes[i]));
            out.append("]");
        }
        out.append(", parameter_size=").append(detail::format_graph_number(n.parameter_bytes));
        if (n.stage_id) out.append(" -- stage_id=").append(std::to_string(*n.stage_id));
        out.append("\n");
    }
    std::vector<std::pair<std::size_t, std::pair<layer_vertex, layer_vertex>>> edges;
    for (auto [e, end] = boost::edges(g); e != end; ++e)
        edges.push_back({g[*e].order, {boost::source(*e, g), boost::target(*e, g)}});
    std::sort(edges.begin(), edges.end());
    for (const auto& [order, uv] : edges) out.append("\t").append(g[uv.first].id).append(" -- ").append(g[uv.second].id).append("\n");
    return out;
}

/// Writes the graph to `path` atomically (core/file.hpp).
inline void write_layer_graph(const std::filesystem::path& path, const layer_graph& g) {
    write_file_atomically(path, format_layer_graph(g));
}

}  // namespace pipeplan::partition
