// CLI contract tests for `pipeplan partition` and `pipeplan shard`.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <system_error>

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
