// set_frequency instructions (plan/frequency.hpp): insertion from an energy frontier point,
// every consumer (validator, binary and JSON round trips, torch CSV, Chrome trace), and
// plan_energy on a planned iteration.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/plan/export.hpp"
#include "pipeplan/plan/frequency.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/serialize.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

namespace {

/// The expected clock of every compute op per rank: the chosen option's frequency, rounded.
std::vector<std::vector<std::uint64_t>> expected_clocks(const energy::energy_problem& p, const energy::frequency_choice& c) {
    std::vector<std::vector<std::uint64_t>> out;
    for (const auto& dev : energy::frequency_plan(p, c)) {
        out.emplace_back();
        for (const auto& s : dev) out.back().push_back(static_cast<std::uint64_t>(std::llround(s.frequency_mhz)));
    }
    return out;
}

execution_plan without_clocks(execution_plan p) {
    for (auto& prog : p.programs)
        std::erase_if(prog.instructions, [](const instruction& x) { return x.kind == instr_kind::set_frequency; });
    return p;
}

std::size_t count_clock_changes(const std::vector<std::uint64_t>& clocks) {
    std::size_t n = 0;
    for (std::size_t k = 0; k < clocks.size(); ++k) n += k == 0 || clocks[k] != clocks[k - 1];
    return n;
}

}  // namespace

TEST_CASE("frequency: set_frequency is a built-in kind with its clock in whole MHz") {
    CHECK(parse_kind("set_frequency") == instr_kind::set_frequency);
    CHECK(category(instr_kind::set_frequency) == kind_category::clock);
    CHECK_FALSE(is_compute(instr_kind::set_frequency));
    CHECK_FALSE(is_message(instr_kind::set_frequency));
    instruction f;
    f.kind = instr_kind::backward;
    f.microbatch = 3;
    f.stage = 1;
    f.shape = {2, 128, 0, 64};
    const instruction s = make_set_frequency(1215, f);
    CHECK(frequency_mhz(s) == 1215);
    CHECK(s.microbatch == 3);
    CHECK(s.stage == 1);
    CHECK(s.shape == f.shape);
}

TEST_CASE("frequency: insertion follows the frontier's clocks on every schedule and every consumer keeps them") {
    const auto profile = energy::a100_profile();
    for (const auto& c : test::all_schedules(test::random_scenario(4, 6, 11))) {
        INFO(c.name);
        const execution_plan base = lower(c.sc, c.sched);
        REQUIRE(validate(base).ok());
        bool pairs = false;  // the op graph under the energy problem does not model overlapped pairs
        for (const auto& o : c.sched.orders)
            for (const auto& x : o) pairs |= x.overlaps_next;
        if (pairs) {
            CHECK_THROWS_AS((void)energy::make_energy_problem(c.sc, c.sched, profile), invalid_argument);
            continue;
        }
        const auto problem = energy::make_energy_problem(c.sc, c.sched, profile);
        const auto frontier = energy::compute_frontier(problem);
        // the fastest point, a middle one and the slowest
        for (std::size_t k : {std::size_t(0), frontier.frontier.size() / 2, frontier.frontier.size() - 1}) {
            const auto& choice = frontier.frontier[k].choice;
            const execution_plan p = insert_frequency_changes(base, energy::frequency_plan(problem, choice));
            validate_options vo;
            vo.min_frequency_mhz = 210;
            vo.max_frequency_mhz = 1410;
            const auto rep = validate(p, vo);
            INFO(rep.to_string());
            CHECK(rep.ok());
            const auto want = expected_clocks(problem, choice);
            CHECK(compute_op_clocks_mhz(p) == want);
            for (std::size_t r = 0; r < p.programs.size(); ++r) {
                std::size_t n = 0;
                for (const auto& x : p.programs[r].instructions) n += x.kind == instr_kind::set_frequency;
                CHECK(n == count_clock_changes(want[r]));  // only where the clock changes
            }
            CHECK(without_clocks(p) == base);  // nothing else changed
            CHECK(execution_plan_from_binary(to_binary(p), "mem") == p);
            CHECK(execution_plan_from_json(to_json_text(p), "mem") == p);
            CHECK(to_torch_csv(p, true) == to_torch_csv(base, true));  // torch has no clock action
        }
    }
}

