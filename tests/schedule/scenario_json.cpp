// Tests of pipeplan/schedule/scenario_json.hpp: round trips, ranges and located errors.
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
std::string error_of(const std::string& text) {
    try {
        (void)parse_scenario_json(text, "s.json");
    } catch (const pipeplan::input_error& e) {
        return e.what();
    }
    return "";
}
const char* good_json = R"({
  "stages": 2,
  "microbatches": [
    {"forward_ms": [1, 2], "backward_ms": [2, 4], "stored_mb": [10, 10], "peak_mb": [20, 20]},
    {"forward_ms": [1, 2], "backward_ms": [2, 4], "stored_mb": [10, 10], "peak_mb": [20, 25]}
  ],
  "model_state_mb": [100, 100],
  "network": {"latency_ms": 0.5, "bandwidth_gbps": 8, "activation_mb": [5, 5]}
})";
}  // namespace

TEST_CASE("scenario JSON: round trip, ADL, errors with file, line and field path") {
    const scenario sc = parse_scenario_json(good_json, "s.json");
    CHECK(sc.stages == 2);
    CHECK(sc.microbatches == 2);
    CHECK(sc.peak(1, 1) == 25);
    CHECK(sc.network.latency_ms == 0.5);
    CHECK(sc.activation(1) == 5);
    nlohmann::json j = sc;
    const scenario back = j.get<scenario>();
    CHECK(back.forward_ms == sc.forward_ms);
    CHECK(back.peak_mb == sc.peak_mb);
    CHECK(back.activation_mb == sc.activation_mb);
    CHECK(back.network.bandwidth_gbps == sc.network.bandwidth_gbps);

    std::string t = good_json;
    CHECK(error_of(R"({"stages": 2)").rfind("s.json:1:", 0) == 0);
    CHECK(error_of(R"({"stages": 2)").find("invalid JSON") != std::string::npos);
    auto replaced = [&](const std::string& from, const std::string& to) {
        std::string s = t;
        s.replace(s.find(from), from.size(), to);
        return error_of(s);
    };
    CHECK(replaced("\"forward_ms\": [1, 2], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]",
                   "\"forward_ms\": [1, -2], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]") ==
          "s.json:5:24: column 'microbatches[1].forward_ms[1]': expected a number in [0, 1e+09] ms, found -2");
    CHECK(replaced("\"model_state_mb\": [100, 100]", "\"model_state_mb\": [100]") ==
          "s.json:7:21: column 'model_state_mb': expected 2 values (one per stage), found 1");
    CHECK(replaced("\"stages\": 2,", "") .find("column 'stages': missing required field") != std::string::npos);
    CHECK(replaced("\"peak_mb\": [20, 25]", "\"peak_mb\": [20, 5]").find("microbatches[1].peak_mb[1]") != std::string::npos);
    CHECK(replaced("\"activation_mb\": [5, 5]", "\"activation_mb\": [5]").find("network.activation_mb") != std::string::npos);
    CHECK(replaced("\"latency_ms\": 0.5", "\"latency_ms\": \"x\"").find("s.json:8:29: column 'network.latency_ms'") != std::string::npos);
    CHECK(replaced("\"forward_ms\": [1, 2], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 20]",
                   "\"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 20]")
              .find("s.json:4:5: column 'microbatches[0].forward_ms': missing required field") != std::string::npos);
    CHECK_THROWS_AS((void)read_scenario_json("/nonexistent/x.json"), pipeplan::input_error);
}

