// CLI contract tests for `pipeplan` (no arguments) and `pipeplan calibrate`.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include <string>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"
#include "support.hpp"

using pipeplan::test::run_cli;

TEST_CASE("cli: pipeplan with no arguments prints the default analytic model") {
    const auto r = run_cli({});
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("analytic gpt-6.7b on a100-40gb") != std::string::npos);
    for (const char* col : {"seqlen", "forward_ms", "backward_ms", "stored_mb", "peak_mb"})
        CHECK(r.out.find(col) != std::string::npos);
    // One table row per sequence length, with its activation memory from the closed form:
    // seqlen 2048, mbs 1: 2048·4096·(34 + 5·32·2048/4096) B = 956.3 MB.
    CHECK(r.out.find("\n       512 ") != std::string::npos);
    CHECK(r.out.find("\n      8192 ") != std::string::npos);
    CHECK(r.out.find("956.3") != std::string::npos);
    CHECK(r.out.find("ZeRO") != std::string::npos);
    // The end-to-end plan (its summary is checked in plan.cpp).
    CHECK(r.out.find("Planning one iteration end to end") != std::string::npos);
}

TEST_CASE("cli: pipeplan calibrate rejects unknown presets and missing options") {
    auto r = run_cli({"calibrate", "--profiles", ".", "--model", "gpt_6.7b", "--preset", "gpt-7b"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("unknown model preset 'gpt-7b'") != std::string::npos);
    CHECK(r.err.find("llama-3-8b") != std::string::npos);
    r = run_cli({"calibrate", "--profiles", ".", "--model", "gpt_6.7b", "--preset", "gpt-6.7b", "--hardware", "v100"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("valid: a100-40gb, h100-sxm, h200") != std::string::npos);
    r = run_cli({"calibrate", "--model", "gpt_6.7b", "--preset", "gpt-6.7b"});
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("--profiles") != std::string::npos);
}

TEST_CASE("cli: pipeplan calibrate on the real profiles" * PIPEPLAN_NEEDS_DATA()) {
    const std::string dir = (*pipeplan::test::shared_data_dir() / "cost_models").string();
    auto r = run_cli({"calibrate", "--profiles", dir, "--model", "gpt_6.7b", "--preset", "gpt-6.7b", "--tp", "2",
                      "--json"});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["tp"] == nlohmann::json::array({2}));
    CHECK(j["time"]["after"]["median"].get<double>() < j["time"]["before"]["median"].get<double>());
    CHECK(j["memory"]["after"]["p90"].get<double>() < j["memory"]["before"]["p90"].get<double>());
    CHECK(j["time_factors"].size() == 4);  // encoder and LM head, forward and backward

    r = run_cli({"calibrate", "--profiles", dir, "--model", "t5_11b", "--preset", "t5-11b", "--tp", "4",
                 "--recompute", "selective"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("time (forward + backward)") != std::string::npos);
    CHECK(r.out.find("decoder") != std::string::npos);

    r = run_cli({"calibrate", "--profiles", dir, "--model", "gpt_6.7b", "--preset", "t5-11b"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("disagree") != std::string::npos);
    r = run_cli({"calibrate", "--profiles", dir, "--model", "gpt_6.7b", "--preset", "gpt-6.7b", "--tp", "3"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("profiled: 1, 2, 4, 8") != std::string::npos);
}
