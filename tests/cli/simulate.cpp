// CLI contract tests for `pipeplan simulate`.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"

using pipeplan::test::read_text_file;
using pipeplan::test::run_cli;
using pipeplan::test::temp_path;

namespace {

/// Removes the scenario files this suite wrote when the test program ends.
struct temp_files {
    std::vector<std::string> paths;
    ~temp_files() {
        std::error_code ec;
        for (const auto& p : paths) std::filesystem::remove(p, ec);
    }
};
temp_files& written() {
    static temp_files t;
    return t;
}

/// Writes the golden scenario of issue 4 (optionally edited) to a fresh temp file.
std::string golden_file(const std::function<void(nlohmann::json&)>& edit = {}) {
    const double m[] = {1, .8, 1.2, .9, 1.1, .7, 1.4, .6};
    const double base[] = {4, 4, 2, 2};
    nlohmann::json j;
    j["stages"] = 4;
    for (double x : m) {
        nlohmann::json mb;
        for (double b : base) {
            mb["forward_ms"].push_back(b * x);
            mb["backward_ms"].push_back(2 * b * x);
            mb["stored_mb"].push_back(8000 * x);
            mb["peak_mb"].push_back(16000 * x);
        }
        j["microbatches"].push_back(mb);
    }
    j["model_state_mb"] = {4000, 4000, 4000, 4000};
    if (edit) edit(j);
    const std::string path = temp_path(".json");
    std::ofstream(path) << j.dump(2);
    written().paths.push_back(path);
    return path;
}

}  // namespace

TEST_CASE("cli simulate: 1f1b golden case as JSON") {
    const auto r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "1f1b", "--json"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["makespan_ms"].get<double>() == doctest::Approx(120.4));
    CHECK(j["lower_bound_ms"].get<double>() == doctest::Approx(99.6));
    CHECK(j["peak_memory_mb"][0].get<double>() == doctest::Approx(48000));
    CHECK(j["bubble_fraction"].size() == 4);
    CHECK(j["device_orders"][0].get<std::vector<std::string>>() ==
          std::vector<std::string>{"F0", "F1", "F2", "F3", "B0", "F4", "B1", "F5", "B2", "F6", "B3", "F7", "B4", "B5", "B6", "B7"});
}

TEST_CASE("cli simulate: every schedule name runs") {
    const std::string file = golden_file();
    for (const char* s : {"gpipe", "1f1b", "interleaved", "adaptive", "zb-h1", "merak-early", "merak-last", "merak-critical"}) {
        CAPTURE(s);
        const auto r = run_cli({"simulate", "--scenario", file, "--schedule", s, "--json"});
        REQUIRE(r.exit_code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["makespan_ms"].get<double>() >= j["lower_bound_ms"].get<double>());
        CHECK(j["device_orders"].size() == 4);
    }
    const auto z = nlohmann::json::parse(run_cli({"simulate", "--scenario", file, "--schedule", "zb-h1", "--json"}).out);
    CHECK(z["device_orders"][0].dump().find("\"W0\"") != std::string::npos);
    const auto e = nlohmann::json::parse(run_cli({"simulate", "--scenario", file, "--schedule", "merak-early", "--json"}).out);
    CHECK(e["device_orders"][0].dump().find("\"R7\"") != std::string::npos);
    CHECK(e["device_orders"][0].dump().find("\"f7\"") != std::string::npos);
}

TEST_CASE("cli simulate: interleaved chunks print as F3.1") {
    const auto r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "interleaved", "--chunks", "2", "--json"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["device_orders"][0][0] == "F0.0");
    CHECK(j["device_orders"][0].dump().find("\"B3.1\"") != std::string::npos);
    CHECK(j["chunks"] == 2);
}

