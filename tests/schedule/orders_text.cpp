// Tests of pipeplan/schedule/orders_text.hpp: device orders as text.
#include <doctest/doctest.h>

#include <cstring>

#include <algorithm>
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

namespace {

/// The input_error message of parsing `text` as "o.txt" (empty when it parses).
std::string parse_error(const std::string& text, const scenario& sc, const stage_placement& pl) {
    try {
        (void)parse_orders_text(text, "o.txt", sc, pl);
    } catch (const pipeplan::input_error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE("orders text: chunks, comments, errors name line, device, position and op") {
    scenario sc = split_into_chunks(random_scenario(2, 2, 3), 2);
    const stage_placement pl = placement_of(sc);
    const pipeline_schedule ref = interleaved_1f1b{2}(sc);
    std::string text = "# interleaved, 2 devices x 2 chunks\n\n";
    for (const auto& dev : ref.orders) {
        for (const op& o : dev) text += op_label(ref, o) + " ";
        text += "\n";
    }
    const orders_text t = parse_orders_text(text, "o.txt", sc, pl);
    CHECK(t.schedule.orders == ref.orders);
    CHECK(t.line_of_device == std::vector<std::size_t>{3, 4});
    CHECK(simulate(sc, t.schedule).makespan_ms == simulate(sc, ref).makespan_ms);
    auto err = [&](const std::string& s) { return parse_error(s, sc, pl); };
    CHECK(err("F0.0 F0.2\n").find("o.txt:1: column 'device 0, position 1, op F0.2': chunk out of range") !=
          std::string::npos);
    CHECK(err("F0 W0 B0\nF0\n").find("W before its B") != std::string::npos);
    CHECK(err("F0\nF0\nF0\n").find("more device lines than the 2 devices") != std::string::npos);
}

TEST_CASE("orders text: overlapped pairs print as F3.1&B5.0 (simulate --json's device_orders) and parse back") {
    named_schedule_options o;
    o.overlap_factor = 0.5;
    const scenario sc = prepare_scenario(schedule_name::dualpipe_v, random_scenario(3, 8, 4), o);
    const pipeline_schedule ref = make_generator(schedule_name::dualpipe_v, o)(sc);
    const stage_placement pl = placement_of(sc);
    std::string text;
    std::size_t pairs = 0;
    const nlohmann::json j = simulation_to_json(simulate(sc, ref), ref);
    for (std::size_t d = 0; d < ref.orders.size(); ++d) {
        const std::vector<std::string> labels = order_labels(ref, d);
        CHECK(j["device_orders"][d] == nlohmann::json(labels));
        for (const std::string& l : labels) {
            pairs += l.find('&') != std::string::npos ? 1 : 0;
            text += l + " ";
        }
        text += "\n";
    }
    REQUIRE(pairs > 0);
    CHECK(text.find("&B") != std::string::npos);
    orders_text t = parse_orders_text(text, "o.txt", sc, pl);
    CHECK(t.schedule.orders == ref.orders);  // overlaps_next included
    t.schedule.w_share = ref.w_share;
    t.schedule.overlap_factor = ref.overlap_factor;
    CHECK(simulate(sc, t.schedule).makespan_ms == simulate(sc, ref).makespan_ms);
    auto err = [&](const std::string& s) { return parse_error(s, sc, pl); };
    CHECK(err("F0.0&F1.0\n").find("o.txt:1: column 'device 0, position 0, op F0.0&F1.0': an overlapped pair is a forward & "
                                 "the B of another micro-batch") != std::string::npos);
    CHECK(err("F1.0&B1.1\n").find("the B of another micro-batch") != std::string::npos);
    CHECK(err("F0.0&B9.0\n").find("micro-batch out of range") != std::string::npos);
}
