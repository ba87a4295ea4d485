// Energy profiles (Pareto filter, A100 DVFS model, CSV reader) and the op graph that the
// frontier runs on, checked against the simulator.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/energy/problem.hpp"
#include "pipeplan/schedule.hpp"
#include "schedule/check.hpp"

using namespace pipeplan;
using namespace pipeplan::energy;
namespace ps = pipeplan::schedule;

TEST_CASE("energy: pareto_front keeps exactly the non-dominated points, fastest first") {
    splitmix64 rng(7);
    for (int round = 0; round < 100; ++round) {
        const double idle_w = round % 2 ? 500.0 : 0.0;  // dominance in energy - idle_w * time
        const auto eff = [idle_w](const energy_point& q) { return q.energy_j - idle_w * q.time_ms * 1e-3; };
        std::vector<energy_point> pts;
        const int n = 1 + static_cast<int>(rng() % 12);
        for (int k = 0; k < n; ++k)
            pts.push_back({100.0 + k, static_cast<double>(rng() % 6), static_cast<double>(rng() % 6)});
        const auto front = pareto_front(pts, idle_w);
        REQUIRE(!front.empty());
        for (std::size_t k = 1; k < front.size(); ++k) {
            CHECK(front[k].time_ms > front[k - 1].time_ms);
            CHECK(eff(front[k]) < eff(front[k - 1]));
        }
        for (const auto& p : pts) {
            bool dominated = false;
            for (const auto& q : pts)
                dominated |= q.time_ms <= p.time_ms && eff(q) <= eff(p) && (q.time_ms < p.time_ms || eff(q) < eff(p));
            bool kept = false;
            for (const auto& q : front) kept |= q.time_ms == p.time_ms && q.energy_j == p.energy_j;
            CHECK(kept == !dominated);
        }
    }
}

TEST_CASE("energy: the A100 DVFS model") {
    const dvfs_model m;
    const auto fs = m.frequencies_mhz();
    REQUIRE(fs.size() == 81);
    CHECK(fs.front() == 210.0);
    CHECK(fs.back() == 1410.0);
    CHECK(m.relative_time(1410.0, ps::op_kind::F) == doctest::Approx(1.0));
    CHECK(m.relative_time(705.0, ps::op_kind::B) == doctest::Approx(0.85 * 2 + 0.15));
    CHECK(m.power_w(1410.0) == doctest::Approx(400.0));  // TDP
    CHECK(m.power_w(210.0) == doctest::Approx(100.0 + 300.0 * 210.0 / 1410.0 * 0.49));
    const energy_profile p = a100_profile();
    CHECK(p.idle_power_w == 60.0);
    const auto& c = p.curve(ps::op_kind::F, 3);
    // The profile keeps every clock, fastest first.
    REQUIRE(c.size() == 81);
    CHECK(c.front().frequency_mhz == 1410.0);
    CHECK(c.front().time_ms == doctest::Approx(1.0));
    CHECK(c.back().frequency_mhz == 210.0);
    // Raw Pareto: from the top clock down to the minimum-energy clock, 900 MHz (docs/energy.md).
    const auto raw = pareto_front(c);
    CHECK(raw.front().frequency_mhz == 1410.0);
    CHECK(raw.back().frequency_mhz == 900.0);
    CHECK(raw.size() == 35);
    // Perseus's filter on energy - idle power * time ends at the clock minimising it over every
    // clock: 600 MHz, slower than the raw minimum (the idle draw it avoids outweighs the energy it adds).
    const auto eff = pareto_front(c, p.idle_power_w);
    const auto effective = [&](const energy_point& q) { return q.energy_j - p.idle_power_w * q.time_ms * 1e-3; };
    const auto best = std::min_element(c.begin(), c.end(), [&](const auto& a, const auto& b) { return effective(a) < effective(b); });
    CHECK(eff.back().frequency_mhz == best->frequency_mhz);
    CHECK(eff.back().frequency_mhz == 600.0);
    CHECK(eff.size() == 55);
    for (std::size_t k = 1; k < eff.size(); ++k) CHECK(effective(eff[k]) < effective(eff[k - 1]));
    // f and R use F's curve, W uses W's.
    CHECK(&p.curve(ps::op_kind::F_checkpoint, 0) == &c);
    CHECK(&p.curve(ps::op_kind::R, 1) == &c);
    CHECK(&p.curve(ps::op_kind::W, 1) == &p.curves.at({'W', energy_profile::any_stage}));
    // Scaling to an op of 4 ms.
    const auto s = scale_curve(c, 4.0);
    CHECK(s.front().time_ms == doctest::Approx(4.0));
    CHECK(s.front().energy_j == doctest::Approx(1.6));  // 400 W for 4 ms
    CHECK(scale_curve(c, 0.0).size() == 1);
}

