// Tests of pipeplan/schedule/registry.hpp: named schedules, their traits rows, prepare_scenario, users' rows.
#include <doctest/doctest.h>

#include <cstring>

#include <algorithm>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "pipeplan/schedule.hpp"
#include "pipeplan/schedule/scenario_json.hpp"

using namespace pipeplan::schedule;
using pipeplan::test::check_schedule;
using pipeplan::test::random_scenario;
using pipeplan::test::two_stage;

TEST_CASE("placement_of and prepare_scenario: a scenario carries its placement") {
    scenario sc = split_into_chunks(random_scenario(2, 4, 5), 2);  // 4 chunks on 2 devices
    CHECK(sc.device_count() == 2);
    CHECK(sc.placement == std::vector<std::uint32_t>{0, 1, 0, 1});
    CHECK(placement_of(sc).kind() == placement_kind::interleaved);
    named_schedule_options o;
    const scenario p = prepare_scenario(schedule_name::interleaved, sc, o);
    CHECK(p.stages == 4);  // as placed: not split again
    CHECK(o.chunks == 2);
    check_schedule(p, make_generator(schedule_name::interleaved, o)(p));
    named_schedule_options ad;
    const scenario pa = prepare_scenario(schedule_name::adaptive, sc, ad);
    CHECK(make_generator(schedule_name::adaptive, ad)(pa).placement.devices() == 2);
    named_schedule_options three;
    three.chunks = 3;
    CHECK_THROWS_WITH_AS((void)prepare_scenario(schedule_name::interleaved, sc, three),
                         doctest::Contains("chunks 3 contradicts the scenario"), pipeplan::invalid_argument);
    try {  // the library names its option; a front end renames it (the CLI: --chunks)
        (void)prepare_scenario(schedule_name::interleaved, sc, three);
    } catch (const pipeplan::option_error& e) {
        CHECK(e.option() == "chunks");
        CHECK(e.named("--chunks").rfind("--chunks 3 contradicts the scenario", 0) == 0);
    }
    named_schedule_options plain;
    CHECK_THROWS_WITH_AS((void)prepare_scenario(schedule_name::one_f_one_b, sc, plain),
                         doctest::Contains("runs one stage per device"), pipeplan::invalid_argument);
    // A V-shaped map is recognized; any other map is an error.
    sc.placement = {0, 1, 1, 0};
    CHECK(placement_of(sc).kind() == placement_kind::v_shape);
    sc.placement = {0, 0, 1, 1};
    CHECK_THROWS_AS((void)placement_of(sc), pipeplan::invalid_argument);
    // A checkpoint ratio: merak-* only.
    named_schedule_options r;
    r.checkpoint_ratio = 0.5;
    const scenario lin = random_scenario(4, 6, 7);
    CHECK(prepare_scenario(schedule_name::merak_early, lin, r).checkpoint_ratio ==
          merak_checkpoint_ratios(4, 0.5, merak_variant::early_recompute));
    CHECK_THROWS_WITH_AS((void)prepare_scenario(schedule_name::one_f_one_b, lin, r),
                         doctest::Contains("merak-* schedules only"), pipeplan::invalid_argument);
}

TEST_CASE("registry: every built-in row's facts hold for the schedules its factory makes") {
    const scenario sc = random_scenario(4, 8, 11);
    for (const auto& row : builtin_schedules()) {
        INFO(row.name);
        const schedule_traits& t = schedules().at(row.name);
        CHECK(&t == &traits_of(parse_schedule_name(row.name)));
        named_schedule_options o;
        o.memory_limit_mb = 1e9;
        const scenario p = prepare_scenario(t, sc, o);
        const pipeline_schedule s = make_generator(t, o)(p);
        check_schedule(p, s);
        CHECK(s.name == t.name);
        CHECK((s.w_share > 0.0) == t.splits_backward);
        CHECK(s.replay.has_value() == t.plans_under_memory_limit);  // planned (and replayed) under the limit
        CHECK((s.placement.chunks() > 1) == (t.chunks == chunk_rule::splits_into_chunks));
        CHECK(t.checkpoint_rule.has_value() == is_merak(parse_schedule_name(row.name)));
    }
    CHECK(schedules().name_list().rfind(pipeplan::name_list<schedule_name>(), 0) == 0);  // the built-ins first, in enum order
}

