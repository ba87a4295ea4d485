// CLI contract tests for `pipeplan simulate`.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
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

/// Writes the golden scenario (tests/cli/golden.hpp; optionally edited) to a fresh temp file.
std::string golden_file(const std::function<void(nlohmann::json&)>& edit = {}) {
    nlohmann::json j = pipeplan::test::golden_scenario_json();
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
    for (const char* s : {"gpipe", "1f1b", "interleaved", "adaptive", "zb-h1", "merak-early", "merak-last", "merak-critical",
                          "zb-v", "v-half", "v-min"}) {
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

TEST_CASE("cli simulate: dualpipe-v with --overlap-factor") {
    const std::string file = golden_file();
    auto run = [&](const char* factor) {
        const auto r = run_cli({"simulate", "--scenario", file, "--schedule", "dualpipe-v", "--overlap-factor", factor, "--json"});
        REQUIRE(r.exit_code == 0);
        return nlohmann::json::parse(r.out);
    };
    const auto none = run("1"), half = run("0.5");
    CHECK(none["makespan_ms"].get<double>() >= none["lower_bound_ms"].get<double>());
    CHECK(half["makespan_ms"].get<double>() >= half["lower_bound_ms"].get<double>());
    CHECK(half["makespan_ms"].get<double>() < none["makespan_ms"].get<double>());  // the overlap pays
    CHECK(half["lower_bound_ms"].get<double>() <= none["lower_bound_ms"].get<double>());
    CHECK(none["device_orders"].size() == 4);
    const auto bad = run_cli({"simulate", "--scenario", file, "--schedule", "dualpipe-v", "--overlap-factor", "1.5"});
    CHECK(bad.exit_code != 0);
    CHECK(bad.err.find("--overlap-factor") != std::string::npos);
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
    CHECK(r.err.find(broken + ":4:1: invalid JSON") != std::string::npos);

    r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "2f2b"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("unknown schedule '2f2b' (valid: gpipe, 1f1b, interleaved") != std::string::npos);

    r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "adaptive", "--memory-limit-mb", "1000"});
    CHECK(r.exit_code == 3);  // one micro-batch alone does not fit: a limit failure
    CHECK(r.err.find("memory limit") != std::string::npos);

    r = run_cli({"simulate", "--scenario", golden_file(), "--schedule", "interleaved", "--chunks", "0"});
    CHECK(r.exit_code == 1);

    r = run_cli({"simulate", "--schedule", "1f1b"});
    CHECK(r.exit_code != 0);  // --scenario is required (CLI11 usage error)
    std::filesystem::remove(broken);
}

namespace {

/// 1F1B orders of the golden case (S = 4, M = 8) as `--orders` text, one device per line.
std::vector<std::string> one_f_one_b_lines() {
    std::vector<std::string> lines;
    for (int s = 0; s < 4; ++s) {
        std::string l;
        const int w = 3 - s;
        auto add = [&](char k, int j) { l += (l.empty() ? "" : " ") + std::string(1, k) + std::to_string(j); };
        for (int j = 0; j < w; ++j) add('F', j);
        for (int i = 0; i + w < 8; ++i) {
            add('F', i + w);
            add('B', i);
        }
        for (int j = 8 - w; j < 8; ++j) add('B', j);
        lines.push_back(l);
    }
    return lines;
}

std::string orders_file(const std::vector<std::string>& lines) {
    const std::string path = temp_path(".txt");
    std::ofstream out(path);
    out << "# device orders, one device per line\n";
    for (const auto& l : lines) out << l << "\n";
    written().paths.push_back(path);
    return path;
}

}  // namespace

TEST_CASE("cli simulate: a fixed-order schedule over --memory-limit-mb fails with exit 3") {
    const std::string file = golden_file();
    // 1F1B's peak on device 0 is 48000 MB (docs/schedules.md): 4000 model + 3 stored + 1 peak.
    auto r = run_cli({"simulate", "--scenario", file, "--schedule", "1f1b", "--memory-limit-mb", "40000", "--json"});
    CHECK(r.exit_code == 3);
    INFO("stderr: " << r.err);
    CHECK(r.err.find("exceeds the memory limit on device 0") != std::string::npos);
    CHECK(r.err.find("peak 48000") != std::string::npos);
    CHECK(r.err.find("during op ") != std::string::npos);
    CHECK(r.err.find("limit 40000") != std::string::npos);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["within_memory_limit"] == false);
    // Within the limit: exit 0; adaptive plans under the same limit.
    CHECK(run_cli({"simulate", "--scenario", file, "--schedule", "1f1b", "--memory-limit-mb", "48000"}).exit_code == 0);
    const auto a = run_cli({"simulate", "--scenario", file, "--schedule", "adaptive", "--memory-limit-mb", "40000", "--json"});
    CHECK(a.exit_code == 0);
    CHECK(nlohmann::json::parse(a.out)["within_memory_limit"] == true);
    // Merak and --orders are fixed orders too.
    CHECK(run_cli({"simulate", "--scenario", file, "--schedule", "merak-last", "--memory-limit-mb", "4100"}).exit_code == 3);
    CHECK(run_cli({"simulate", "--scenario", file, "--orders", orders_file(one_f_one_b_lines()), "--memory-limit-mb",
                   "40000"})
              .exit_code == 3);
}