TEST_CASE("energy: profile CSV") {
    const std::string good =
        "kind,stage,frequency_mhz,time_ms,energy_j,comment\n"
        "F,0,1410,10,4,x\n"
        "F,0,1200,11,3.8,x\n"
        "F,0,1000,12,3.9,dominated\n"
        "B,*,1410,20,8,x\n"
        "B,*,1000,25,7,x\n"
        "idle,*,0,1000,70,\n";
    const energy_profile p = parse_energy_profile_csv(csv_table::parse(good, "prof.csv"));
    CHECK(p.idle_power_w == doctest::Approx(70.0));
    const auto& f0 = p.curve(ps::op_kind::F, 0);
    REQUIRE(f0.size() == 3);  // every point; the per-op filter drops the dominated one
    REQUIRE(pareto_front(f0).size() == 2);
    CHECK(pareto_front(f0)[1].frequency_mhz == 1200.0);
    // with the profile's 70 W idle power 1000 MHz stays dominated: 3.9 - 0.84 = 3.06 J
    // effective against 3.8 - 0.77 = 3.03 J at 1200 MHz
    CHECK(pareto_front(f0, p.idle_power_w).size() == 2);
    CHECK(p.curve(ps::op_kind::W, 5).size() == 2);  // W falls back to B, stage * serves stage 5
    CHECK_THROWS_WITH_AS((void)p.curve(ps::op_kind::F, 1), doctest::Contains("prof.csv"), invalid_argument);

    auto error_of = [](const std::string& text) -> std::string {
        try {
            (void)parse_energy_profile_csv(csv_table::parse(text, "bad.csv"));
        } catch (const input_error& e) {
            return e.what();
        }
        return "no error";
    };
    const std::string head = "kind,stage,frequency_mhz,time_ms,energy_j\n";
    CHECK(error_of(head + "F,0,1410,10,4\nX,0,1200,11,3\nidle,*,0,1,1\n").find("bad.csv:3") != std::string::npos);
    CHECK(error_of(head + "F,0,1410,10,4\nF,0,1200,eleven,3\nidle,*,0,1,1\n").find("bad.csv:3: column 'time_ms'") !=
          std::string::npos);
    CHECK(error_of(head + "F,0,1410,10,4\nF,0,1410,11,3\nidle,*,0,1,1\n").find("bad.csv:3: column 'frequency_mhz'") !=
          std::string::npos);
    CHECK(error_of(head + "F,x,1410,10,4\nidle,*,0,1,1\n").find("bad.csv:2: column 'stage'") != std::string::npos);
    CHECK(error_of(head + "F,0,1410,0,4\nidle,*,0,1,1\n").find("bad.csv:2: column 'time_ms'") != std::string::npos);
    CHECK(error_of(head + "F,0,1410,10,4\n").find("no idle row") != std::string::npos);
    CHECK(error_of("kind,stage,time_ms,energy_j\nF,0,1,1\n").find("frequency_mhz") != std::string::npos);
    CHECK(error_of(head + "F,0,1410,10,-4\nidle,*,0,1,1\n").find("bad.csv:2: column 'energy_j'") != std::string::npos);
    // Every value has a range: the error names the line, the column and the range.
    CHECK(error_of(head + "F,0,1410,1e300,4\nidle,*,0,1,1\n") ==
          "bad.csv:2: column 'time_ms': expected a number in [0, 1e+09] ms, found '1e300'");
    CHECK(error_of(head + "F,0,1410,10,1e13\nidle,*,0,1,1\n") ==
          "bad.csv:2: column 'energy_j': expected a number in [0, 1e+12] J, found '1e13'");
    CHECK(error_of(head + "F,0,1e308,10,4\nidle,*,0,1,1\n") ==
          "bad.csv:2: column 'frequency_mhz': expected a number in [0, 1e+06] MHz, found '1e308'");
    // An idle power that overflows (finite values, infinite quotient) is an error, not inf.
    CHECK(error_of(head + "F,0,1410,10,4\nidle,*,0,1e-300,1e12\n").find("bad.csv:3: column 'energy_j': the idle power") == 0);
}

