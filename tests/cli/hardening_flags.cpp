// Hardening of the flags of the later commands: plan, plan-show, energy, partition, shard,
// run-cpu and serve-plans. Every numeric flag is range-checked (the error names the flag and the
// allowed range), flags that do not apply are errors, values are never silently changed, usage
// and input errors exit 1 and resource limits exit 3. Every input is generated in the test.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "run_cli.hpp"

using pipeplan::test::contains;
using pipeplan::test::run_cli;
using pipeplan::test::temp_dir;
namespace fs = std::filesystem;

namespace {

/// The CLI failed with `code` and a message containing every `parts`; nothing on standard output.
void check_error(const std::vector<std::string>& args, std::initializer_list<std::string> parts, int code = 1) {
    const auto r = run_cli(args);
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    INFO("command: " << cmd);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == code);
    CHECK(r.out.empty());
    for (const auto& p : parts) CHECK(contains(r.err, p));
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
}

std::string small_batch(const temp_dir& d) {
    return d.file("b.csv", "input_tokens,target_tokens\n100,10\n200,20\n50,5\n300,30\n");
}

/// A two-stage scenario with two micro-batches.
std::string small_scenario(const temp_dir& d) {
    return d.file("s.json", R"({"stages": 2, "microbatches": [
      {"forward_ms": [1, 1], "backward_ms": [2, 2], "stored_mb": [1, 1], "peak_mb": [2, 2]},
      {"forward_ms": [1, 1], "backward_ms": [2, 2], "stored_mb": [1, 1], "peak_mb": [2, 2]}],
      "model_state_mb": [1, 1]})");
}

/// A chain of four layers in PipeDream's graph.txt format.
std::string small_graph(const temp_dir& d) {
    std::string g;
    for (int i = 0; i < 4; ++i)
        g += "node" + std::to_string(i) + " -- Linear -- forward_compute_time=" + std::to_string(1 + i) +
             ", backward_compute_time=2, activation_size=1000.0, parameter_size=100.0\n";
    for (int i = 0; i + 1 < 4; ++i) g += "\tnode" + std::to_string(i) + " -- node" + std::to_string(i + 1) + "\n";
    return d.file("g.txt", g);
}

}  // namespace

TEST_CASE("cli hardening flags: plan ranges, inapplicable flags, no silent change") {
    temp_dir d;
    const std::vector<std::string> base{"plan", "--model", "analytic:gpt-6.7b", "--stages", "2", "--layers-per-stage",
                                        "4", "--memory-mb", "40000", "--batch", small_batch(d)};
    REQUIRE(run_cli(base).exit_code == 0);
    // Ranges: the error names the flag and the allowed range.
    check_error(with(base, {"--tp", "-1"}), {"--tp", "[1, 4096]", "'-1'"});
    check_error(with(base, {"--tp", "0"}), {"--tp", "[1, 4096]"});
    check_error(with(base, {"--dp", "2147483647"}), {"--dp", "[1, 1024]"});
    check_error(with(base, {"--chunks", "4294967296"}), {"--chunks", "[1, 64]"});
    check_error(with(base, {"--zero-stage", "4", "--dp", "2"}), {"--zero-stage", "[0, 3]"});
    check_error(with(base, {"--max-seqlen", "0"}), {"--max-seqlen", "[1, 16777216]"});
    check_error(with(base, {"--bandwidth-gbps", "0"}), {"--bandwidth-gbps", "[0.001, 1000000]"});
    check_error(with(base, {"--bandwidth-gbps", "4.9e-324"}), {"--bandwidth-gbps", "[0.001, 1000000]"});
    check_error(with(base, {"--bandwidth-gbps", "inf"}), {"--bandwidth-gbps"});
    check_error(with(base, {"--latency-us", "nan"}), {"--latency-us", "[0, 1000000000]"});
    check_error(with(base, {"--latency-us", "-1"}), {"--latency-us"});
    check_error(with(base, {"--devices-per-node", "-1"}), {"--devices-per-node", "[1, 4096]"});
    check_error(with(base, {"--hidden-size", "-1"}), {"--hidden-size", "[1, 1048576]"});  // was silently the preset's
    check_error(with(base, {"--hidden-size", "0"}), {"--hidden-size"});
    check_error(with(base, {"--iteration", "-1"}), {"--iteration"});  // was silently 2^64 - 1
    check_error(with(base, {"--iteration", "18446744073709551616"}), {"--iteration"});
    check_error(with(base, {"--bound-tolerance", "-0.001"}), {"--bound-tolerance", "[0, 0.01]"});
    check_error(with(base, {"--bound-tolerance", "0.02"}), {"--bound-tolerance", "[0, 0.01]"});
    check_error(with(base, {"--bound-tolerance", "nan"}), {"--bound-tolerance"});
    check_error(with(base, {"--bound-tolerance", "0.01"}), {"planner: --bound-tolerance must lie in [0, 0.01)"});
    CHECK(run_cli(with(base, {"--bound-tolerance", "0"})).exit_code == 0);
    // --stages and --layers-per-stage given twice, or out of range.
    check_error({"plan", "--model", "analytic:gpt-6.7b", "--stages", "5000", "--layers-per-stage", "4", "--memory-mb",
                 "40000", "--batch", small_batch(d)},
                {"--stages", "[1, 4096]"});
    check_error({"plan", "--model", "analytic:gpt-6.7b", "--stages", "2", "--layers-per-stage", "0", "--memory-mb",
                 "40000", "--batch", small_batch(d)},
                {"--layers-per-stage", "[1, 65536]"});
    check_error({"plan", "--model", "analytic:gpt-6.7b", "--stages", "2", "--layers-per-stage", "4", "--memory-mb",
                 "1e10", "--batch", small_batch(d)},
                {"--memory-mb", "(0, 1000000000]"});
    // Flags that do not apply are errors, not ignored.
    check_error(with(base, {"--format", "json"}), {"--format does not apply without --out"});
    check_error(with(base, {"--zero-stage", "2"}), {"--zero-stage does not apply without --dp"});
    check_error(with(base, {"--intra-node-bandwidth-gbps", "50"}), {"--intra-node-bandwidth-gbps does not apply"});
    CHECK(run_cli(with(base, {"--intra-node-bandwidth-gbps", "50", "--devices-per-node", "2"})).exit_code == 0);
    // Several chunks per device would have been run as one stage per rank by 1f1b: an error.
    check_error(with(base, {"--chunks", "2", "--schedule", "1f1b"}), {"--chunks 2 does not apply to --schedule 1f1b"});
    CHECK(run_cli(with(base, {"--chunks", "2", "--schedule", "interleaved"})).exit_code == 0);
    check_error(with(base, {"--out", d / "p", "--format", "yaml"}), {"unknown --format 'yaml'"});
    CHECK(!fs::exists(d / "p"));
}