TEST_CASE("frequency: the validator's clock rule") {
    const auto sc = test::random_scenario(3, 4, 5);
    const auto cases = test::all_schedules(sc);
    const auto& c = cases.front();
    const execution_plan base = lower(c.sc, c.sched);
    const auto problem = energy::make_energy_problem(c.sc, c.sched, energy::a100_profile());
    const execution_plan good = insert_frequency_changes(base, energy::frequency_plan(problem, energy::all_min_energy(problem)));
    REQUIRE(validate(good).ok());
    std::size_t at = 0;
    while (good.programs[0].instructions[at].kind != instr_kind::set_frequency) ++at;
    const auto has_rule = [](const validation_report& r, const std::string& rule, const std::string& text) {
        for (const auto& v : r.violations)
            if (v.rule == rule && v.message.find(text) != std::string::npos) return true;
        return false;
    };
    SUBCASE("out of the profile's range, or zero") {
        validate_options vo;
        vo.min_frequency_mhz = 1000;
        vo.max_frequency_mhz = 1410;
        CHECK(has_rule(validate(good, vo), "clock", "outside [1000, 1410] MHz"));  // the lowest clocks are < 1000
        execution_plan bad = good;
        bad.programs[0].instructions[at].clock_mhz = 0;
        CHECK(has_rule(validate(bad), "clock", "outside (0, inf) MHz"));
    }
    SUBCASE("a clock on another kind, bytes on a set_frequency: files hold both in one field") {
        execution_plan bad = good;
        bad.programs[0].instructions[at + 1].clock_mhz = 1200;  // the compute op after it
        CHECK(has_rule(validate(bad), "clock", "clock_mhz 1200 on an instruction that is not a set_frequency"));
        bad = good;
        bad.programs[0].instructions[at].bytes = 64;
        CHECK(has_rule(validate(bad), "clock", "bytes 64 on a set_frequency"));
    }
    SUBCASE("not right before its compute op") {
        execution_plan bad = good;
        auto& prog = bad.programs[0].instructions;
        std::swap(prog[at], prog[at + 1]);
        CHECK(has_rule(validate(bad), "clock", "not immediately before a compute op"));
        bad = good;
        bad.programs[0].instructions[at].microbatch ^= 1;
        bad.programs[0].instructions[at].shape = bad.header.microbatches[bad.programs[0].instructions[at].microbatch].shape;
        CHECK(has_rule(validate(bad), "clock", "not immediately before a compute op"));
    }
    SUBCASE("on a stage of another rank") {
        execution_plan bad = good;
        bad.programs[0].instructions[at].stage = 1;
        CHECK(has_rule(validate(bad), "structure", "stage runs on device"));
    }
    SUBCASE("insertion checks its input") {
        auto steps = energy::frequency_plan(problem, energy::all_min_energy(problem));
        CHECK_THROWS_WITH_AS(insert_frequency_changes(good, steps), doctest::Contains("already sets clocks"), invalid_argument);
        auto short_steps = steps;
        short_steps[0].pop_back();
        CHECK_THROWS_WITH_AS(insert_frequency_changes(base, short_steps), doctest::Contains("no clock given"), invalid_argument);
        auto swapped = steps;
        std::swap(swapped[0][0], swapped[0][1]);
        CHECK_THROWS_WITH_AS(insert_frequency_changes(base, swapped), doctest::Contains("the clocks are for another op"),
                             invalid_argument);
        steps.pop_back();
        CHECK_THROWS_AS(insert_frequency_changes(base, steps), invalid_argument);
    }
}

TEST_CASE("frequency: plan_energy on a planned iteration; the trace carries the clocks") {
    const analytic_cost_model model = make_analytic_model("gpt-6.7b");
    std::vector<batching::sample> batch;
    splitmix64 rng(9);
    for (int i = 0; i < 48; ++i) batch.push_back({16 + static_cast<int>(rng.below(700)), 1 + static_cast<int>(rng.below(60))});
    planner_options o;
    o.config.stages = 4;
    o.config.layers_per_stage = 8;
    o.config.tp = 2;
    o.config.device_memory_mb = 40000;
    o.hidden_size = 4096;
    o.order_search_evaluations = 8;
    const plan_result r = plan_iteration(model, batch, o);
    const energy_plan fast = plan_energy(r.plan, r.scenario, r.schedule, energy::a100_profile(), std::nullopt);
    CHECK(fast.chosen.point.time_ms == doctest::Approx(r.makespan_ms).epsilon(1e-9));  // Perseus's fastest = all-max time
    const double target = 1.2 * r.makespan_ms;
    const energy_plan slow = plan_energy(r.plan, r.scenario, r.schedule, energy::a100_profile(), target);
    CHECK(slow.chosen.point.time_ms <= target + 1e-9);
    CHECK(slow.chosen.point.energy_j < fast.chosen.point.energy_j);
    CHECK(slow.plan.header.predicted_makespan_ms == slow.chosen.point.time_ms);
    CHECK(compute_op_clocks_mhz(slow.plan) == expected_clocks(slow.problem, slow.chosen.point.choice));
    CHECK(slow.min_frequency_mhz >= 210);  // the lowest Pareto-optimal clock of any op
    CHECK(slow.min_frequency_mhz < slow.max_frequency_mhz);
    CHECK(slow.max_frequency_mhz == 1410);
    std::ostringstream ss;
    write_plan_trace(ss, slow.plan, slow.simulation);
    const std::string t = ss.str();
    CHECK(t.find("\"frequency_mhz\":") != std::string::npos);
    CHECK(t.find("\"ph\":\"C\"") != std::string::npos);  // the clock counter track
    const auto j = nlohmann::json::parse(t);
    CHECK(j["traceEvents"].size() > 10);
    // dp > 1 is refused (one frontier per replica would be needed)
    execution_plan two = r.plan;
    two.header.dp = 2;
    CHECK_THROWS_AS((void)plan_energy(two, r.scenario, r.schedule, energy::a100_profile(), std::nullopt), invalid_argument);
}