TEST_CASE("energy: the op graph's longest path is the simulated makespan") {
    ps::named_schedule_options o;
    o.w_share = 0.4;
    for (std::uint64_t seed : {1u, 2u, 3u})
        for (const bool latency_only : {false, true})
            for (const auto n : {ps::schedule_name::gpipe, ps::schedule_name::one_f_one_b, ps::schedule_name::interleaved,
                                 ps::schedule_name::adaptive, ps::schedule_name::zb_h1, ps::schedule_name::merak_early,
                                 ps::schedule_name::merak_last, ps::schedule_name::merak_critical}) {
                ps::scenario base = test::random_scenario(4, 7, seed);
                if (latency_only) base.network.latency_ms = 0.25;  // no bandwidth term: links never queue
                const ps::scenario sc = ps::prepare_scenario(n, base, o);
                const ps::pipeline_schedule s = ps::make_generator(n, o)(sc);
                const ps::op_graph g = ps::make_op_graph(sc, s);
                const ps::simulation_result r = ps::simulate(sc, s);
                std::vector<double> start(g.size(), 0.0);
                for (bool changed = true; changed;) {  // longest paths by relaxation to a fixpoint
                    changed = false;
                    for (const auto& e : g.edges) {
                        const double s0 = start[e.from] + g.duration_ms[e.from] + e.delay_ms;
                        if (s0 > start[e.to] + 1e-12) {
                            start[e.to] = s0;
                            changed = true;
                        }
                    }
                }
                double T = 0.0;
                for (std::size_t i = 0; i < g.size(); ++i) T = std::max(T, start[i] + g.duration_ms[i]);
                INFO(ps::to_string(n), " seed ", seed);
                CHECK(T == doctest::Approx(r.makespan_ms).epsilon(1e-12));
                // Op ids follow the device orders, as the timeline does.
                std::size_t i = 0;
                for (const auto& dev : r.timeline)
                    for (const auto& t : dev) {
                        CHECK(t.start_ms == doctest::Approx(start[i]).epsilon(1e-12));
                        ++i;
                    }
            }
}

TEST_CASE("energy: simulation with per-op durations") {
    const ps::scenario sc = test::random_scenario(3, 5, 11);
    const ps::pipeline_schedule s = ps::one_f_one_b{}(sc);
    const ps::op_graph g = ps::make_op_graph(sc, s);
    ps::simulation_options o;
    o.duration_ms = g.duration_ms;
    CHECK(ps::simulate(sc, s, o).makespan_ms == ps::simulate(sc, s).makespan_ms);
    std::vector<double> twice = g.duration_ms;
    for (double& x : twice) x *= 2.0;
    o.duration_ms = twice;
    CHECK(ps::simulate(sc, s, o).makespan_ms == doctest::Approx(2.0 * ps::simulate(sc, s).makespan_ms));
    std::vector<double> short_list(3, 1.0);
    o.duration_ms = short_list;
    CHECK_THROWS_AS((void)ps::simulate(sc, s, o), invalid_argument);
}
