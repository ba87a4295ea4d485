// Shared property checks for the schedule tests.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "pipeplan/schedule.hpp"

namespace pipeplan::test {

namespace ps = pipeplan::schedule;

/// Two stages, two micro-batches: stage 0 forward 1 ms, stage 1 forward 2 ms, backward twice the
/// forward; stored 10 MB, peak 20 MB, model state 100 MB per stage; messages of `act_mb`.
inline ps::scenario two_stage(double act_mb, ps::network_model nw) {
    return ps::make_scenario({{1, 2}, {1, 2}}, {{2, 4}, {2, 4}}, {{10, 10}, {10, 10}}, {{20, 20}, {20, 20}}, {100, 100},
                             {act_mb, act_mb}, nw);
}

/// A seeded random scenario: S stages, M micro-batches with varying sizes, optional network.
inline ps::scenario random_scenario(std::size_t S, std::size_t M, std::uint64_t seed, bool network = false) {
    ps::splitmix64 rng(seed);
    auto uni = [&](double lo, double hi) {
        return lo + (hi - lo) * static_cast<double>(rng() >> 11) / static_cast<double>(1ull << 53);
    };
    std::vector<double> stage_f(S);
    for (auto& x : stage_f) x = uni(1.0, 4.0);
    std::vector<std::vector<double>> f(M), b(M), st(M), pk(M);
    std::vector<double> act(M);
    for (std::size_t j = 0; j < M; ++j) {
        const double m = uni(0.3, 2.0);
        act[j] = 10.0 * m;
        for (std::size_t s = 0; s < S; ++s) {
            f[j].push_back(stage_f[s] * m);
            b[j].push_back(stage_f[s] * m * uni(1.5, 2.5));
            st[j].push_back(100.0 * m);
            pk[j].push_back(100.0 * m * uni(1.0, 2.0));
        }
    }
    ps::network_model nw;
    if (network) {
        nw.latency_ms = 0.3;
        nw.bandwidth_gbps = 100.0;
        nw.intra_node_latency_ms = 0.05;
        nw.intra_node_bandwidth_gbps = 400.0;
        nw.devices_per_node = 2;
    }
    return ps::make_scenario(f, b, st, pk, std::vector<double>(S, 1000.0), act, nw);
}

/// S stages, M equal micro-batches: forward f and backward b ms per stage, model state 100 MB,
/// stored 10 MB, peak 20 MB, no communication.
inline ps::scenario uniform_scenario(std::size_t S, std::size_t M, double f = 1.0, double b = 2.0) {
    return ps::scaled_scenario(std::vector<double>(S, f), std::vector<double>(M, 1.0), b / f, 100, 10, 20);
}

/// Checks the invariants every simulated schedule must satisfy; returns the result.
inline ps::simulation_result check_schedule(const ps::scenario& sc, const ps::pipeline_schedule& s) {
    const ps::simulation_result r = ps::simulate(sc, s);
    const std::size_t V = sc.stages, M = sc.microbatches, D = s.placement.devices();
    REQUIRE(r.timeline.size() == D);
    // Each op exactly once; gather times by (kind, mb, stage).
    std::map<std::tuple<char, std::uint32_t, std::uint32_t>, ps::op_timing> at;
    for (std::size_t d = 0; d < D; ++d)
        for (const auto& t : r.timeline[d]) {
            CHECK(s.placement.device_of(t.o.stage) == d);
            const char k = (t.o.kind == ps::op_kind::F_checkpoint) ? 'F' : ps::letter(t.o.kind);
            const bool inserted = at.emplace(std::make_tuple(k, t.o.microbatch, t.o.stage), t).second;
            CHECK_MESSAGE(inserted, "duplicate op " << ps::to_string(t.o));
            CHECK(t.end_ms >= t.start_ms);
        }
    const bool split = s.w_share > 0.0;
    for (std::uint32_t j = 0; j < M; ++j)
        for (std::uint32_t v = 0; v < V; ++v) {
            REQUIRE(at.count({'F', j, v}) == 1);
            REQUIRE(at.count({'B', j, v}) == 1);
            if (split) REQUIRE(at.count({'W', j, v}) == 1);
            const auto& F = at[{'F', j, v}];
            const auto& B = at[{'B', j, v}];
            constexpr double eps = 1e-9;
            if (v + 1 < V) {
                CHECK(F.end_ms <= at[{'F', j, v + 1}].start_ms + eps);
                CHECK(at[{'B', j, v + 1}].end_ms <= B.start_ms + eps);
            }
            CHECK(F.end_ms <= B.start_ms + eps);
            if (at.count({'R', j, v})) {
                CHECK(F.end_ms <= at[{'R', j, v}].start_ms + eps);
                CHECK(at[{'R', j, v}].end_ms <= B.start_ms + eps);
            }
            if (split) CHECK(B.end_ms <= at[{'W', j, v}].start_ms + eps);
        }
    std::size_t expected = M * V * (split ? 3 : 2);
    std::size_t got = 0, recomputes = 0;
    for (const auto& dev : r.timeline) got += dev.size();
    for (const auto& [k, t] : at) recomputes += std::get<0>(k) == 'R';
    CHECK(got == expected + recomputes);
    // No device runs two ops at once (the two parts of an overlapped pair run as one).
    for (const auto& dev : r.timeline) {
        std::vector<ps::op_timing> v;
        for (std::size_t i = 0; i < dev.size(); ++i) {
            if (i > 0 && dev[i - 1].o.overlaps_next) {
                CHECK(dev[i].start_ms == dev[i - 1].start_ms);
                CHECK(dev[i].end_ms == dev[i - 1].end_ms);
                continue;
            }
            v.push_back(dev[i]);
        }
        std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.start_ms < b.start_ms; });
        for (std::size_t i = 1; i < v.size(); ++i) CHECK(v[i - 1].end_ms <= v[i].start_ms + 1e-9);
    }
    // Memory returns to the model state; makespan >= lower bound.
    for (std::size_t d = 0; d < D; ++d) {
        double model = 0.0;
        for (std::size_t c = 0; c < s.placement.chunks(); ++c) model += sc.model_state_mb[s.placement.stage_of(d, c)];
        CHECK(r.final_memory_mb[d] == doctest::Approx(model));
        CHECK(r.peak_memory_mb[d] >= model);
        CHECK(r.bubble_fraction[d] >= -1e-12);
        CHECK(r.bubble_fraction[d] <= 1.0);
    }
    CHECK(r.makespan_ms >= r.lower_bound_ms - 1e-9);
    CHECK(r.makespan_over_lower_bound >= 1.0 - 1e-12);
    return r;
}

/// Per stage, the largest number of micro-batches whose forward started and backward has not
/// finished (linear placements).
inline std::vector<std::size_t> peak_inflight(const ps::simulation_result& r) {
    std::vector<std::size_t> out;
    for (const auto& dev : r.timeline) {
        std::vector<std::pair<double, int>> ev;
        for (const auto& t : dev) {
            if (ps::is_forward(t.o.kind)) ev.emplace_back(t.start_ms, +1);
            if (t.o.kind == ps::op_kind::B) ev.emplace_back(t.end_ms, -1);
        }
        std::sort(ev.begin(), ev.end());  // at equal times a release (-1) sorts first
        long cur = 0, best = 0;
        for (const auto& e : ev) best = std::max(best, cur += e.second);
        out.push_back(static_cast<std::size_t>(best));
    }
    return out;
}

inline std::string joined(const std::vector<ps::op>& ops) {
    std::string s;
    for (const auto& o : ops) s += (s.empty() ? "" : " ") + ps::to_string(o);
    return s;
}

}  // namespace pipeplan::test
