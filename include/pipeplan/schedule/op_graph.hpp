// pipeplan/schedule/op_graph.hpp — the computation DAG of a schedule, from the simulator's model.
//
// The nodes are the schedule's ops by op id (device 0's ops in order, then device 1's, ...: the
// ids simulation_options::duration_ms uses); the edges are
// - device order: each op after the previous op of its device (delay 0);
// - data: the simulator's dependencies (timing.hpp's data flow: forward output to the next
//   stage, gradient to the previous stage, F/R to B, B to W), built by the simulator's own
//   detail::build_nodes over op_index, durations from timing.hpp's op_model. A message between
//   two devices delays its edge by the network's latency + wire time of op_model's message size.
// The earliest-start times of this DAG are the simulator's start times whenever links never
// queue (a free network, or at most one message at a time per link); the simulator also models
// link queueing, which a DAG with fixed delays cannot. Overlapped forward/backward pairs
// (op::overlaps_next: two ops that start together) are not edges of a DAG: make_op_graph()
// refuses schedules that hold them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipeplan/schedule/simulator.hpp"

namespace pipeplan::schedule {

/// The computation DAG of a schedule on a scenario (see the file comment).
struct op_graph {
    struct edge {
        std::uint32_t from = 0;
        std::uint32_t to = 0;
        double delay_ms = 0.0;  ///< time between the end of `from` and the earliest start of `to`
    };
    std::vector<op> ops;                          ///< by op id
    std::vector<std::uint32_t> device;            ///< [op id]
    std::vector<double> duration_ms;              ///< [op id], the scenario's durations
    std::vector<std::uint32_t> first_of_device;   ///< device d owns ids [first[d], first[d+1])
    std::vector<edge> edges;                      ///< device-order edges first, then data edges

    [[nodiscard]] std::size_t size() const noexcept { return ops.size(); }
    [[nodiscard]] std::size_t devices() const noexcept {
        return first_of_device.empty() ? 0 : first_of_device.size() - 1;
    }
};

/// Builds the op graph of `sched` on `sc`; throws pipeplan::invalid_argument as simulate()
/// does for a malformed schedule, and for one with overlapped pairs (the file comment).
[[nodiscard]] inline op_graph make_op_graph(const scenario& sc, const pipeline_schedule& sched) {
    op_index idx;
    idx.build(sc, sched);
    for (std::size_t i = 0; i < idx.ops.size(); ++i)
        if (idx.pair_head(i))
            throw invalid_argument("op graph: schedule '" + sched.name + "' overlaps forward " + op_label(sched, idx.ops[i]) +
                                   " with a backward: overlapped pairs are not modelled by the op graph");
    std::vector<detail::sim_node> nodes;
    std::vector<std::uint32_t> pending;
    detail::build_nodes(idx, sc, sched.w_share, nodes, pending);
    op_graph g;
    const op_model model(sc, sched.w_share);
    const std::size_t N = idx.ops.size();
    g.ops = idx.ops;
    g.first_of_device = idx.first_of_device;
    g.device.resize(N);
    g.duration_ms.resize(N);
    for (std::size_t i = 0; i < N; ++i) {
        g.device[i] = idx.device_of_stage[idx.ops[i].stage];
        g.duration_ms[i] = nodes[i].dur;
    }
    for (std::size_t d = 0; d + 1 < g.first_of_device.size(); ++d)
        for (std::uint32_t i = g.first_of_device[d] + 1; i < g.first_of_device[d + 1]; ++i)
            g.edges.push_back({i - 1, i, 0.0});
    for (std::size_t i = 0; i < N; ++i)
        for (const std::int32_t succ : {nodes[i].cross, nodes[i].local}) {
            if (succ == op_index::none) continue;
            const auto to = static_cast<std::uint32_t>(succ);
            const std::size_t a = g.device[i], b = g.device[to];
            const double delay =
                a == b ? 0.0 : sc.network.latency(a, b) + sc.network.wire_ms(model.message_mb(g.ops[i]), a, b);
            g.edges.push_back({static_cast<std::uint32_t>(i), to, delay});
        }
    return g;
}

}  // namespace pipeplan::schedule
