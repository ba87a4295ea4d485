// An independent reference replay for the schedule tests: a different algorithm from the
// simulator's (repeated sweeps over the devices instead of events and successor lists; op
// times looked up by name), written from the rules of docs/schedules.md. Free network only.
// Golden makespans are checked against it and against the library.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "pipeplan/schedule.hpp"

namespace pipeplan::test {

struct reference_result {
    bool deadlock = false;
    double makespan_ms = 0.0;
    std::vector<double> peak_mb;  // per device
};

/// Replays `s` on `sc` (which must have a free network): every op starts when its device is
/// free and its inputs ended.
inline reference_result reference_replay(const schedule::scenario& sc, const schedule::pipeline_schedule& s) {
    namespace ps = pipeplan::schedule;
    REQUIRE(sc.network.is_free());
    using key = std::tuple<char, std::uint32_t, std::uint32_t>;  // 'A' = any forward, 'R', 'B', 'W'
    std::set<key> has_r, checkpointed;
    for (const auto& dev : s.orders)
        for (const ps::op& o : dev) {
            if (o.kind == ps::op_kind::R) has_r.insert({'R', o.microbatch, o.stage});
            if (o.kind == ps::op_kind::F_checkpoint) checkpointed.insert({'A', o.microbatch, o.stage});
        }
    const double w = s.w_share;
    const std::size_t V = sc.stages, D = s.orders.size();
    std::map<key, double> done;
    auto ended = [&](key k, double& t) {
        const auto it = done.find(k);
        if (it == done.end()) return false;
        t = std::max(t, it->second);
        return true;
    };
    std::vector<std::size_t> pos(D, 0);
    std::vector<double> free_at(D, 0.0);
    reference_result out;
    for (bool moved = true; moved;) {
        moved = false;
        for (std::size_t d = 0; d < D; ++d)
            while (pos[d] < s.orders[d].size()) {
                // An op's readiness (raising t to its inputs' end) and its duration alone.
                auto look = [&](const ps::op o, double& t, double& dur) {
                    const std::uint32_t j = o.microbatch, v = o.stage;
                    const double fw = sc.fwd(j, v), bw = sc.bwd(j, v);
                    bool ready = true;
                    switch (o.kind) {
                        case ps::op_kind::F:
                        case ps::op_kind::F_checkpoint:
                            if (v > 0) ready = ended({'A', j, v - 1}, t);
                            dur = fw;
                            break;
                        case ps::op_kind::R:
                            ready = ended({'A', j, v}, t);
                            dur = fw;
                            break;
                        case ps::op_kind::B: {
                            const bool explicit_r = has_r.count({'R', j, v}) > 0;
                            ready = ended(explicit_r ? key{'R', j, v} : key{'A', j, v}, t);
                            if (v + 1 < V) ready = ended({'B', j, v + 1}, t) && ready;
                            dur = bw * (1.0 - w);
                            if (!explicit_r && checkpointed.count({'A', j, v})) dur += sc.ratio(v) * fw;
                            break;
                        }
                        case ps::op_kind::W:
                            ready = ended({'B', j, v}, t);
                            dur = bw * w;
                            break;
                    }
                    return ready;
                };
                const ps::op o = s.orders[d][pos[d]];
                const bool pair = o.overlaps_next && pos[d] + 1 < s.orders[d].size();
                double t = free_at[d], dur = 0.0, dur2 = 0.0;
                bool ready = look(o, t, dur);
                if (pair) {  // overlapped F&B: max of the two plus factor times the shorter
                    ready = look(s.orders[d][pos[d] + 1], t, dur2) && ready;
                    dur = std::max(dur, dur2) + s.overlap_factor * std::min(dur, dur2);
                }
                if (!ready) break;
                for (std::size_t k = 0; k < (pair ? 2u : 1u); ++k) {
                    const ps::op x = s.orders[d][pos[d]];
                    const char name = ps::is_forward(x.kind) ? 'A' : ps::letter(x.kind);
                    done[{name, x.microbatch, x.stage}] = t + dur;
                    ++pos[d];
                }
                free_at[d] = t + dur;
                out.makespan_ms = std::max(out.makespan_ms, t + dur);
                moved = true;
            }
    }
    for (std::size_t d = 0; d < D; ++d) out.deadlock = out.deadlock || pos[d] < s.orders[d].size();
    // Memory: walk each device's order; what each (mb, stage) holds after its ops.
    out.peak_mb.assign(D, 0.0);
    for (std::size_t d = 0; d < D; ++d) {
        double state = 0.0;
        for (std::size_t c = 0; c < s.placement.chunks(); ++c) state += sc.model_state_mb[s.placement.stage_of(d, c)];
        std::map<std::pair<std::uint32_t, std::uint32_t>, double> held;
        double total = state, peak = state;
        // What (mb, stage) holds after op o alone.
        auto after = [&](const ps::op o) {
            const double st = sc.stored(o.microbatch, o.stage), r = sc.ratio(o.stage);
            if (o.kind == ps::op_kind::F || o.kind == ps::op_kind::R) return st;
            if (o.kind == ps::op_kind::F_checkpoint) return (1.0 - r) * st + sc.activation(o.microbatch);
            if (o.kind == ps::op_kind::B) return w > 0.0 ? w * st : 0.0;
            return 0.0;
        };
        const auto& ord = s.orders[d];
        for (std::size_t p = 0; p < ord.size(); ++p) {
            const ps::op o = ord[p];
            double& h = held[{o.microbatch, o.stage}];
            if (o.overlaps_next && p + 1 < ord.size()) {  // both parts' peaks on top of the rest
                const ps::op b = ord[++p];
                double& hb = held[{b.microbatch, b.stage}];
                peak = std::max(peak, total - h - hb + sc.peak(o.microbatch, o.stage) + sc.peak(b.microbatch, b.stage));
                total += after(o) - h + after(b) - hb;
                h = after(o);
                hb = after(b);
                continue;
            }
            peak = std::max(peak, total - h + (o.kind == ps::op_kind::W ? h : sc.peak(o.microbatch, o.stage)));
            total += after(o) - h;
            h = after(o);
        }
        out.peak_mb[d] = peak;
    }
    return out;
}

}  // namespace pipeplan::test
