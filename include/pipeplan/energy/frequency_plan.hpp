// pipeplan/energy/frequency_plan.hpp — what each rank runs: a GPU frequency per computation,
// and the plan's replay drawn as an SVG Gantt chart coloured by frequency and as a Chrome trace.
//
// The per-device lists follow the device orders of the schedule (op ids), which is the order a
// rank executes and would issue set_frequency before each computation.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "pipeplan/energy/problem.hpp"
#include "pipeplan/schedule/svg.hpp"
#include "pipeplan/schedule/trace.hpp"

namespace pipeplan::energy {

/// One computation of a rank with its clock.
struct frequency_step {
    schedule::op o;
    double frequency_mhz = 0.0;
    double time_ms = 0.0;   ///< its duration at that clock
    double energy_j = 0.0;  ///< its energy at that clock
};

/// Per device (rank), in execution order: the clock of every computation under `c`.
[[nodiscard]] inline std::vector<std::vector<frequency_step>> frequency_plan(const energy_problem& p,
                                                                              const frequency_choice& c) {
    const auto& g = p.graph;
    std::vector<std::vector<frequency_step>> plan(g.devices());
    for (std::size_t d = 0; d < g.devices(); ++d)
        for (std::uint32_t i = g.first_of_device[d]; i < g.first_of_device[d + 1]; ++i) {
            const energy_point& x = p.options[i][c[i]];
            plan[d].push_back({g.ops[i], x.frequency_mhz, x.time_ms, x.energy_j});
        }
    return plan;
}

namespace detail {

/// Frequency of each op of a timeline, looked up by (kind, micro-batch, stage).
class frequency_lookup {
public:
    frequency_lookup(const energy_problem& p, const frequency_choice& c)
        : M_(p.sc->microbatches), mhz_(p.sc->microbatches * p.sc->stages * 5, 0.0) {
        for (std::size_t i = 0; i < p.size(); ++i) mhz_[key(p.graph.ops[i])] = p.options[i][c[i]].frequency_mhz;
    }
    [[nodiscard]] double operator()(const schedule::op& o) const { return mhz_[key(o)]; }

private:
    [[nodiscard]] std::size_t key(const schedule::op& o) const noexcept {
        return (o.stage * M_ + o.microbatch) * 5 + static_cast<std::size_t>(o.kind);
    }
    std::size_t M_;
    std::vector<double> mhz_;
};

/// Colour of a clock between lo and hi: blue (slow) through green to red (fast).
inline std::string frequency_colour(double mhz, double lo, double hi) {
    const double x = hi > lo ? std::clamp((mhz - lo) / (hi - lo), 0.0, 1.0) : 1.0;
    char b[40];
    std::snprintf(b, sizeof b, "hsl(%.0f,75%%,55%%)", 240.0 * (1.0 - x));
    return b;
}

/// Lowest and highest clock among all ops' options.
inline std::pair<double, double> frequency_range(const energy_problem& p) {
    double lo = 1e300, hi = 0.0;
    for (const auto& o : p.options)
        for (const auto& x : o) {
            lo = std::min(lo, x.frequency_mhz);
            hi = std::max(hi, x.frequency_mhz);
        }
    return {lo, hi};
}

}  // namespace detail

/// Replays `c` (timeline and memory recorded) and draws it: op boxes coloured by clock (blue
/// = lowest Pareto clock of any op, red = highest; the legend shows the scale, and the op kinds
/// by pattern and letter, not by colour), the title's makespan is the plan's.
inline void write_frequency_svg(std::ostream& out, const energy_problem& p, const frequency_choice& c,
                                schedule::svg_options o = {}) {
    schedule::simulator sim;
    schedule::simulation_result r;
    (void)replay(p, c, sim, &r);
    const detail::frequency_lookup mhz(p, c);
    const auto [lo, hi] = detail::frequency_range(p);
    o.op_fill = [&, lo = lo, hi = hi](const schedule::op_timing& t) { return detail::frequency_colour(mhz(t.o), lo, hi); };
    o.colour_legend = "colour = GPU clock (op kind: pattern and letter)";
    o.colour_scale.clear();
    for (int i = 0; i <= 4; ++i) {  // five swatches from the lowest to the highest clock
        const double mhz_i = lo + (hi - lo) * i / 4.0;
        char text[32];
        std::snprintf(text, sizeof text, "%.0f MHz", mhz_i);
        o.colour_scale.emplace_back(detail::frequency_colour(mhz_i, lo, hi), text);
    }
    schedule::write_svg(out, r, *p.sched, o);
}

/// Replays `c` and writes its Chrome trace; every op's args carry `frequency_mhz`.
inline void write_frequency_trace(std::ostream& out, const energy_problem& p, const frequency_choice& c) {
    schedule::simulator sim;
    schedule::simulation_result r;
    (void)replay(p, c, sim, &r);
    const detail::frequency_lookup mhz(p, c);
    schedule::write_chrome_trace(out, r, *p.sched, [&](const schedule::op_timing& t) {
        char b[48];
        std::snprintf(b, sizeof b, "\"frequency_mhz\":%.0f", mhz(t.o));
        return std::string(b);
    });
}

}  // namespace pipeplan::energy
