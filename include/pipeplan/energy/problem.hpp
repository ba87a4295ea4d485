// pipeplan/energy/problem.hpp — a schedule's computations with their time–energy options, and
// the time and energy of a frequency plan, replayed through the simulator.
//
// Energy of a plan (Perseus's accounting): every op's energy at its frequency, plus the idle
// power of every device for the time it waits within the iteration:
//   energy_j = sum_ops E_op + idle_power_w * (devices * makespan_ms - sum_ops t_op) * 1e-3.
// Equivalently sum_ops (E_op - idle_power_w * t_op * 1e-3) + idle_power_w * devices *
// makespan_ms * 1e-3: an op's "cost" is its energy minus what the GPU would draw idle meanwhile.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/energy/profile.hpp"
#include "pipeplan/schedule/op_graph.hpp"
#include "pipeplan/schedule/simulator.hpp"

namespace pipeplan::energy {

/// The computations of one schedule on one scenario and how each can run.
struct energy_problem {
    const schedule::scenario* sc = nullptr;            ///< must outlive the problem
    const schedule::pipeline_schedule* sched = nullptr;  ///< must outlive the problem
    schedule::op_graph graph;                          ///< from the simulator's timing model
    std::vector<std::vector<energy_point>> options;    ///< [op id]: Pareto in effective energy, fastest first
    double idle_power_w = 0.0;

