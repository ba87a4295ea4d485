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
namespace {
/// The SVG's width attribute.
double svg_width(const std::string& svg) {
    const auto p = svg.find("width=\"");
    return std::stod(svg.substr(p + 7));
}
std::size_t count_of(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (std::size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
    return n;
}
}  // namespace

TEST_CASE("SVG: the width grows with the ops, op kinds are marked without colour, several pipelines are grouped") {
    auto chart = [](std::size_t mbs, const svg_options& o = {}) {
        const scenario sc = scaled_scenario({1.0, 1.0, 1.0, 1.0}, std::vector<double>(mbs, 1.0), 2.0, 100.0, 10.0, 20.0);
        const auto r = simulate(sc, zb_h1{});
        std::ostringstream v;
        write_svg(v, r, pipeline_schedule(zb_h1{}(sc)), o);
        return v.str();
    };
    const std::string small = chart(4), large = chart(48);
    CHECK(svg_width(small) == doctest::Approx(1200.0));  // the minimum width
    CHECK(svg_width(large) > 3.0 * svg_width(small));    // 12x the ops: wider, labels stay readable
    // Every op of the large chart is labelled (at least its kind letter), and B and W carry
    // their patterns, so kinds are told apart without colour.
    CHECK(count_of(large, "<text x=") >= 4 * 48 * 3);
    CHECK(count_of(large, "fill=\"url(#pp-hlines)\"") == 4 * 48 + 1);  // every B, and its legend swatch
    CHECK(count_of(large, "fill=\"url(#pp-cross)\"") == 4 * 48 + 1);   // every W, and its legend swatch
    svg_options fixed;
    fixed.width_px = 900;
    CHECK(svg_width(chart(48, fixed)) == doctest::Approx(900.0));  // an explicit width is kept

    const scenario sc = scaled_scenario({1.0, 1.0}, std::vector<double>(6, 1.0), 2.0, 100.0, 10.0, 20.0);
    const pipeline_schedule sched(one_f_one_b{}(sc));
    const auto a = simulate(sc, sched);
    simulation_options no_curve;
    no_curve.record_memory_curve = false;
    const auto b = simulate(sc, sched, no_curve);
    const std::vector<svg_pipeline> both{{&a, &sched, "replica 0"}, {&b, &sched, "replica 1"}};
    svg_options o;
    o.makespan_ms = 150.0;
    o.lower_bound_ms = 120.0;
    o.memory_limit_mb = 400;
    std::ostringstream v;
    write_svg(v, both, o);
    const std::string svg = v.str();
    CHECK(svg.find("makespan 150.00 ms, lower bound 120.00 ms (×1.250); 2 pipelines") != std::string::npos);
    CHECK(svg.find("replica 0 — makespan") != std::string::npos);
    CHECK(svg.find("replica 1 — makespan") != std::string::npos);
    CHECK(count_of(svg, "<title>") == 2 * 2 * 2 * 6);
    CHECK(svg.find("memory per device (MB) of replica 0") != std::string::npos);  // replica 1 has no curve
    CHECK(svg.find("device memory limit 400 MB") != std::string::npos);
    CHECK_THROWS_AS(write_svg(v, std::vector<svg_pipeline>{}), pipeplan::invalid_argument);
}