TEST_CASE("registry: a user's schedule is found by name and runs like a built-in; bad rows are refused") {
    schedule_traits row;
    row.name = "test-reversed-gpipe";
    row.factory = [](const named_schedule_options&) -> any_generator {
        return [](const scenario& sc) {
            pipeline_schedule s = gpipe{}(sc);
            s.name = "test-reversed-gpipe";
            for (auto& dev : s.orders)  // backwards in reverse micro-batch order: still valid
                std::reverse(std::find_if(dev.begin(), dev.end(), [](const op& o) { return o.kind == op_kind::B; }),
                             dev.end());
            return s;
        };
    };
    if (!schedules().find(row.name)) register_schedule(row);
    const schedule_traits& t = schedules().at("test-reversed-gpipe");
    const scenario sc = random_scenario(3, 5, 2);
    named_schedule_options o;
    const scenario p = prepare_scenario(t, sc, o);
    const pipeline_schedule s = make_generator(t, o)(p);
    check_schedule(p, s);
    CHECK(simulate(p, s).makespan_ms >= lower_bound(p, s.placement).bound_ms);
    CHECK(schedule_id("test-reversed-gpipe").traits().name == "test-reversed-gpipe");
    CHECK_THROWS_WITH_AS((void)register_schedule(row), doctest::Contains("registered already"), pipeplan::invalid_argument);
    schedule_traits bad = row;
    bad.name = "has space";
    CHECK_THROWS_WITH_AS((void)register_schedule(bad), doctest::Contains("not a schedule name"), pipeplan::invalid_argument);
    bad.name = "no-factory";
    bad.factory = nullptr;
    CHECK_THROWS_WITH_AS((void)register_schedule(bad), doctest::Contains("no factory"), pipeplan::invalid_argument);
    CHECK_THROWS_WITH_AS((void)schedules().at("nope"), doctest::Contains("unknown schedule 'nope' (valid: gpipe, 1f1b"),
                         pipeplan::invalid_argument);
    // A ratio needs a checkpoint rule; a placed scenario needs a chunk rule that runs chunks.
    named_schedule_options r;
    r.checkpoint_ratio = 0.5;
    CHECK_THROWS_AS((void)prepare_scenario(t, sc, r), pipeplan::invalid_argument);
    named_schedule_options q;
    CHECK_THROWS_WITH_AS((void)prepare_scenario(t, split_into_chunks(sc, 2), q), doctest::Contains("runs one stage per device"),
                         pipeplan::invalid_argument);
}

TEST_CASE("registry: search, reorder and schedule in the searched order agree with the search") {
    for (const auto n : {schedule_name::adaptive, schedule_name::one_f_one_b, schedule_name::zb_h1}) {
        INFO(to_string(n));
        const schedule_traits& t = traits_of(n);
        const scenario base = random_scenario(4, 9, 21, true);
        named_schedule_options o;
        o.memory_limit_mb = 1e9;
        const scenario sc = prepare_scenario(t, base, o);
        order_search_options so;
        so.max_evaluations = 20;
        const order_search_result r = search_named_order(t, sc, o, so);
        REQUIRE(r.feasible);
        CHECK((r.inflight_limit == 0 || t.searches_inflight_limit));
        o.inflight_limit = r.inflight_limit;
        simulation_workspace ws;
        const ordered_schedule run = schedule_in_order(t, sc, o, r.order, simulation_options{}, ws);
        CHECK(run.order == r.order);
        if (!t.searches_inflight_limit)  // adaptive's search runs its quick form; the schedule its full one
            CHECK(run.sim.makespan_ms == r.makespan_ms);
        CHECK(run.sim.makespan_ms == simulate(reorder(sc, r.order), make_generator(t, o)(reorder(sc, r.order))).makespan_ms);
    }
}
