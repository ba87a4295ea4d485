// pipeplan/schedule/zero_bubble.hpp — ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR'24) with the backward split into the input gradient B and the weight gradient W.
//
// ZB-H1 keeps 1F1B's memory (at most S - s micro-batches in flight on stage s, counted until
// their W ran) and moves W passes into the bubbles: B is on the critical path (it feeds the
// stage upstream), W is not. For unequal micro-batches a hand-written ZB-H1 table is wrong as
// soon as op lengths differ, so pipeplan discovers the order with the greedy engine of
// order_discovery.hpp: ready B first, else a forward if the in-flight limit (and memory limit)
// allows, else a pending W. With equal micro-batches this reproduces ZB-H1's shape: warm-up
// forwards, 1F1B steady state, W ops filling the waits and the drain.
#pragma once

#include <cstddef>
#include <limits>

#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/order_discovery.hpp"

namespace pipeplan::schedule {

/// ZB-H1 on a linear placement (see the file comment).
struct zb_h1 {
    /// Share of each backward's time that is weight gradient (W); the rest is B. 0.5 when the
    /// cost model does not split the backward.
    double w_share = 0.5;
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< per device

    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        if (!(w_share > 0.0 && w_share < 1.0)) throw invalid_argument("zb_h1: w_share must lie in (0, 1)");
        pipeline_schedule s;
        s.name = "zb-h1";
        s.placement = stage_placement::linear(sc.stages);
        s.w_share = w_share;
        discovery_policy pol;
        pol.schedule = s.name;
        pol.memory_limit_mb = memory_limit_mb;
        pol.w_share = w_share;
        pol.inflight_limit.resize(sc.stages);
        for (std::size_t d = 0; d < sc.stages; ++d) pol.inflight_limit[d] = sc.stages - d;
        discovery_result r = discover_order(sc, s.placement, pol);
        s.orders = std::move(r.orders);
        s.replay = replay_facts{r.makespan_ms, memory_limit_mb};
        return s;
    }
};

}  // namespace pipeplan::schedule
