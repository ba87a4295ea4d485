// Tests of pipeplan/schedule/scenario.hpp: make_scenario and validate() against the JSON reader's ranges.
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

/// What `f` throws (a pipeplan::error's text), or "no error".
template <class F>
std::string message(F&& f) {
    try {
        f();
    } catch (const pipeplan::error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("make_scenario validates its vectors") {
    CHECK_THROWS_AS((void)make_scenario({{1, 2}}, {{1}}, {{1, 1}}, {{1, 1}}, {1, 1}), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)make_scenario({{1, -2}}, {{1, 1}}, {{1, 1}}, {{1, 1}}, {1, 1}), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)make_scenario({{1, 2}}, {{1, 1}}, {{1, 1}}, {{1, 1}}, {1}), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)make_scenario({{1, 2}}, {{1, 1}}, {{2, 1}}, {{1, 1}}, {1, 1}), pipeplan::invalid_argument);
    const scenario ok = make_scenario({{1, 2}}, {{1, 1}}, {{1, 1}}, {{1, 1}}, {1, 1});
    CHECK(ok.stages == 2);
}

TEST_CASE("scenario::validate: a scenario built in code is held to the JSON reader's ranges (one set of limits)") {
    // Each case sets one value of a valid scenario; `hi` is its upper limit (scenario_limits).
    // At the limit every entry point accepts it; just above (and at -1, NaN, inf), validate(),
    // simulate(), simulator::run() refuse it naming the field and the range, and so does the
    // JSON reader on the same scenario written as a file: the two paths cannot drift apart.
    using L = scenario_limits;
    struct field_case {
        const char* field;
        double hi;
        const char* range;
        void (*set)(scenario&, double);
    };
    const field_case cases[] = {
        {"microbatches[1].forward_ms[0]", L::max_time_ms, "[0, 1e+09] ms", [](scenario& s, double x) { s.forward_ms[s.at(1, 0)] = x; }},
        {"microbatches[0].backward_ms[1]", L::max_time_ms, "[0, 1e+09] ms", [](scenario& s, double x) { s.backward_ms[s.at(0, 1)] = x; }},
        {"microbatches[1].stored_mb[1]", L::max_memory_mb, "[0, 1e+09] MB",
         [](scenario& s, double x) { s.stored_mb[s.at(1, 1)] = x, s.peak_mb[s.at(1, 1)] = L::max_memory_mb; }},
        {"microbatches[0].peak_mb[0]", L::max_memory_mb, "[0, 1e+09] MB", [](scenario& s, double x) { s.peak_mb[s.at(0, 0)] = x; }},
        {"model_state_mb[1]", L::max_memory_mb, "[0, 1e+09] MB", [](scenario& s, double x) { s.model_state_mb[1] = x; }},
        {"network.activation_mb[1]", L::max_memory_mb, "[0, 1e+09] MB", [](scenario& s, double x) { s.activation_mb[1] = x; }},
        {"network.latency_ms", L::max_time_ms, "[0, 1e+09] ms", [](scenario& s, double x) { s.network.latency_ms = x; }},
        {"network.intra_node_latency_ms", L::max_time_ms, "[0, 1e+09] ms",
         [](scenario& s, double x) { s.network.intra_node_latency_ms = x; }},
        {"network.bandwidth_gbps", L::max_bandwidth_gbps, "[0, 1e+06] Gbit/s", [](scenario& s, double x) { s.network.bandwidth_gbps = x; }},
        {"network.intra_node_bandwidth_gbps", L::max_bandwidth_gbps, "[0, 1e+06] Gbit/s",
         [](scenario& s, double x) { s.network.intra_node_bandwidth_gbps = x; }},
    };
    const scenario base = two_stage(5.0, network_model{0.5, 8.0, 0.0, 0.0, 1});
    const auto schedule = pipeline_schedule(one_f_one_b{}(base));
    for (const auto& c : cases) {
        CAPTURE(c.field);
        scenario ok = base;
        c.set(ok, c.hi);
        CHECK_NOTHROW(ok.validate());
        CHECK_NOTHROW((void)simulate(ok, schedule));
        CHECK_NOTHROW((void)parse_scenario_json(nlohmann::json(ok).dump(), "s.json"));
        for (const double bad : {std::nextafter(c.hi, 2 * c.hi), 1e308, -1.0, std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::quiet_NaN()}) {
            CAPTURE(bad);
            scenario sc = base;
            c.set(sc, bad);
            const std::string e = message([&] { sc.validate(); });
            CHECK(e.rfind(std::string("scenario: ") + c.field + " must be a number in " + c.range + ", is ", 0) == 0);
            CHECK(message([&] { (void)simulate(sc, schedule); }) == e);
            simulator sim;
            CHECK(message([&] { (void)sim.run(sc, schedule); }) == e);
            if (!std::isfinite(bad)) continue;  // JSON cannot carry inf or NaN
            const std::string r = message([&] { (void)parse_scenario_json(nlohmann::json(sc).dump(), "s.json"); });
            CHECK(r.find(std::string("column '") + c.field + "': expected a number in " + c.range) != std::string::npos);
        }
    }
    // Counts: stages and devices_per_node (the reader's integer ranges).
    scenario sc = base;
    sc.network.devices_per_node = 0;
    CHECK(message([&] { sc.validate(); }) == "scenario: network.devices_per_node must lie in [1, 1048576], is 0");
    sc.network.devices_per_node = static_cast<std::uint32_t>(L::max_devices_per_node) + 1;
    CHECK(message([&] { (void)simulate(sc, schedule); }) == "scenario: network.devices_per_node must lie in [1, 1048576], is 1048577");
    sc = base;
    sc.stages = static_cast<std::size_t>(L::max_stages) + 1;
    CHECK(message([&] { sc.validate(); }) == "scenario: stages must lie in [1, 1000000], is 1000001");
    // make_scenario (the batching tier's way in) refuses the same values.
    CHECK(message([] { (void)make_scenario({{1, 2e9}}, {{1, 1}}, {{1, 1}}, {{1, 1}}, {1, 1}); }) ==
          "scenario: microbatches[0].forward_ms[1] must be a number in [0, 1e+09] ms, is 2e+09");
}