TEST_CASE("cli simulate: adaptive under a memory limit, order search, trace and SVG") {
    const std::string file = golden_file();
    const auto a = run_cli({"simulate", "--scenario", file, "--schedule", "adaptive", "--json"});
    REQUIRE(a.exit_code == 0);
    CHECK(nlohmann::json::parse(a.out)["makespan_ms"].get<double>() <= 108.4 + 1e-9);
    const std::string trace = temp_path(".json"), svg = temp_path(".svg");
    const auto h = run_cli({"simulate", "--scenario", file, "--schedule", "adaptive", "--memory-limit-mb", "48000",
                            "--trace", trace, "--svg", svg, "--json"});
    REQUIRE(h.exit_code == 0);
    const auto j = nlohmann::json::parse(h.out);
    CHECK(j["makespan_ms"].get<double>() < 120.4);
    CHECK(j["within_memory_limit"] == true);
    for (const auto& p : j["peak_memory_mb"]) CHECK(p.get<double>() <= 48000 + 1e-6);
    const auto t = nlohmann::json::parse(read_text_file(trace));
    CHECK(t["traceEvents"].size() > 64);
    const std::string s = read_text_file(svg);
    CHECK(s.rfind("<svg", 0) == 0);
    CHECK(s.find("</svg>") != std::string::npos);
    const auto o = run_cli({"simulate", "--scenario", file, "--schedule", "adaptive", "--memory-limit-mb", "48000",
                            "--search-order", "--seed", "3", "--json"});
    REQUIRE(o.exit_code == 0);
    const auto oj = nlohmann::json::parse(o.out);
    CHECK(oj["makespan_ms"].get<double>() <= j["makespan_ms"].get<double>() + 1e-9);
    CHECK(oj["microbatch_order"].size() == 8);
    const auto o2 = run_cli({"simulate", "--scenario", file, "--schedule", "adaptive", "--memory-limit-mb", "48000",
                             "--search-order", "--seed", "3", "--json"});
    CHECK(o2.out == o.out);  // deterministic for a seed
    std::filesystem::remove(trace);
    std::filesystem::remove(svg);
}

TEST_CASE("cli simulate: human-readable summary") {
    const auto r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "gpipe"});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("makespan 121.600 ms") != std::string::npos);
    CHECK(r.out.find("device 3") != std::string::npos);
}

TEST_CASE("cli simulate: bad input names file, line and field; nothing is written") {
    const std::string svg = temp_path(".svg");
    auto neg = golden_file([](nlohmann::json& j) { j["microbatches"][3]["forward_ms"][2] = -1; });
    auto r = run_cli({"simulate", "--scenario", neg, "--schedule", "1f1b", "--svg", svg});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(neg + ":") != std::string::npos);
    CHECK(r.err.find("microbatches[3].forward_ms[2]") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(svg));

    auto missing = golden_file([](nlohmann::json& j) { j["microbatches"][1].erase("peak_mb"); });
    r = run_cli({"simulate", "--scenario", missing, "--schedule", "1f1b"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("microbatches[1].peak_mb': missing required field") != std::string::npos);

    auto short_arr = golden_file([](nlohmann::json& j) { j["model_state_mb"] = {1, 2}; });
    r = run_cli({"simulate", "--scenario", short_arr, "--schedule", "1f1b"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("model_state_mb': expected 4 values") != std::string::npos);

    const std::string broken = temp_path(".json");
    std::ofstream(broken) << "{\n  \"stages\": 4,\n  \"microbatches\": [\n";
    r = run_cli({"simulate", "--scenario", broken, "--schedule", "1f1b"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(broken + ":4: invalid JSON") != std::string::npos);

    r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "2f2b"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("gpipe|1f1b|interleaved") != std::string::npos);

    r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "adaptive", "--memory-limit-mb", "1000"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("memory limit") != std::string::npos);

    r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "interleaved", "--chunks", "0"});
    CHECK(r.exit_code == 1);

    r = run_cli({"simulate", "--schedule", "1f1b"});
    CHECK(r.exit_code != 0);  // --scenario is required (CLI11 usage error)
    std::filesystem::remove(broken);
}
