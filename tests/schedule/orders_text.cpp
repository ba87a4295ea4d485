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
    auto err = [&](const std::string& s) {
        try {
            (void)parse_orders_text(s, "o.txt", sc, pl);
        } catch (const pipeplan::input_error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(err("F0.0 F0.2\n").find("o.txt:1: column 'device 0, position 1, op F0.2': chunk out of range") !=
          std::string::npos);
    CHECK(err("F0 W0 B0\nF0\n").find("W before its B") != std::string::npos);
    CHECK(err("F0\nF0\nF0\n").find("more device lines than the 2 devices") != std::string::npos);
}