TEST_CASE("cli hardening flags: plan-show --rank is in range and present in the file") {
    temp_dir d;
    const std::string out = d / "plan";
    REQUIRE(run_cli({"plan", "--model", "analytic:gpt-6.7b", "--stages", "2", "--layers-per-stage", "4", "--memory-mb",
                     "40000", "--batch", small_batch(d), "--out", out})
                .exit_code == 0);
    const std::string rank0 = (fs::path(out) / "rank_0.plan").string();
    CHECK(run_cli({"plan-show", rank0, "--rank", "0"}).exit_code == 0);
    check_error({"plan-show", rank0, "--rank", "-1"}, {"--rank", "[0, 2147483647]"});  // was silently every rank
    check_error({"plan-show", rank0, "--rank", "1"}, {"--rank 1", "holds no program of that rank", "(it has: 0)"});
    check_error({"plan-show", rank0, "--rank", "x"}, {"--rank"});
}

TEST_CASE("cli hardening flags: energy ranges and inapplicable flags") {
    temp_dir d;
    const std::vector<std::string> base{"energy", "--scenario", small_scenario(d), "--schedule", "1f1b"};
    REQUIRE(run_cli(base).exit_code == 0);
    check_error(with(base, {"--chunks", "0"}), {"--chunks", "[1, 64]"});
    check_error(with(base, {"--chunks", "-1"}), {"--chunks", "[1, 64]"});
    // --chunks 3 on 1f1b would run one chunk per device: never silently replaced.
    check_error(with(base, {"--chunks", "3"}), {"--chunks 3 does not apply to --schedule 1f1b"});
    check_error(with(base, {"--checkpoint-ratio", "1.5"}), {"--checkpoint-ratio", "[0, 1]"});
    check_error(with(base, {"--checkpoint-ratio", "0.5"}), {"merak-* schedules only"});
    check_error(with(base, {"--memory-limit-mb", "0"}), {"--memory-limit-mb", "(0, 1000000000]"});
    check_error(with(base, {"--memory-limit-mb", "100"}), {"--memory-limit-mb does not apply to --schedule 1f1b"});
    check_error(with(base, {"--idle-power-w", "-1"}), {"--idle-power-w", "[0, 1000000]"});
    check_error(with(base, {"--idle-power-w", "nan"}), {"--idle-power-w"});
    check_error(with(base, {"--step-ms", "0"}), {"--step-ms", "(0, 1000000000]"});  // was silently the default
    check_error(with(base, {"--step-ms", "inf"}), {"--step-ms"});
    check_error(with(base, {"--target-ms", "-5"}), {"--target-ms", "(0, 1000000000]"});
    check_error(with(base, {"--target-ms", "1e400"}), {"--target-ms"});
    CHECK(run_cli({"energy", "--scenario", small_scenario(d), "--schedule", "adaptive", "--memory-limit-mb", "100"})
              .exit_code == 0);
}

