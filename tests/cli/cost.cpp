// CLI contract tests for `pipeplan cost` and `pipeplan profile-error`.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"
#include "support.hpp"

using pipeplan::test::run_cli;

namespace {

std::string profiles() { return (*pipeplan::test::shared_data_dir() / "cost_models").string(); }

nlohmann::json cost_json(std::vector<std::string> args) {
    args.insert(args.begin(), "cost");
    args.push_back("--json");
    const auto r = run_cli(args);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("cli cost: golden values at an unprofiled point (--interpolation linear)" * PIPEPLAN_NEEDS_DATA()) {
    auto j = cost_json({"--profiles", profiles(), "--model", "gpt_6.7b", "--tp", "2", "--recompute", "none",
                        "--component", "encoder", "--mbs", "3", "--seqlen", "600", "--interpolation", "linear"});
    CHECK(j["forward_ms"].get<double>() == doctest::Approx(2.7103).epsilon(1e-4));
    for (const char* k : {"backward_ms", "stored_mb", "peak_mb"}) CHECK(j[k].is_number());
    CHECK(j["status"]["forward_ms"] == "ok");
    j = cost_json({"--profiles", profiles(), "--model", "gpt_6.7b", "--tp", "2", "--recompute", "none",
                   "--component", "encoder", "--mbs", "5", "--seqlen", "1500", "--interpolation", "linear"});
    CHECK(j["backward_ms"].get<double>() == doctest::Approx(18.068).epsilon(1e-4));
    j = cost_json({"--profiles", profiles(), "--model", "t5_11b", "--tp", "4", "--component", "encoder", "--mbs",
                   "2", "--seqlen", "512", "--interpolation", "linear"});
    CHECK(j["forward_ms"].get<double>() == doctest::Approx(1.93));
    // The default mode agrees with linear at a profiled point: the median of its 9 repeated
    // measurements (1.78 ... 2.16); dynapipe takes their maximum, as DynaPipe's reader does.
    for (const char* mode : {"default", "dynapipe"}) {
        j = cost_json({"--profiles", profiles(), "--model", "t5_11b", "--tp", "4", "--component", "encoder",
                       "--mbs", "2", "--seqlen", "512", "--interpolation", mode});
        CHECK(j["forward_ms"].get<double>() == doctest::Approx(std::string(mode) == "dynapipe" ? 2.16 : 1.93));
        CHECK(j["interpolation"] == mode);
    }
}

TEST_CASE("cli cost: null when out of range or unsupported" * PIPEPLAN_NEEDS_DATA()) {
    auto j = cost_json({"--profiles", profiles(), "--model", "gpt_6.7b", "--tp", "2", "--mbs", "4096", "--seqlen",
                        "600"});
    for (const char* k : {"forward_ms", "backward_ms", "stored_mb", "peak_mb"}) {
        CHECK(j[k].is_null());
        CHECK(j["status"][k] == "out of profiled range");
    }
    j = cost_json({"--profiles", profiles(), "--model", "gpt_6.7b", "--tp", "2", "--mbs", "1", "--seqlen",
                   "20000"});
    CHECK(j["forward_ms"].is_null());
    // The LM head has timings but no activation profile.
    j = cost_json({"--profiles", profiles(), "--model", "gpt_6.7b", "--tp", "2", "--component", "postprocess",
                   "--mbs", "2", "--seqlen", "600"});
    CHECK(j["forward_ms"].is_number());
    CHECK(j["stored_mb"].is_null());
    CHECK(j["status"]["stored_mb"] == "unsupported");
    // Readable table without --json.
    const auto r = run_cli({"cost", "--profiles", profiles(), "--model", "gpt_6.7b", "--tp", "2", "--mbs", "4096",
                            "--seqlen", "600"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("forward_ms") != std::string::npos);
    CHECK(r.out.find("out of profiled range") != std::string::npos);
}

TEST_CASE("cli cost: bad model name, bad profile path, bad CSV, missing options" * PIPEPLAN_NEEDS_DATA()) {
    auto r = run_cli({"cost", "--profiles", profiles(), "--model", "gpt_175b", "--mbs", "1", "--seqlen", "64"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("gpt_175b") != std::string::npos);
    CHECK(r.err.find("gpt_6.7b, t5_11b") != std::string::npos);

    r = run_cli({"cost", "--profiles", "/nonexistent/profiles", "--model", "gpt_6.7b", "--mbs", "1", "--seqlen",
                 "64"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("/nonexistent/profiles") != std::string::npos);

    r = run_cli({"cost", "--model", "gpt_6.7b", "--mbs", "1", "--seqlen", "64"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("--profiles") != std::string::npos);

    r = run_cli({"cost", "--profiles", profiles(), "--model", "gpt_6.7b", "--recompute", "most", "--mbs", "1",
                 "--seqlen", "64"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("none, selective, full") != std::string::npos);

    r = run_cli({"cost", "--profiles", profiles(), "--model", "gpt_6.7b", "--interpolation", "cubic", "--mbs", "1",
                 "--seqlen", "64"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("linear, dynapipe, default") != std::string::npos);

    r = run_cli({"cost", "--profiles", profiles(), "--model", "t5_11b", "--component", "decoder", "--mbs", "1",
                 "--seqlen", "64"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("--dec-seqlen") != std::string::npos);

    // A malformed profile: the message names file, line and column.
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("pipeplan_cli_cost_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "bad_timing.csv") << "tp,recompute,component,phase,enc_seqlen,dec_seqlen,mbs,time_ms\n"
                                             "1,none,encoder,forward,16,0,1,1.5\n"
                                             "1,none,encoder,forward,32,0,1,slow\n";
    std::ofstream(dir / "bad_activation.csv") << "tp,recompute,component,kind,enc_seqlen,dec_seqlen,mbs,memory_mb\n";
    std::ofstream(dir / "bad_model_state.csv") << "tp,recompute,component,memory_mb\n";
    r = run_cli({"cost", "--profiles", dir.string(), "--model", "bad", "--mbs", "1", "--seqlen", "20"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("bad_timing.csv:3") != std::string::npos);
    CHECK(r.err.find("time_ms") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("cli cost: analytic model") {
    const auto j = cost_json({"--model", "analytic:gpt-6.7b", "--tp", "2", "--mbs", "3", "--seqlen", "600"});
    CHECK(j["forward_ms"].get<double>() > 0);
    CHECK(j["backward_ms"].get<double>() > j["forward_ms"].get<double>());
    CHECK(j["stored_mb"].get<double>() > 0);
    CHECK(j["peak_mb"].get<double>() > 0);
    const auto r = run_cli({"cost", "--model", "analytic:gpt-9000", "--mbs", "1", "--seqlen", "64"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("gpt-6.7b") != std::string::npos);  // lists the presets
}

TEST_CASE("cli profile-error: leave-one-out table for both models" * PIPEPLAN_NEEDS_DATA()) {
    const auto r = run_cli({"profile-error", "--profiles", profiles()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    for (const char* row : {"| gpt_6.7b | time |", "| gpt_6.7b | memory |", "| t5_11b | time |",
                            "| t5_11b | memory |"})
        CHECK(r.out.find(row) != std::string::npos);
    CHECK(r.out.find("quadratic-shape median") != std::string::npos);
}
