// pipeplan/partition/pipedream.hpp — PipeDream's hierarchical partitioning dynamic program (SOSP'19).
//
// Reproduces optimizer/optimizer_graph_hierarchical.py of msr-fiddle/pipedream number for
// number. On the states 0..n-1 of the antichain DAG (antichain.hpp), with cumulative compute
// C, activation and parameter bytes P and output activations O, level l of the hierarchy has
// W_l workers (each a whole level l-1 when l > 1) joined at B_l bytes/s:
//
//   one stage of states (i, j] on r workers   T = (C(i, j] + 4 (r-1) P(i, j] / (B r)) / r
//   a cut after state k, next stage on r       2 O_k / (B r) / compression  (activations + grads)
//   A(j, m) = min over a last stage (k, j] on r <= m of max(A(k, m - r), T_last, cut times)
//
// with PipeDream's quirks kept: a pipeline's first stage divides its weight-sync time by the
// size of one lower-level worker, later stages do not; a stage's output transfer counts unless
// it ends at the last state; a stage is skipped under the memory limit when
// (activations + parameters) × ⌈(W − workers used so far) / r⌉ exceeds it. Level l's best time
// on all W_l workers becomes level l+1's compute time of each range. The top level's A is the
// time per minibatch; data parallelism on the same workers is (C + 4 (W-1) P / (B W) / W_{l-1}) / W
// level by level. Straight pipelines give every stage one worker (exactly W stages).
//
// Where several partitions tie, the printed one is the one PipeDream's optimizer prints with its
// Python sets iterated in the orders antichain.hpp names (unpatched, they iterate in object-address
// order and PipeDream's printout changes from run to run): each cell keeps its one-stage value
// unless a candidate is strictly faster, candidates come in PipeDream's loop order (the last
// stage's start k ascending, then its workers r ascending), and the DP evaluates PipeDream's
// formulas in PipeDream's unit, seconds, with its operations in its order (each state's compute
// is the sum of (forward + backward) ms / 1000 over its layers in file order), because the last
// bits of those sums decide near-ties. The results are reported in ms.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/partition/antichain.hpp"
#include "pipeplan/partition/layer_graph.hpp"

namespace pipeplan::partition {

/// One level of the hierarchy: `workers` units (each a whole lower level) at `bandwidth`.
struct hierarchy_level {
    int workers = 1;
    double bandwidth_bytes_per_s = 1e9;
};

/// The optimizer's options (PipeDream's command-line flags).
struct pipedream_options {
    std::vector<hierarchy_level> levels;  ///< lowest first (PipeDream's `-n` and `-b` order)
    bool straight_pipeline = false;       ///< no replication: one worker per stage
    double activation_compression = 1.0;  ///< divides activation transfer times (> 0)
    std::optional<double> memory_limit_bytes;  ///< per worker (PipeDream's --use_memory_constraint -s)