TEST_CASE("cli hardening flags: partition ranges") {
    temp_dir d;
    const std::string g = small_graph(d);
    REQUIRE(run_cli({"partition", "--graph", g, "-n", "2"}).exit_code == 0);
    check_error({"partition", "--graph", g, "-n", "0"}, {"--workers", "[1, 4096]"});
    check_error({"partition", "--graph", g, "-n", "-3"}, {"--workers", "[1, 4096]"});
    check_error({"partition", "--graph", g, "-n", "2", "4294967297"}, {"--workers", "[1, 4096]"});
    check_error({"partition", "--graph", g, "-n", "2", "-b", "0"}, {"--bandwidth", "(0, 1000000000000000]"});
    check_error({"partition", "--graph", g, "-n", "2", "-b", "nan"}, {"--bandwidth"});
    check_error({"partition", "--graph", g, "-n", "2", "--activation-compression", "0"},
                {"--activation-compression", "(0, 1000000]"});
    check_error({"partition", "--graph", g, "-n", "2", "--memory-mb", "-1"}, {"--memory-mb", "(0, 1000000000]"});
    std::vector<std::string> many{"partition", "--graph", g, "-n"};
    for (int l = 0; l < 17; ++l) many.push_back("1");
    check_error(many, {"-n gives 17 levels; at most 16"});
}

TEST_CASE("cli hardening flags: shard ranges and --dec-seqlen only for encoder-decoder models") {
    const std::vector<std::string> base{"shard", "--model", "analytic:gpt-6.7b", "--stages", "4", "--seqlen", "512"};
    REQUIRE(run_cli(base).exit_code == 0);
    check_error({"shard", "--model", "analytic:gpt-6.7b", "--stages", "0", "--seqlen", "512"}, {"--stages", "[1, 4096]"});
    check_error({"shard", "--model", "analytic:gpt-6.7b", "--stages", "4", "--seqlen", "-1"},
                {"--seqlen", "[1, 16777216]"});
    check_error(with(base, {"--mbs", "0"}), {"--mbs", "[1, 1048576]"});
    check_error(with(base, {"--tp", "99999"}), {"--tp", "[1, 4096]"});
    check_error(with(base, {"--dec-seqlen", "64"}), {"--dec-seqlen does not apply to model 'analytic:gpt-6.7b'"});
    CHECK(run_cli({"shard", "--model", "analytic:t5-11b", "--stages", "4", "--seqlen", "512", "--dec-seqlen", "64"})
              .exit_code == 0);
}

TEST_CASE("cli hardening flags: run-cpu and serve-plans ranges; too many ranks exit 3") {
    temp_dir d;
    const std::string b = small_batch(d);
    const std::vector<std::string> run{"run-cpu", "--batch", b, "--stages", "2"};
    check_error({"run-cpu", "--batch", b, "--stages", "0"}, {"--stages", "[1, 256]"});
    check_error({"run-cpu", "--batch", b, "--stages", "-1"}, {"--stages", "[1, 256]"});  // not wrapped to 2^64 - 1
    check_error(with(run, {"--dp", "0"}), {"--dp", "[1, 256]"});
    check_error(with(run, {"--chunks", "0"}), {"--chunks", "[1, 64]"});
    check_error(with(run, {"--mbs", "0"}), {"--mbs", "[1, 1048576]"});
    check_error(with(run, {"--max-seqlen", "-1"}), {"--max-seqlen", "[0, 16777216]"});
    check_error(with(run, {"--seed", "-1"}), {"--seed"});
    check_error(with(run, {"--iterations", "0"}), {"--iterations", "[1, 1000000]"});
    check_error(with(run, {"--timeout-ms", "0"}), {"--timeout-ms", "[1, 86400000]"});
    check_error(with(run, {"--timeout-ms", "-5"}), {"--timeout-ms"});
    check_error({"run-cpu", "--batch", b, "--stages", "200", "--dp", "2"}, {"400 ranks", "at most 256"}, 3);
    const std::string batches = d / "batches";
    fs::create_directories(batches);
    std::ofstream(batches + "/0.csv") << "input_tokens,target_tokens\n10,2\n";
    const std::vector<std::string> serve{"serve-plans", "--batches", batches, "--store", "dir:" + (d / "store"),
                                         "--stages", "2"};
    check_error(with(serve, {"--threads", "0"}), {"--threads", "[1, 256]"});
    check_error(with(serve, {"--threads", "100000"}), {"--threads", "[1, 256]"});
    check_error(with(serve, {"--depth", "0"}), {"--depth", "[1, 1024]"});
    check_error(with(serve, {"--dp", "0"}), {"--dp"});
    check_error(with(serve, {"--dp", "300"}), {"600 ranks", "at most 256"}, 3);  // --model tiny: one thread per rank
    CHECK(!fs::exists(d / "store"));
    CHECK(run_cli(with(serve, {"--threads", "2", "--depth", "3"})).exit_code == 0);
}