TEST_CASE("scenario::validate: the first bad value is named wherever it lies (blocks, pairs, the odd tail)") {
    // S 3, M 401: 1203 values per field, checked two at a time in blocks of
    // scenario::range_block; the last block's count is odd.
    const std::size_t S = 3, M = 401, n = S * M;
    const scenario good = scaled_scenario(std::vector<double>(S, 1.0), std::vector<double>(M, 1.0), 2.0, 10, 5, 8);
    REQUIRE(good.forward_ms.size() == n);
    good.validate();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const std::size_t i : {std::size_t{0}, std::size_t{1}, scenario::range_block - 1, scenario::range_block,
                                scenario::range_block + 1, n - 2, n - 1}) {
        const std::string at = "microbatches[" + std::to_string(i % M) + "].";
        const std::string stage = "[" + std::to_string(i / M) + "]";
        scenario sc = good;
        sc.backward_ms[i] = nan;
        CHECK(message([&] { sc.validate(); }) == "scenario: " + at + "backward_ms" + stage + " must be a number in [0, 1e+09] ms, is nan");
        sc.forward_ms[i] = -1.0;  // reported first: forward before backward at one value
        CHECK(message([&] { sc.validate(); }) == "scenario: " + at + "forward_ms" + stage + " must be a number in [0, 1e+09] ms, is -1");
        if (i + 1 < n) {  // a later bad value does not hide this one
            sc.stored_mb[i + 1] = 2e9;
            CHECK(message([&] { sc.validate(); }).find(at + "forward_ms" + stage) != std::string::npos);
        }
        sc = good;
        sc.peak_mb[i] = sc.stored_mb[i] / 2;
        CHECK(message([&] { sc.validate(); }).find(at + "peak_mb" + stage + " (") != std::string::npos);
        sc = good;
        sc.stored_mb[i] = std::numeric_limits<double>::infinity();
        CHECK(message([&] { sc.validate(); }).find(at + "stored_mb" + stage + " must be") != std::string::npos);
    }
}