TEST_CASE("cli simulate: --checkpoint-ratio for the merak-* schedules only") {
    const std::string file = golden_file();
    auto r = run_cli({"simulate", "--scenario", file, "--schedule", "merak-early", "--checkpoint-ratio", "0.5", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    // r = 0.5 on S = 4: stages 0, 1 checkpoint (r_s = 0.5, 0.25), stages 2, 3 do not (F).
    CHECK(j["device_orders"][0][0] == "f0");
    CHECK(j["device_orders"][1][0] == "f0");
    CHECK(j["device_orders"][2][0] == "F0");
    CHECK(j["device_orders"][3][0] == "F0");
    r = run_cli({"simulate", "--scenario", file, "--schedule", "1f1b", "--checkpoint-ratio", "0.5"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("merak-* schedules only") != std::string::npos);
    r = run_cli({"simulate", "--scenario", file, "--schedule", "merak-last", "--checkpoint-ratio", "1.5"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("[0, 1]") != std::string::npos);
}

TEST_CASE("cli simulate --orders: researchers' own device orders") {
    const std::string file = golden_file();
    const auto lines = one_f_one_b_lines();
    auto r = run_cli({"simulate", "--scenario", file, "--orders", orders_file(lines), "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["schedule"] == "orders");
    CHECK(j["makespan_ms"].get<double>() == doctest::Approx(120.4).epsilon(1e-12));  // = 1F1B's
    CHECK(j["device_orders"][0][0] == "F0");

    auto fails = [&](const std::vector<std::string>& ls, const std::string& what, int line) {
        const std::string path = orders_file(ls);
        const auto e = run_cli({"simulate", "--scenario", file, "--orders", path});
        CHECK(e.exit_code == 1);
        INFO("stderr: " << e.err);
        CHECK(e.err.find(path + ":" + std::to_string(line) + ":") != std::string::npos);
        CHECK(e.err.find(what) != std::string::npos);
    };
    auto edit = [&](int device, const std::string& from, const std::string& to) {
        auto ls = lines;
        const auto p = ls[static_cast<std::size_t>(device)].find(from);
        REQUIRE(p != std::string::npos);
        ls[static_cast<std::size_t>(device)].replace(p, from.size(), to);
        return ls;
    };
    // Line 1 is a comment, so device d is on line d + 2.
    fails(edit(2, " B7", ""), "device 2, position 15, op B7': missing", 4);
    fails(edit(1, "F4", "F3"), "device 1, position 6, op F3': appears twice", 3);
    fails(edit(3, "F0 B0", "B0 F0"), "device 3, position 0, op B0': B before its forward", 5);
    fails(edit(0, "F0", "X0"), "device 0, position 0, op X0': not an op", 2);
    fails(edit(0, "F0", "F9"), "op F9': micro-batch out of range", 2);
    fails(edit(0, "F0", "F0.1"), "op F0.1': chunk out of range", 2);
    fails(edit(0, "F0", "R0"), "R before its forward", 2);
    // Device 0 runs B0 before F1; device 1 needs F1 before its B0: a deadlock across devices.
    fails(edit(0, "F0 F1 F2 F3 B0", "F0 B0 F1 F2 F3"), "device 0, position 1, op B0': deadlock", 2);
    auto three = lines;
    three.pop_back();
    const std::string short_file = orders_file(three);
    r = run_cli({"simulate", "--scenario", file, "--orders", short_file});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("has 3 device lines, the placement has 4 devices") != std::string::npos);
    r = run_cli({"simulate", "--scenario", file, "--orders", orders_file(lines), "--schedule", "1f1b"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("exactly one of --schedule") != std::string::npos);
    r = run_cli({"simulate", "--scenario", file, "--orders", "/nonexistent/orders.txt"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("cannot open file") != std::string::npos);
}

TEST_CASE("cli simulate: --max-pending-w for the V schedules; refused for the others") {
    const std::string file = golden_file();
    for (const char* n : {"0", "1", "3"}) {
        CAPTURE(n);
        const auto r = run_cli({"simulate", "--scenario", file, "--schedule", "zb-v", "--max-pending-w", n, "--json"});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["makespan_ms"].get<double>() >= j["lower_bound_ms"].get<double>() * (1 - 1e-12));
        CHECK(j["device_orders"].size() == 4);
    }
    const auto other = run_cli({"simulate", "--scenario", file, "--schedule", "zb-h1", "--max-pending-w", "2"});
    CHECK(other.exit_code == 1);
    CHECK(other.err.find("--max-pending-w does not apply") != std::string::npos);
}