    /// Throws invalid_argument naming the first bad field.
    void validate() const {
        if (levels.empty()) throw invalid_argument("pipedream options: at least one level (-n) is needed");
        for (std::size_t l = 0; l < levels.size(); ++l) {
            if (levels[l].workers < 1)
                throw invalid_argument("pipedream options: level " + std::to_string(l + 1) + " workers = " +
                                       std::to_string(levels[l].workers) + " is invalid (must be >= 1)");
            if (!(levels[l].bandwidth_bytes_per_s > 0) || !std::isfinite(levels[l].bandwidth_bytes_per_s))
                throw invalid_argument("pipedream options: level " + std::to_string(l + 1) +
                                       " bandwidth must be finite and > 0 bytes/s");
        }
        if (!(activation_compression > 0) || !std::isfinite(activation_compression))
            throw invalid_argument("pipedream options: activation compression must be finite and > 0");
        if (memory_limit_bytes && !(*memory_limit_bytes > 0))
            throw invalid_argument("pipedream options: memory limit must be > 0 bytes");
    }
};

/// One stage of a level: states [start, end) of the antichain order on `replicas` workers.
struct pipedream_stage {
    std::size_t start = 0, end = 0;
    int replicas = 1;
    double compute_ms = 0;   ///< compute of the range / replicas
    double comm_ms = 0;      ///< data-parallel weight sync / replicas (PipeDream's printout)
    double transfer_ms = 0;  ///< max of the input and output activation transfers (0 at the ends)
    [[nodiscard]] double time_ms() const noexcept { return std::max(compute_ms + comm_ms, transfer_ms); }
};

/// One level's result.
struct pipedream_level {
    int level = 1;  ///< 1 = lowest
    int workers = 1;
    double bandwidth_bytes_per_s = 0;
    std::vector<pipedream_stage> stages;  ///< all of this level's stages, in pipeline order
    double time_per_minibatch_ms = 0;     ///< slowest sub-pipeline of this level (top: the pipeline)
    double bottleneck_stage_ms = 0;       ///< max over stages of time_ms()
};

/// The optimizer's answer.
struct pipedream_result {
    std::vector<pipedream_level> levels;  ///< lowest first; the last is the top level
    double time_per_minibatch_ms = 0;     ///< the top level's A(n-1, W-1)
    double data_parallel_ms = 0;          ///< data parallelism on the same workers
    double single_worker_ms = 0;          ///< all compute on one worker
    [[nodiscard]] double speedup_over_dp() const noexcept { return data_parallel_ms / time_per_minibatch_ms; }
    std::size_t states = 0;               ///< antichain DAG size
};

namespace detail {

/// Milliseconds per second: the DP works in PipeDream's seconds, its results are in ms.
inline constexpr double ms_per_s = 1000.0;

/// The DP's table of one level: A[i][j][m] (PipeDream's layout) with rows 1..n only on
/// lower levels.
struct dp_cell {
    double time_s = std::numeric_limits<double>::quiet_NaN();  ///< NaN: infeasible (Python's None)
    std::size_t split_k = 0;      ///< last stage starts after state split_k ...
    int split_m = -1;             ///< ... the rest uses split_m + 1 workers (-1: one stage)
    int replicas = 0;
    [[nodiscard]] bool ok() const noexcept { return !std::isnan(time_s); }
};

class pipedream_table {
public:
    pipedream_table(std::size_t rows, std::size_t n, int workers)
        : n_(n), w_(static_cast<std::size_t>(workers)), cells_(rows * n * w_) {}
    dp_cell& at(std::size_t i, std::size_t j, int m) { return cells_[(i * n_ + j) * w_ + static_cast<std::size_t>(m)]; }
    [[nodiscard]] const dp_cell& at(std::size_t i, std::size_t j, int m) const {
        return cells_[(i * n_ + j) * w_ + static_cast<std::size_t>(m)];
    }

private:
    std::size_t n_, w_;
    std::vector<dp_cell> cells_;
};

/// PipeDream's per-state compute time (s): (forward + backward) ms / 1000 summed over the
/// state's layers in file order, the operations PipeDream's optimizer performs.
[[nodiscard]] inline std::vector<double> state_compute_s(const antichain_dag& dag) {
    std::vector<double> out(dag.states.size(), 0.0);
    for (std::size_t p = 0; p < out.size(); ++p)
        dag.layers_up_to[p].for_each([&](std::size_t v) { out[p] += dag.layer_compute_ms[v] / ms_per_s; });
    return out;
}

/// Range sums of PipeDream's compute_times (s) / activation_sizes / parameter_sizes: row 0 is
/// the prefix up to j, row i >= 1 the range (i-1, j]; NaN for j < i. Compute times come from
/// the states until a lower level replaces them with its best times (then they are a table).
struct range_sums {
    const antichain_dag* dag = nullptr;
    std::vector<double> compute_s;  ///< state_compute_s(*dag)
    std::vector<double> replaced;  ///< (n+1) x n once a lower level ran; empty before
    std::size_t n = 0;
    [[nodiscard]] double time_s(std::size_t i, std::size_t j) const {
        if (!replaced.empty()) return replaced[i * n + j];
        if (j < i) return std::numeric_limits<double>::quiet_NaN();
        return i == 0 ? compute_s[j] : compute_s[j] - compute_s[i - 1];
    }
    [[nodiscard]] double sum(double antichain_state::*field, std::size_t i, std::size_t j) const {
        const auto& s = dag->states;
        return i == 0 ? s[j].*field : s[j].*field - s[i - 1].*field;
    }
};

[[nodiscard]] inline double ceil_ratio(int a, int b) { return std::ceil(static_cast<double>(a) / b); }

/// Fills row i's one-stage cells (PipeDream's first loop).
inline void fill_single_stages(pipedream_table& A, const range_sums& sums, std::size_t i, const pipedream_options& opt, int W,
                               double bw, int within) {
    const std::size_t n = sums.n;
    const int max_m = opt.straight_pipeline ? 1 : W;
    for (std::size_t j = i; j < n; ++j) {
        const double compute = sums.time_s(i, j);
        const double act = sums.sum(&antichain_state::activation_bytes, i, j);
        const double par = sums.sum(&antichain_state::parameter_bytes, i, j);
        for (int m = 0; m < max_m; ++m) {
            const double stashed = ceil_ratio(W - (m + 1), m + 1) * (act + par);
            if (opt.memory_limit_bytes && stashed > *opt.memory_limit_bytes) continue;
            const double sync = 4.0 * m * par / (bw * (m + 1)) / within;
            if (std::isnan(compute)) continue;
            A.at(i, j, m) = dp_cell{(compute + sync) / (m + 1), 0, -1, m + 1};
        }
    }
}

/// Fills row i's multi-stage cells (PipeDream's second loop). Loops run j, k, m, r instead of
/// PipeDream's m, j, k, r so that the range sums of (k, j] are computed once; every cell still
/// sees its candidates in PipeDream's order (k, then r; the first strictly better one wins) and
/// the same arithmetic, so ties break the same way.
inline void fill_pipelines(pipedream_table& A, const range_sums& sums, std::size_t i, const pipedream_options& opt, int W,
                           double bw) {
    const antichain_dag& dag = *sums.dag;
    const std::size_t n = sums.n;
    const double c = opt.activation_compression;
    const int max_r_all = opt.straight_pipeline ? 1 : W - 1;
    std::vector<double> stage_t(static_cast<std::size_t>(max_r_all) + 1);  // last stage on r workers
    for (std::size_t j = i + 1; j < n; ++j) {
        const double out_2o = 2.0 * dag.states[j].output_activation_bytes;
        for (std::size_t k : dag.states[j].ancestors) {
            if (i > 0 && dag.ancestors_of_state[i - 1].contains(k)) continue;
            const double compute = sums.time_s(k + 1, j);
            if (std::isnan(compute)) continue;
            const double par = sums.sum(&antichain_state::parameter_bytes, k + 1, j);
            const double stash = sums.sum(&antichain_state::activation_bytes, k + 1, j) + par;
            const double in_2o = 2.0 * dag.states[k].output_activation_bytes;
            for (int r = 1; r <= max_r_all; ++r) {
                const double last = (compute + 4.0 * (r - 1) * par / (bw * r)) / r;
                const double in_t = in_2o / (bw * r) / c;
                const double out_t = j + 1 < n ? out_2o / (bw * r) / c : 0.0;
                stage_t[static_cast<std::size_t>(r)] = std::max({last, in_t, out_t});
            }
            for (int m = 1; m < W; ++m) {
                dp_cell& best = A.at(i, j, m);
                const int max_r = opt.straight_pipeline ? 1 : m;
                for (int r = 1; r <= max_r; ++r) {
                    if (opt.memory_limit_bytes && stash * ceil_ratio(W - (m + 1), r) > *opt.memory_limit_bytes) continue;
                    const dp_cell& rest = A.at(i, k, m - r);
                    if (!rest.ok()) continue;
                    const double t = std::max(rest.time_s, stage_t[static_cast<std::size_t>(r)]);
                    if (!best.ok() || best.time_s > t) best = dp_cell{t, k, m - r, r};
                }
            }
        }
    }
}

/// Walks the choices of A[start][end-1][W-1] back into stages [start, end) (PipeDream's
/// analyze_partitioning, with the correct ranges).
[[nodiscard]] inline std::vector<pipedream_stage> trace_stages(const pipedream_table& A, const antichain_dag& dag,
                                                               std::size_t start, std::size_t end, int W, double bw,
                                                               double compression) {
    std::vector<pipedream_stage> rev;
    std::size_t j = end - 1;
    int m = W - 1;
    for (;;) {
        const dp_cell& cell = A.at(start, j, m);
        pipedream_stage s;
        s.end = j + 1;
        s.start = cell.split_m < 0 ? start : cell.split_k + 1;
        s.replicas = cell.replicas;
        rev.push_back(s);
        if (cell.split_m < 0) break;
        j = cell.split_k;
        m = cell.split_m;
    }
    std::reverse(rev.begin(), rev.end());
    const auto& st = dag.states;
    for (auto& s : rev) {
        const double r = s.replicas;
        const double compute_ms = st[s.end - 1].compute_ms - (s.start > 0 ? st[s.start - 1].compute_ms : 0.0);
        const double par = st[s.end - 1].parameter_bytes - (s.start > 0 ? st[s.start - 1].parameter_bytes : 0.0);
        s.compute_ms = compute_ms / r;
        s.comm_ms = ms_per_s * 4.0 * (r - 1) * par / (bw * r) / r;
        const double in_s = s.start > start ? 2.0 * st[s.start - 1].output_activation_bytes / (bw * r) / compression : 0;
        const double out_s = s.end < end ? 2.0 * st[s.end - 1].output_activation_bytes / (bw * r) / compression : 0;
        s.transfer_ms = ms_per_s * std::max(in_s, out_s);
    }
    return rev;
}

}  // namespace detail

/// The most memory the lower levels' dynamic-program tables may take (bytes).
inline constexpr double max_table_bytes = 4e9;

/// Runs PipeDream's hierarchical optimizer on the antichain DAG `dag`. Throws invalid_argument
/// for bad options and pipeplan::error when no partition satisfies them (e.g. a memory limit
/// nothing fits, or a straight pipeline with more workers than states).
[[nodiscard]] inline pipedream_result optimize_pipedream(const antichain_dag& dag, const pipedream_options& opt) {
    opt.validate();
    const std::size_t n = dag.states.size();
    detail::range_sums sums{&dag, detail::state_compute_s(dag), {}, n};
    if (opt.levels.size() > 1) {
        // Lower levels fill (n+1) x n x W cells: refuse what would not fit in memory.
        const double cells = static_cast<double>(n + 1) * static_cast<double>(n);
        double bytes = cells * sizeof(double);
        for (std::size_t l = 0; l + 1 < opt.levels.size(); ++l) bytes += cells * opt.levels[l].workers * sizeof(detail::dp_cell);
        if (bytes > max_table_bytes)
            throw error("pipedream optimizer: " + std::to_string(n) + " antichain states need " +
                        std::to_string(static_cast<long long>(bytes / 1e6)) +
                        " MB of tables for the lower levels (limit " + std::to_string(static_cast<long long>(max_table_bytes / 1e6)) +
                        " MB); use one level or a smaller graph");
    }
    std::vector<detail::pipedream_table> tables;
    int within = 1;
    for (std::size_t l = 0; l < opt.levels.size(); ++l) {
        const bool top = l + 1 == opt.levels.size();
        const int W = opt.levels[l].workers;
        const double bw = opt.levels[l].bandwidth_bytes_per_s;
        const std::size_t rows = top ? 1 : n + 1;
        tables.emplace_back(rows, n, W);
        auto& A = tables.back();
        for (std::size_t i = 0; i < rows; ++i) detail::fill_single_stages(A, sums, i, opt, W, bw, within);
        for (std::size_t i = 0; i < rows; ++i) detail::fill_pipelines(A, sums, i, opt, W, bw);
        if (!top) {
            std::vector<double> next((n + 1) * n);
            for (std::size_t i = 0; i <= n; ++i)
                for (std::size_t j = 0; j < n; ++j) next[i * n + j] = A.at(i, j, W - 1).time_s;
            sums.replaced = std::move(next);
        }
        within = W;
    }
    pipedream_result res;
    res.states = n;
    const auto& top = tables.back();
    const int W_top = opt.levels.back().workers;
    if (!top.at(0, n - 1, W_top - 1).ok())
        throw error("pipedream optimizer: no partition satisfies the options (memory limit, or a straight "
                    "pipeline with more workers than the " + std::to_string(n) + " states)");
    res.time_per_minibatch_ms = detail::ms_per_s * top.at(0, n - 1, W_top - 1).time_s;

    // Walk down the levels: each stage of a level is partitioned by the level below.
    std::vector<std::pair<std::size_t, std::size_t>> ranges{{0, n}};
    res.levels.resize(opt.levels.size());
    for (std::size_t l = opt.levels.size(); l-- > 0;) {
        auto& out = res.levels[l];
        out.level = static_cast<int>(l + 1);
        out.workers = opt.levels[l].workers;
        out.bandwidth_bytes_per_s = opt.levels[l].bandwidth_bytes_per_s;
        std::vector<std::pair<std::size_t, std::size_t>> next;
        for (const auto& [start, end] : ranges) {
            const auto& cell = tables[l].at(start, end - 1, out.workers - 1);
            out.time_per_minibatch_ms = std::max(out.time_per_minibatch_ms, detail::ms_per_s * cell.time_s);
            for (auto& s : detail::trace_stages(tables[l], dag, start, end, out.workers,
                                                out.bandwidth_bytes_per_s, opt.activation_compression)) {
                if (l > 0)  // a unit of this level runs the range as the level below's pipeline
                    s.compute_ms = detail::ms_per_s *
                                   tables[l - 1].at(s.start, s.end - 1, opt.levels[l - 1].workers - 1).time_s / s.replicas;
                next.push_back({s.start, s.end});
                out.bottleneck_stage_ms = std::max(out.bottleneck_stage_ms, s.time_ms());
                out.stages.push_back(s);
            }
        }
        ranges = std::move(next);
    }

    const double total_param = dag.states.back().parameter_bytes;
    res.single_worker_ms = dag.states.back().compute_ms;
    double dp_s = sums.compute_s.back();  // PipeDream's formula in its unit
    within = 1;
    for (const auto& lv : opt.levels) {
        dp_s = (dp_s + 4.0 * (lv.workers - 1) * total_param / (lv.bandwidth_bytes_per_s * lv.workers) / within) /
               lv.workers;
        within = lv.workers;
    }
    res.data_parallel_ms = detail::ms_per_s * dp_s;
    return res;
}

/// Marks every layer of `g` with its stage in `res` (the lowest level's stages, in order):
/// a layer goes to the first stage whose last state has it in its past; the inputs go to
/// stage 0, a set-aside "__getitem__" sink to its producer's stage.
inline void assign_stages(layer_graph& g, const antichain_dag& dag, const pipedream_result& res) {
    for (auto v : boost::make_iterator_range(boost::vertices(g))) g[v].stage_id.reset();
    int stage = 0;
    for (const auto& s : res.levels.front().stages) {
        dag.layers_up_to[s.end - 1].for_each([&](std::size_t v) {
            if (!g[v].stage_id) g[v].stage_id = stage;
        });
        ++stage;
    }
    for (auto v : dag.inputs) g[v].stage_id = 0;
    for (auto v : dag.dropped_sinks) {
        int k = 0;
        for (auto [e, end] = boost::in_edges(v, g); e != end; ++e)
            k = std::max(k, g[boost::source(*e, g)].stage_id.value_or(0));
        g[v].stage_id = k;
    }
    for (auto v : boost::make_iterator_range(boost::vertices(g)))
        if (!g[v].stage_id) g[v].stage_id = stage - 1;  // unreachable from the first layer
}

}  // namespace pipeplan::partition
