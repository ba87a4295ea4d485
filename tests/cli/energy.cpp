// CLI contract tests for `pipeplan energy`.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden.hpp"
#include "run_cli.hpp"

using pipeplan::test::read_text_file;
using pipeplan::test::run_cli;
using pipeplan::test::temp_path;

namespace {

/// Temp files of this suite, removed at the end of a test case.
struct scratch {
    std::vector<std::string> paths;
    std::string file(const std::string& suffix, const std::string& text = "") {
        paths.push_back(temp_path(suffix));
        if (!text.empty()) std::ofstream(paths.back()) << text;
        return paths.back();
    }
    ~scratch() {
        std::error_code ec;
        for (const auto& p : paths) std::filesystem::remove(p, ec);
    }
};

/// The golden scenario (tests/cli/golden.hpp) as text.
std::string golden_scenario() { return pipeplan::test::golden_scenario_json().dump(); }

}  // namespace

TEST_CASE("cli energy: frontier of 1f1b on the A100 model as JSON") {
    scratch s;
    const std::string sc = s.file(".json", golden_scenario());
    const auto sim = run_cli({"simulate", "--scenario", sc, "--schedule", "1f1b", "--json"});
    REQUIRE(sim.exit_code == 0);
    const double makespan = nlohmann::json::parse(sim.out)["makespan_ms"].get<double>();
    const auto r = run_cli({"energy", "--scenario", sc, "--schedule", "1f1b", "--gpu", "a100", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["min_time_ms"].get<double>() == doctest::Approx(makespan).epsilon(1e-12));
    const auto& f = j["frontier"];
    REQUIRE(f.size() > 3);
    CHECK(f[0]["time_ms"].get<double>() == doctest::Approx(makespan).epsilon(1e-9));
    for (std::size_t k = 1; k < f.size(); ++k) {
        CHECK(f[k]["time_ms"].get<double>() > f[k - 1]["time_ms"].get<double>());
        CHECK(f[k]["energy_j"].get<double>() < f[k - 1]["energy_j"].get<double>());
    }
    CHECK(j["energy_at_min_time_j"].get<double>() == f[0]["energy_j"].get<double>());
    CHECK(j["energy_at_min_time_j"].get<double>() < j["energy_all_max_j"].get<double>());
    CHECK(j["intrinsic_saving_j"].get<double>() > 0.0);
    CHECK(j["computations"] == 64);
    const auto& ch = j["chosen"];
    CHECK(ch["time_ms"].get<double>() == f[0]["time_ms"].get<double>());
    REQUIRE(ch["frequencies"].size() == 4);
    CHECK(ch["frequencies"][0].size() == 16);
    CHECK(ch["frequencies"][0][0]["op"] == "F0");
    const double mhz = ch["frequencies"][0][0]["mhz"].get<double>();
    CHECK(mhz >= 210.0);
    CHECK(mhz <= 1410.0);
}

TEST_CASE("cli energy: a target time picks a slower plan and reports the saving; SVG and trace") {
    scratch s;
    const std::string sc = s.file(".json", golden_scenario());
    const std::string svg = s.file(".svg"), trace = s.file(".json");
    const auto base = run_cli({"energy", "--scenario", sc, "--schedule", "adaptive", "--json"});
    REQUIRE(base.exit_code == 0);
    const double tmin = nlohmann::json::parse(base.out)["min_time_ms"].get<double>();
    const std::string target = std::to_string(tmin * 1.15);
    const auto r = run_cli({"energy", "--scenario", sc, "--schedule", "adaptive", "--target-ms", target, "--svg", svg,
                            "--trace", trace, "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& ch = j["chosen"];
    CHECK(ch["time_ms"].get<double>() <= tmin * 1.15 + 1e-9);
    CHECK(ch["time_ms"].get<double>() > tmin);
    CHECK(j["saving_j"].get<double>() > 0.0);
    CHECK(j["saving_fraction"].get<double>() > 0.0);
    CHECK(ch["energy_at_target_j"].get<double>() >= ch["energy_j"].get<double>());
    const std::string svg_text = read_text_file(svg);
    CHECK(svg_text.find("<svg") == 0);
    CHECK(svg_text.find("GPU clock") != std::string::npos);
    const auto tr = nlohmann::json::parse(read_text_file(trace));
    bool has_freq = false;
    for (const auto& e : tr["traceEvents"]) has_freq |= e.contains("args") && e["args"].contains("frequency_mhz");
    CHECK(has_freq);
    // Text output names the saving.
    const auto t = run_cli({"energy", "--scenario", sc, "--schedule", "gpipe", "--target-ms", target});
    REQUIRE(t.exit_code == 0);
    CHECK(t.out.find("intrinsic saving") != std::string::npos);
    CHECK(t.out.find("target") != std::string::npos);
}

TEST_CASE("cli energy: profile CSV, and errors") {
    scratch s;
    const std::string sc = s.file(".json", golden_scenario());
    const std::string good = s.file(".csv",
                                    "kind,stage,frequency_mhz,time_ms,energy_j\n"
                                    "F,*,1410,1,0.4\nF,*,1200,1.1,0.37\nF,*,1000,1.3,0.36\n"
                                    "B,*,1410,2,0.8\nB,*,1200,2.2,0.75\nB,*,1000,2.6,0.72\n"
                                    "idle,*,0,1000,60\n");
    const auto r = run_cli({"energy", "--scenario", sc, "--schedule", "1f1b", "--energy-profile", good, "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out)["idle_power_w"].get<double>() == doctest::Approx(60.0));

    const std::string bad = s.file(".csv", "kind,stage,frequency_mhz,time_ms,energy_j\nF,*,1410,1,0.4\nQ,*,1200,1,1\n");
    const auto e1 = run_cli({"energy", "--scenario", sc, "--schedule", "1f1b", "--energy-profile", bad});
    CHECK(e1.exit_code == 1);
    CHECK(e1.err.find(bad + ":3: column 'kind'") != std::string::npos);
    const auto e2 = run_cli({"energy", "--scenario", sc, "--schedule", "1f1b", "--target-ms", "1"});
    CHECK(e2.exit_code == 1);
    CHECK(e2.err.find("below the minimum iteration time") != std::string::npos);
    const auto e3 = run_cli({"energy", "--scenario", sc, "--schedule", "1f1b", "--gpu", "h100"});
    CHECK(e3.exit_code == 1);
    CHECK(e3.err.find("unknown GPU 'h100' (valid: a100)") != std::string::npos);
    const auto e4 = run_cli({"energy", "--scenario", sc, "--schedule", "1f1b", "--gpu", "a100", "--energy-profile", good});
    CHECK(e4.exit_code != 0);
}