    [[nodiscard]] std::size_t size() const noexcept { return options.size(); }
};

/// Index of the option each op runs at (0 = fastest); [op id].
using frequency_choice = std::vector<std::uint16_t>;

/// Throws invalid_argument naming the schedule, device and pair when `sched` overlaps a forward
/// with a backward (op::overlaps_next, e.g. dualpipe-v). Frequency planning has no sound model
/// of such a pair: the profile measures F and B each alone at each clock, while a pair runs both
/// at one clock, and how much they overlap at a lower clock (timing.hpp's overlap factor) and
/// what they draw together are not measured.
inline void require_no_overlapped_pairs(const schedule::pipeline_schedule& sched) {
    for (std::size_t d = 0; d < sched.orders.size(); ++d)
        for (std::size_t p = 0; p + 1 < sched.orders[d].size(); ++p)
            if (sched.orders[d][p].overlaps_next)
                throw invalid_argument("energy: schedule '" + sched.name + "' overlaps forward " +
                                       schedule::op_label(sched, sched.orders[d][p]) + " with backward " +
                                       schedule::op_label(sched, sched.orders[d][p + 1]) + " on device " + std::to_string(d) +
                                       ": frequency planning has no model of an overlapped pair (the energy profile "
                                       "measures F and B alone); plan the clocks of a schedule without pairs, e.g. zb-v");
}

/// Builds the problem: each op's curve is the profile's curve for its kind on its device (the
/// pipeline rank), scaled to the op's simulated duration (scale_curve); its options are the
/// Pareto front of that curve in (time, energy − idle power · time), as Perseus filters its
/// candidates, so the slowest option is the op's minimum-effective-energy clock. Throws
/// invalid_argument for a schedule with overlapped pairs (require_no_overlapped_pairs()).
[[nodiscard]] inline energy_problem make_energy_problem(const schedule::scenario& sc,
                                                        const schedule::pipeline_schedule& sched,
                                                        const energy_profile& profile) {
    require_no_overlapped_pairs(sched);
    energy_problem p;
    p.sc = &sc;
    p.sched = &sched;
    p.graph = schedule::make_op_graph(sc, sched);
    p.idle_power_w = profile.idle_power_w;
    if (!std::isfinite(p.idle_power_w) || p.idle_power_w < 0.0)
        throw invalid_argument(profile.source + ": the idle power must be finite and >= 0");
    p.options.reserve(p.graph.size());
    for (std::size_t i = 0; i < p.graph.size(); ++i) {
        p.options.push_back(pareto_front(scale_curve(profile.curve(p.graph.ops[i].kind, p.graph.device[i]), p.graph.duration_ms[i]),
                                         p.idle_power_w));
        if (p.options.back().size() > 65535) throw invalid_argument("energy: more than 65535 frequencies for one op");
    }
    return p;
}

/// Every op at its fastest option (the top clock).
[[nodiscard]] inline frequency_choice all_fastest(const energy_problem& p) { return frequency_choice(p.size(), 0); }

/// Every op at its minimum-energy option (the slowest Pareto point): Perseus's starting plan,
/// each op at the clock that minimises energy − idle power · time over all its clocks (with
/// idle power 0, the minimum-energy clock).
[[nodiscard]] inline frequency_choice all_min_energy(const energy_problem& p) {
    frequency_choice c(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) c[i] = static_cast<std::uint16_t>(p.options[i].size() - 1);
    return c;
}

/// The frequency (MHz) of each op under `c`.
[[nodiscard]] inline std::vector<double> frequencies_mhz(const energy_problem& p, const frequency_choice& c) {
    std::vector<double> f(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) f[i] = p.options[i][c[i]].frequency_mhz;
    return f;
}

/// The op durations (ms) under `c`, in op-id order (simulation_options::duration_ms).
[[nodiscard]] inline std::vector<double> durations_ms(const energy_problem& p, const frequency_choice& c) {
    if (c.size() != p.size()) throw invalid_argument("energy: a plan needs one frequency per op");
    std::vector<double> d(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
        if (c[i] >= p.options[i].size()) throw invalid_argument("energy: option index out of range");
        d[i] = p.options[i][c[i]].time_ms;
    }
    return d;
}

/// The index of `frequency_mhz` among op i's options; throws when the op has no such option.
[[nodiscard]] inline std::uint16_t option_of(const energy_problem& p, std::size_t i, double frequency_mhz) {
    for (std::size_t k = 0; k < p.options[i].size(); ++k)
        if (p.options[i][k].frequency_mhz == frequency_mhz) return static_cast<std::uint16_t>(k);
    throw invalid_argument("energy: op " + std::to_string(i) + " has no Pareto-optimal option at " +
                           std::to_string(frequency_mhz) + " MHz");
}

/// Time and energy of one plan.
struct plan_cost {
    double time_ms = 0.0;
    double energy_j = 0.0;
};

/// Energy (J) of `c` for an iteration of `makespan_ms` (see the file comment).
[[nodiscard]] inline double plan_energy_j(const energy_problem& p, const frequency_choice& c, double makespan_ms) {
    double e = 0.0, busy_ms = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        e += p.options[i][c[i]].energy_j;
        busy_ms += p.options[i][c[i]].time_ms;
    }
    const double idle_ms = std::max(0.0, static_cast<double>(p.graph.devices()) * makespan_ms - busy_ms);
    return e + p.idle_power_w * idle_ms * 1e-3;
}

/// Replays `c` through the simulator (op durations from the plan) into `r` and returns its
/// time and energy. `opt.duration_ms` is set here; the rest of `opt` is honoured.
inline plan_cost replay(const energy_problem& p, const frequency_choice& c, schedule::simulator& sim,
                        schedule::simulation_result* r = nullptr, schedule::simulation_options opt = {}) {
    const std::vector<double> d = durations_ms(p, c);
    opt.duration_ms = d;
    if (!r) {
        opt.record_timeline = opt.record_memory_curve = opt.compute_lower_bound = false;
        const schedule::simulation_result& res = sim.run(*p.sc, *p.sched, opt);
        return {res.makespan_ms, plan_energy_j(p, c, res.makespan_ms)};
    }
    *r = sim.run(*p.sc, *p.sched, opt);
    return {r->makespan_ms, plan_energy_j(p, c, r->makespan_ms)};
}

/// replay() with a fresh simulator.
[[nodiscard]] inline plan_cost replay(const energy_problem& p, const frequency_choice& c) {
    schedule::simulator sim;
    return replay(p, c, sim);
}

}  // namespace pipeplan::energy
