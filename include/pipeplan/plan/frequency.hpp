// pipeplan/plan/frequency.hpp — per-computation GPU clocks (Perseus's frequency plans) as
// `set_frequency` instructions in execution plans.
//
//   auto steps = energy::frequency_plan(problem, chosen.point.choice);  // per rank, program order
//   execution_plan q = insert_frequency_changes(plan, steps);
//
//   // or in one go, from a planned iteration (its replica-0 scenario and schedule):
//   energy_plan e = plan_energy(plan, scenario, schedule, energy::a100_profile(), target_ms);
//
// insert_frequency_changes is a pure lowering pass: it walks each rank's compute ops in
// program order alongside that rank's frequency steps (which follow the schedule's device
// order, as lowering does), checks that both name the same op (kind, micro-batch of the
// rank's replica, stage), and puts a set_frequency right before a compute op whenever the
// op's clock differs from the clock the rank runs at (before its first compute op always).
// Clocks are whole MHz (GPUs set whole MHz; a profile's clock is rounded to the nearest).
// Nothing else changes: buffers, messages and their order stay as they were, so the plan
// stays valid. The plan tier uses the energy tier here, never the reverse.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/energy/frequency_plan.hpp"
#include "pipeplan/energy/frontier.hpp"
#include "pipeplan/plan/export.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/plan/validate.hpp"

namespace pipeplan::plan {

/// The plan with a set_frequency before every compute op whose clock differs from the rank's
/// current one (see the file comment). `steps[r]` lists rank r's compute ops in program order
/// with their clocks (energy::frequency_plan gives them for one replica: ranks = devices).
/// Throws invalid_argument when the counts or the ops disagree, or a clock is not > 0, or the
/// plan already holds set_frequency instructions.
[[nodiscard]] inline execution_plan insert_frequency_changes(const execution_plan& p,
                                                             const std::vector<std::vector<energy::frequency_step>>& steps) {
    if (steps.size() != p.programs.size())
        throw invalid_argument("insert_frequency_changes: " + std::to_string(steps.size()) + " ranks of clocks for a plan of " +
                               std::to_string(p.programs.size()) + " ranks (one frequency plan per replica is needed)");
    const std::vector<std::uint32_t> local = local_microbatch_numbers(p.header);
    execution_plan out{p.header, {}};
    out.programs.reserve(p.programs.size());
    for (std::size_t r = 0; r < p.programs.size(); ++r) {
        const rank_program& prog = p.programs[r];
        rank_program q = prog;
        q.instructions.clear();
        q.instructions.reserve(prog.instructions.size() + steps[r].size());
        const auto where = [&](std::size_t k) { return "insert_frequency_changes: rank " + std::to_string(r) + ", compute op " + std::to_string(k); };
        std::size_t k = 0;
        std::uint64_t current_mhz = 0;
        for (const instruction& x : prog.instructions) {
            if (x.kind == instr_kind::set_frequency) throw invalid_argument(where(k) + ": the plan already sets clocks");
            if (is_compute(x.kind)) {
                if (k >= steps[r].size()) throw invalid_argument(where(k) + ": no clock given for it");
                const energy::frequency_step& s = steps[r][k];
                const instruction want = detail::compute_instruction(s.o, false);
                if (want.kind != x.kind || s.o.stage != x.stage || x.microbatch >= local.size() || s.o.microbatch != local[x.microbatch])
                    throw invalid_argument(where(k) + " (" + kind_name(x.kind) + " mb " + std::to_string(x.microbatch) + " stage " +
                                           std::to_string(x.stage) + "): the clocks are for another op");
                if (!(s.frequency_mhz >= 0.5) || !(s.frequency_mhz < 4294967295.0))
                    throw invalid_argument(where(k) + ": clock " + std::to_string(s.frequency_mhz) + " MHz is not > 0");
                const auto mhz = static_cast<std::uint32_t>(std::llround(s.frequency_mhz));
                if (mhz != current_mhz) q.instructions.push_back(make_set_frequency(mhz, x));
                current_mhz = mhz;
                ++k;
            }
            q.instructions.push_back(x);
        }
        if (k != steps[r].size())
            throw invalid_argument("insert_frequency_changes: rank " + std::to_string(r) + " runs " + std::to_string(k) +
                                   " compute ops, the clocks are for " + std::to_string(steps[r].size()));
        out.programs.push_back(std::move(q));
    }
    return out;
}

/// The clocks a plan sets, per rank, one per compute op in program order (0 before the rank's
/// first set_frequency): what an executor's set_frequency handler would have applied.
[[nodiscard]] inline std::vector<std::vector<std::uint64_t>> compute_op_clocks_mhz(const execution_plan& p) {
    std::vector<std::vector<std::uint64_t>> out(p.programs.size());
    for (std::size_t r = 0; r < p.programs.size(); ++r) {
        std::uint64_t current = 0;
        for (const instruction& x : p.programs[r].instructions) {
            if (x.kind == instr_kind::set_frequency) current = frequency_mhz(x);
            if (is_compute(x.kind)) out[r].push_back(current);
        }
    }
    return out;
}

/// What plan_energy returns. `problem` points into the scenario and schedule it was given.
struct energy_plan {
    energy::energy_problem problem;
    energy::frontier_result frontier;
    energy::chosen_point chosen;      ///< the frontier point for the target (or the fastest)
    execution_plan plan;              ///< with set_frequency; predicted makespan = chosen time
    schedule::simulation_result simulation;  ///< the chosen clocks replayed (timeline recorded)
    std::uint64_t min_frequency_mhz = 0, max_frequency_mhz = 0;  ///< the profile's clock range
};

/// Perseus on a planned iteration: the time–energy frontier of (`sc`, `sched`) under
/// `profile`, the point for `target_ms` (nullopt: the minimum time), and `p` (the plan lowered
/// from that scenario and schedule, one replica) with its clocks as set_frequency
/// instructions; the result is validated with the profile's clock range (plan_error).
/// `sc` and `sched` must outlive the result.
[[nodiscard]] inline energy_plan plan_energy(const execution_plan& p, const schedule::scenario& sc,
                                             const schedule::pipeline_schedule& sched, const energy::energy_profile& profile,
                                             std::optional<double> target_ms, const energy::frontier_options& fo = {}) {
    if (p.header.dp != 1)
        throw invalid_argument("plan_energy: the plan has " + std::to_string(p.header.dp) +
                               " data-parallel replicas; the frontier is computed for one (dp = 1)");
    energy_plan e;
    e.problem = energy::make_energy_problem(sc, sched, profile);
    e.frontier = energy::compute_frontier(e.problem, fo);
    e.chosen = target_ms ? energy::choose_for_target(e.problem, e.frontier, *target_ms)
                         : energy::choose_min_time(e.problem, e.frontier);
    e.plan = insert_frequency_changes(p, energy::frequency_plan(e.problem, e.chosen.point.choice));
    e.plan.header.predicted_makespan_ms = e.chosen.point.time_ms;
    schedule::simulator sim;
    (void)energy::replay(e.problem, e.chosen.point.choice, sim, &e.simulation);
    const auto [lo, hi] = energy::detail::frequency_range(e.problem);
    e.min_frequency_mhz = static_cast<std::uint64_t>(std::floor(lo));
    e.max_frequency_mhz = static_cast<std::uint64_t>(std::ceil(hi));
    validate_options vo;
    vo.min_frequency_mhz = e.min_frequency_mhz;
    vo.max_frequency_mhz = e.max_frequency_mhz;
    validate_or_throw(e.plan, vo);
    return e;
}

}  // namespace pipeplan::plan