TEST_CASE("scenario JSON: every number has a range; errors give file, line, column, field and range") {
    // (from, to, field path, range text): one value of good_json replaced by an out-of-range one.
    struct bad_value {
        const char* from;
        const char* to;
        const char* field;
        const char* range;
        const char* token;  ///< the bad value, where the error points
    };
    const bad_value cases[] = {
        {"\"forward_ms\": [1, 2], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]",
         "\"forward_ms\": [1, 2e9], \"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]",
         "microbatches[1].forward_ms[1]", "[0, 1e+09] ms", "2e9"},
        {"\"backward_ms\": [2, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]",
         "\"backward_ms\": [1e308, 4], \"stored_mb\": [10, 10], \"peak_mb\": [20, 25]", "microbatches[1].backward_ms[0]",
         "[0, 1e+09] ms", "1e308"},
        {"\"stored_mb\": [10, 10], \"peak_mb\": [20, 25]", "\"stored_mb\": [10, -0.5], \"peak_mb\": [20, 25]",
         "microbatches[1].stored_mb[1]", "[0, 1e+09] MB", "-0.5"},
        {"\"peak_mb\": [20, 25]", "\"peak_mb\": [20, 1e10]", "microbatches[1].peak_mb[1]", "[0, 1e+09] MB", "1e10"},
        {"\"model_state_mb\": [100, 100]", "\"model_state_mb\": [100, 1.5e9]", "model_state_mb[1]", "[0, 1e+09] MB", "1.5e9"},
        {"\"latency_ms\": 0.5", "\"latency_ms\": 1e300", "network.latency_ms", "[0, 1e+09] ms", "1e300"},
        {"\"bandwidth_gbps\": 8", "\"bandwidth_gbps\": -8", "network.bandwidth_gbps", "[0, 1e+06] Gbit/s", "-8"},
        {"\"bandwidth_gbps\": 8", "\"bandwidth_gbps\": 8, \"intra_node_bandwidth_gbps\": 2e6",
         "network.intra_node_bandwidth_gbps", "[0, 1e+06] Gbit/s", "2e6"},
        {"\"bandwidth_gbps\": 8", "\"bandwidth_gbps\": 8, \"intra_node_latency_ms\": -1", "network.intra_node_latency_ms",
         "[0, 1e+09] ms", "-1"},
        {"\"bandwidth_gbps\": 8", "\"bandwidth_gbps\": 8, \"devices_per_node\": 0", "network.devices_per_node",
         "[1, 1048576]", "0"},
        {"\"activation_mb\": [5, 5]", "\"activation_mb\": [5, 1e12]", "network.activation_mb[1]", "[0, 1e+09] MB", "1e12"},
        {"\"stages\": 2,", "\"stages\": 2000000,", "stages", "[1, 1000000]", "2000000"},
        {"\"model_state_mb\": [100, 100]", "\"checkpoint_ratio\": [0.5, 1.5], \"model_state_mb\": [100, 100]",
         "checkpoint_ratio[1]", "[0, 1] (a ratio)", "1.5"},
    };
    for (const auto& c : cases) {
        std::string text = good_json;
        const std::size_t at = text.find(c.from);
        REQUIRE(at != std::string::npos);
        text.replace(at, std::strlen(c.from), c.to);
        const std::string e = error_of(text);
        CAPTURE(e);
        CHECK(e.rfind("s.json:", 0) == 0);
        CHECK(e.find(std::string("column '") + c.field + "': expected ") != std::string::npos);
        CHECK(e.find(c.range) != std::string::npos);
        // The line and column are those of the bad value.
        const auto where = pipeplan::position_at(text, text.find(c.token, at));
        CHECK(e.rfind("s.json:" + std::to_string(where.line) + ":" + std::to_string(where.column) + ": ", 0) == 0);
    }
    // The largest values in range are accepted.
    std::string edge = good_json;
    edge.replace(edge.find("\"latency_ms\": 0.5"), 17, "\"latency_ms\": 1e9");
    CHECK(parse_scenario_json(edge, "s.json").network.latency_ms == 1e9);
}

TEST_CASE("scenario JSON: devices, placement and checkpoint_ratio") {
    std::string t = good_json;
    auto with = [&](const std::string& extra) {
        std::string s = t;
        s.replace(s.find("\"model_state_mb\""), 0, extra + ",\n  ");
        return s;
    };
    // Two stages as two chunks on one device (interleaved with D = 1), ratios per stage.
    const scenario sc = parse_scenario_json(with(R"("devices": 1, "placement": [0, 0], "checkpoint_ratio": [0.5, 1])"),
                                            "s.json");
    CHECK(sc.devices == 1);
    CHECK(sc.placement == std::vector<std::uint32_t>{0, 0});
    CHECK(sc.ratio(0) == 0.5);
    CHECK(placement_of(sc).chunks() == 2);
    nlohmann::json j = sc;
    const scenario back = j.get<scenario>();
    CHECK(back.devices == 1);
    CHECK(back.placement == sc.placement);
    CHECK(back.checkpoint_ratio == sc.checkpoint_ratio);
    CHECK(error_of(with(R"("devices": 3)")).find("column 'devices': expected an integer in [1, 2]") != std::string::npos);
    CHECK(error_of(with(R"("devices": 1)")).find("need a 'placement'") != std::string::npos);
    CHECK(error_of(with(R"("devices": 2, "placement": [0, 2])")).find("'placement[1]': expected a device index in [0, 1]") !=
          std::string::npos);
    CHECK(error_of(with(R"("devices": 2, "placement": [0])")).find("column 'placement'") != std::string::npos);
    CHECK(error_of(with(R"("devices": 2, "placement": [1, 1])")).find("no stage runs on device 0") != std::string::npos);
    CHECK(error_of(with(R"("checkpoint_ratio": [0.5, 1.5])")).find("'checkpoint_ratio[1]'") != std::string::npos);
}

TEST_CASE("scenario JSON: a 2 MB file with an error at its end is located exactly") {
    const std::string mb = "{\"forward_ms\": [1, 2], \"backward_ms\": [2, 4], \"stored_mb\": [1, 1], \"peak_mb\": [2, 2]}";
    std::string text = "{\"stages\": 2, \"microbatches\": [\n";
    std::size_t lines = 1, count = 0;
    while (text.size() < (2u << 20)) {
        text += mb + ",\n";
        ++lines;
        ++count;
    }
    text += mb + "],\n\"model_state_mb\": [100,   \"x\"]}\n";
    lines += 2;
    const std::string e = error_of(text);
    CHECK(e == "s.json:" + std::to_string(lines) + ":27: column 'model_state_mb[1]': expected a number in [0, 1e+09] MB, "
               "found \"x\"");
    // The same file without the error reads, with every micro-batch.
    text.replace(text.find("\"x\""), 3, "100");
    CHECK(parse_scenario_json(text, "s.json").microbatches == count + 1);
}
