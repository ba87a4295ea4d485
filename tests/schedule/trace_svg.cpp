// Tests of pipeplan/schedule/trace.hpp and svg.hpp: Chrome trace and SVG output.
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

TEST_CASE("trace and SVG output") {
    const scenario sc = split_into_chunks(random_scenario(3, 5, 11), 2);
    const auto s = interleaved_1f1b{2}(sc);
    const auto r = simulate(sc, s);
    std::ostringstream t;
    write_chrome_trace(t, r, s);
    const auto j = nlohmann::json::parse(t.str());
    std::size_t x = 0, c = 0;
    for (const auto& e : j["traceEvents"]) {
        x += e["ph"] == "X";
        c += e["ph"] == "C";
    }
    CHECK(x == 3 * 5 * 2 * 2);
    CHECK(c > 0);
    CHECK(t.str().find("\"F0.1\"") != std::string::npos);
    std::ostringstream v;
    svg_options o;
    o.memory_limit_mb = 5000;
    write_svg(v, r, s, o);
    const std::string svg = v.str();
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
    CHECK(svg.find("device 2") != std::string::npos);
    CHECK(svg.find("time (ms)") != std::string::npos);
    CHECK(svg.find("memory per device (MB)") != std::string::npos);
    CHECK(svg.find("limit 5000 MB") != std::string::npos);
    std::size_t rects = 0;
    for (std::size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1)) ++rects;
    CHECK(rects == 3 * 5 * 2 * 2);
}
