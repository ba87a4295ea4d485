// CLI contract tests for `pipeplan partition` and `pipeplan shard`.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"
#include "support.hpp"

using pipeplan::test::read_text_file;
using pipeplan::test::run_cli;
using pipeplan::test::temp_path;

TEST_CASE("pipeplan partition: VGG-16 on 4 workers, JSON and the partitioned graph" * PIPEPLAN_NEEDS_DATA()) {
    const std::string graph = (*pipeplan::test::shared_data_dir() / "layer_graphs" / "vgg16.txt").string();
    const std::string out = temp_path(".txt");
    const auto r = run_cli({"partition", "--graph", graph, "-n", "4", "-b", "1e9", "--out", out, "--json"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["levels"].size() == 1);
    const auto& st = j["levels"][0]["stages"];
    REQUIRE(st.size() == 2);
    CHECK(st[0]["start"] == 0);
    CHECK(st[0]["end"] == 17);
    CHECK(st[0]["replicas"] == 3);
    CHECK(st[1]["start"] == 17);
    CHECK(st[1]["end"] == 40);
    CHECK(st[1]["replicas"] == 1);
    for (const char* k : {"compute_s", "comm_s", "transfer_s"}) CHECK(st[0].contains(k));
    CHECK(j["time_per_minibatch_s"].get<double>() == doctest::Approx(0.205520896));
    CHECK(j["speedup_over_dp"].get<double>() == doctest::Approx(2.8377).epsilon(1e-4));
    CHECK(j["data_parallel_s"].get<double>() == doctest::Approx(0.583206382));
    const std::string written = read_text_file(out);
    CHECK(written.find("node2 -- ") != std::string::npos);
    CHECK(written.find(" -- stage_id=0\n") != std::string::npos);
    CHECK(written.find(" -- stage_id=1\n") != std::string::npos);
    CHECK(written.find(" -- stage_id=2") == std::string::npos);
    std::error_code ec;
    std::filesystem::remove(out, ec);

    const auto text = run_cli({"partition", "--graph", graph, "-n", "4"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("(0, 17) x3") != std::string::npos);
    CHECK(text.out.find("speedup over data parallelism 2.8377x") != std::string::npos);
}

TEST_CASE("pipeplan partition: errors") {
    const std::string bad = temp_path(".txt");
    {
        const auto r = run_cli({"partition", "--graph", "/nonexistent/g.txt", "-n", "4"});
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("/nonexistent/g.txt") != std::string::npos);
    }
    const auto r = run_cli({"partition", "--graph", bad, "-n", "4", "-b", "1e9", "1e9"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("-b needs one bandwidth per level") != std::string::npos);
}

TEST_CASE("pipeplan shard: GPT-6.7B (analytic) by every method") {
    const auto r = run_cli({"shard", "--model", "analytic:gpt-6.7b", "--stages", "4", "--seqlen", "2048", "--json"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["shardings"].size() == 3);
    CHECK(j["shardings"][0]["method"] == "layers");
    CHECK(j["shardings"][0]["layers"] == nlohmann::json::array({8, 8, 8, 8}));
    int sum = 0;
    for (int n : j["shardings"][2]["layers"]) sum += n;
    CHECK(sum == 32);
    CHECK(j["time_reduction_vs_layers"].get<double>() >= 0);
    CHECK(j["time_reduction_vs_parameters"].get<double>() >= 0);
    const auto e = run_cli({"shard", "--model", "analytic:gpt-6.7b", "--stages", "40", "--seqlen", "2048"});
    CHECK(e.exit_code == 1);
    CHECK(e.err.find("40 stages is invalid for 32 layers") != std::string::npos);
}

TEST_CASE("pipeplan split --layers: non-uniform stages through split and simulate") {
    const std::string batch = temp_path(".csv");
    {
        std::string text = "task,input_tokens,target_tokens\n";
        for (int i = 0; i < 24; ++i) text += "t," + std::to_string(64 + 37 * i) + "," + std::to_string(8 + i) + "\n";
        std::FILE* f = std::fopen(batch.c_str(), "w");
        REQUIRE(f != nullptr);
        std::fputs(text.c_str(), f);
        std::fclose(f);
    }
    const std::string scenario = temp_path(".json");
    const std::vector<std::string> common{"split", "--model", "analytic:gpt-6.7b", "--memory-mb", "40000", "--tp", "2",
                                          "--batch", batch};
    auto args = common;
    for (const char* s : {"--layers", "11,9,7,5", "--scenario-out", scenario.c_str(), "--json"}) args.push_back(s);
    const auto r = run_cli(args);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(nlohmann::json::parse(r.out)["stages"] == 4);
    const auto sc = nlohmann::json::parse(read_text_file(scenario));
    REQUIRE(sc["stages"] == 4);
    // Layer times scale with the layer counts: stage 0 (11 layers + embedding) > stage 1 (9) > stage 2 (7).
    for (const auto& mb : sc["microbatches"]) {
        const auto& f = mb["forward_ms"];
        CHECK(f[0].get<double>() > f[1].get<double>());
        CHECK(f[1].get<double>() / f[2].get<double>() == doctest::Approx(9.0 / 7.0).epsilon(1e-6));
    }
    const auto sim = run_cli({"simulate", "--scenario", scenario, "--schedule", "1f1b", "--json"});
    REQUIRE_MESSAGE(sim.exit_code == 0, sim.err);
    CHECK(nlohmann::json::parse(sim.out)["makespan_ms"].get<double>() > 0);

    // The uniform layout written as --layers gives the same split as --stages/--layers-per-stage.
    auto uni = common;
    for (const char* s : {"--layers", "8,8,8,8", "--json"}) uni.push_back(s);
    auto ref = common;
    for (const char* s : {"--stages", "4", "--layers-per-stage", "8", "--json"}) ref.push_back(s);
    const auto a = run_cli(uni), b = run_cli(ref);
    REQUIRE(a.exit_code == 0);
    REQUIRE(b.exit_code == 0);
    CHECK(nlohmann::json::parse(a.out)["objective_ms"] == nlohmann::json::parse(b.out)["objective_ms"]);

    auto both = common;
    for (const char* s : {"--layers", "8,8", "--stages", "2"}) both.push_back(s);
    const auto e = run_cli(both);
    CHECK(e.exit_code == 1);
    CHECK(e.err.find("--layers replaces --stages") != std::string::npos);
    auto zero = common;
    for (const char* s : {"--layers", "8,0"}) zero.push_back(s);
    const auto z = run_cli(zero);
    CHECK(z.exit_code == 1);
    CHECK(z.err.find("entry 1 = 0 is invalid") != std::string::npos);
    std::error_code ec;
    std::filesystem::remove(batch, ec);
    std::filesystem::remove(scenario, ec);
}
