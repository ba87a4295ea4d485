// CLI contract tests for `pipeplan run-cpu`: JSON keys, the reference check passing
// for several schedules, dp and --mbs, plans through a directory store, bad input; and for
// `pipeplan serve-plans` (tiny and real models) with `pipeplan fetch-plan` reading plans back.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"
#include "support.hpp"

using pipeplan::test::run_cli;

namespace {

std::string small_batch() {
    const std::string path = pipeplan::test::temp_path(".csv");
    std::ofstream out(path);
    out << "input_tokens,target_tokens\n";
    unsigned x = 99;
    for (int i = 0; i < 20; ++i) {
        x = x * 1103515245u + 12345u;
        out << 1 + (x >> 8) % 14 << "," << 1 + (x >> 20) % 4 << "\n";
    }
    return path;
}

nlohmann::json run_json(std::vector<std::string> args) {
    args.push_back("--json");
    const auto r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("pipeplan run-cpu: every iteration matches the reference; JSON keys") {
    const std::string batch = small_batch();
    for (const char* schedule : {"1f1b", "interleaved", "zb-h1", "merak-critical", "adaptive"}) {
        CAPTURE(schedule);
        const auto j = run_json({"run-cpu", "--batch", batch, "--stages", "4", "--schedule", schedule, "--dp", "2",
                                 "--iterations", "3", "--seed", "5"});
        CHECK(j["ranks"] == 8);
        CHECK(j["ok"] == true);
        REQUIRE(j["iterations"].size() == 3);
        for (const auto& it : j["iterations"]) {
            CHECK(it["max_grad_rel_error"].get<double>() <= 1e-9);
            CHECK(std::abs(it["loss"].get<double>() - it["reference_loss"].get<double>()) <=
                  1e-9 * it["reference_loss"].get<double>());
            CHECK(it["microbatches"].get<int>() >= 2);
        }
        // SGD steps make progress on the batch.
        CHECK(j["iterations"][2]["loss"].get<double>() < j["iterations"][0]["loss"].get<double>());
    }
}

TEST_CASE("pipeplan run-cpu: --mbs gives fixed micro-batches; --store dir: passes plans through files") {
    const std::string batch = small_batch();
    const auto fixed = run_json({"run-cpu", "--batch", batch, "--stages", "2", "--mbs", "5"});
    CHECK(fixed["iterations"][0]["microbatches"] == 4);  // 20 samples / 5
    const std::string dir = pipeplan::test::temp_path(".store");
    const auto j = run_json({"run-cpu", "--batch", batch, "--stages", "3", "--schedule", "gpipe", "--iterations", "2",
                             "--store", "dir:" + dir});
    CHECK(j["ok"] == true);
    CHECK(std::filesystem::exists(std::filesystem::path(dir) / "run-cpu" / "iteration_1" / "rank_2.plan"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("pipeplan run-cpu: bad input is a clear error") {
    const std::string batch = small_batch();
    auto r = run_cli({"run-cpu", "--batch", batch, "--stages", "2", "--schedule", "nope"});
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("unknown schedule 'nope'") != std::string::npos);
    r = run_cli({"run-cpu", "--batch", batch, "--stages", "2", "--store", "ftp://x"});
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("dir:PATH or redis://[[USER]:PASSWORD@]HOST:PORT") != std::string::npos);
    r = run_cli({"run-cpu", "--batch", batch, "--stages", "2", "--chunks", "3"});
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("--chunks 3 needs a schedule that splits stages into chunks") != std::string::npos);
    r = run_cli({"run-cpu", "--batch", "/nonexistent.csv", "--stages", "2"});
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("/nonexistent.csv") != std::string::npos);
}

TEST_CASE("pipeplan serve-plans: a folder of batches becomes one stored plan per iteration and rank") {
    namespace fs = std::filesystem;
    const fs::path batches = pipeplan::test::temp_path(".batches");
    fs::create_directories(batches);
    for (int i = 0; i < 3; ++i) fs::copy_file(small_batch(), batches / ("b" + std::to_string(i) + ".csv"));
    const std::string store = pipeplan::test::temp_path(".store");
    const auto r = run_cli({"serve-plans", "--batches", batches.string(), "--store", "dir:" + store, "--stages", "2",
                            "--dp", "2", "--schedule", "zb-h1", "--job", "train7", "--threads", "3", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["plans"] == 12);
    CHECK(j["iterations"].size() == 3);
    CHECK(j["iterations"][2]["batch"].get<std::string>().find("b2.csv") != std::string::npos);
    for (int it = 0; it < 3; ++it)
        for (int rank = 0; rank < 4; ++rank)
            CHECK(fs::exists(fs::path(store) / "train7" / ("iteration_" + std::to_string(it)) /
                             ("rank_" + std::to_string(rank) + ".plan")));
    // Deterministic whatever the planner threads: serving again with one thread gives the same bytes.
    const std::string store1 = pipeplan::test::temp_path(".store");
    REQUIRE(run_cli({"serve-plans", "--batches", batches.string(), "--store", "dir:" + store1, "--stages", "2", "--dp",
                     "2", "--schedule", "zb-h1", "--job", "train7", "--threads", "1"})
                .exit_code == 0);
    const auto rel = fs::path("train7") / "iteration_1" / "rank_3.plan";
    CHECK(pipeplan::test::read_text_file((fs::path(store) / rel).string()) ==
          pipeplan::test::read_text_file((fs::path(store1) / rel).string()));
    const auto bad = run_cli({"serve-plans", "--batches", "/nonexistent", "--store", "dir:" + store, "--stages", "2"});
    CHECK(bad.exit_code != 0);
    CHECK(bad.err.find("not a directory") != std::string::npos);
    fs::remove_all(batches);
    fs::remove_all(store);
    fs::remove_all(store1);
}

namespace {

/// Three batch files of 120 samples each (lengths of a few hundred tokens, seeded).
std::filesystem::path real_batches() {
    namespace fs = std::filesystem;
    const fs::path dir = pipeplan::test::temp_path(".batches");
    fs::create_directories(dir);
    unsigned x = 4242;
    for (int b = 0; b < 3; ++b) {
        std::ofstream out(dir / ("batch_" + std::to_string(b) + ".csv"));
        out << "input_tokens,target_tokens\n";
        for (int i = 0; i < 120; ++i) {
            x = x * 1103515245u + 12345u;
            out << 16 + (x >> 8) % 900 << "," << 1 + (x >> 20) % 80 << "\n";
        }
    }
    return dir;
}

/// Fetches every rank's plan of `iterations` x `ranks` from `store` into files under `out`.
std::vector<std::string> fetch_all(const std::string& store, int iterations, int ranks, const std::filesystem::path& out) {
    std::filesystem::create_directories(out);
    std::vector<std::string> files;
    for (int it = 0; it < iterations; ++it)
        for (int rank = 0; rank < ranks; ++rank) {
            const std::string f = (out / ("it" + std::to_string(it) + "_rank" + std::to_string(rank) + ".plan")).string();
            const auto r = run_cli({"fetch-plan", "--store", store, "--job", "gpt", "--iteration", std::to_string(it),
                                    "--rank", std::to_string(rank), "--out", f, "--timeout-ms", "0"});
            INFO(r.err);
            CHECK(r.exit_code == 0);
            files.push_back(f);
        }
    return files;
}

}  // namespace

TEST_CASE("pipeplan serve-plans: real models through the planner; plans read back are valid and thread-independent") {
    namespace fs = std::filesystem;
    const fs::path batches = real_batches();
    std::vector<std::vector<std::string>> models{{"--model", "analytic:gpt-6.7b", "--memory-mb", "40000"}};
    if (const auto data = pipeplan::test::shared_data_dir())
        models.push_back({"--model", "gpt_6.7b", "--profiles", (*data / "cost_models").string(), "--memory-mb", "36000"});
    else
        MESSAGE("../shared/data is absent: serve-plans is checked on the analytic model only, not on the GPT-6.7B profile");
    for (const auto& model : models) {
        CAPTURE(model[1]);
        std::vector<std::string> stored;
        for (const char* threads : {"1", "3"}) {
            const std::string store = "dir:" + pipeplan::test::temp_path(".store");
            std::vector<std::string> args{"serve-plans", "--batches", batches.string(), "--store", store, "--job", "gpt",
                                          "--tp", "2", "--stages", "4", "--layers-per-stage", "8", "--threads", threads,
                                          "--json"};
            args.insert(args.end(), model.begin(), model.end());
            const auto r = run_cli(args);
            INFO(r.err);
            REQUIRE(r.exit_code == 0);
            const auto j = nlohmann::json::parse(r.out);
            CHECK(j["model"] == model[1]);
            CHECK(j["plans"] == 12);
            REQUIRE(j["iterations"].size() == 3);
            for (const auto& it : j["iterations"]) CHECK(it["microbatches"].get<int>() >= 2);
            stored.push_back(store);
        }
        const fs::path out = pipeplan::test::temp_path(".fetched");
        const auto one = fetch_all(stored[0], 3, 4, out / "t1");
        const auto three = fetch_all(stored[1], 3, 4, out / "t3");
        for (std::size_t k = 0; k < one.size(); ++k) {
            CAPTURE(one[k]);
            CHECK(pipeplan::test::read_text_file(one[k]) == pipeplan::test::read_text_file(three[k]));
        }
        for (int it = 0; it < 3; ++it) {
            const auto r = run_cli({"plan-check", three[4 * it], three[4 * it + 1], three[4 * it + 2], three[4 * it + 3]});
            INFO(r.out, r.err);
            CHECK(r.exit_code == 0);
            CHECK(r.out.find("whole plan: 4 ranks") != std::string::npos);
            CHECK(r.out.find("iteration " + std::to_string(it) + ", ") != std::string::npos);
            CHECK(r.out.find("INVALID") == std::string::npos);
        }
        fs::remove_all(out);
        for (const auto& s : stored) fs::remove_all(s.substr(4));
    }
    fs::remove_all(batches);
}

TEST_CASE("pipeplan serve-plans / fetch-plan: flags of the other model and missing plans are clear errors") {
    const std::string batches = real_batches().string();
    const std::string store = "dir:" + pipeplan::test::temp_path(".store");
    auto r = run_cli({"serve-plans", "--batches", batches, "--store", store, "--model", "analytic:gpt-6.7b", "--stages", "4",
                      "--memory-mb", "40000"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("give --stages S and --layers-per-stage L (>= 1), or --layers") != std::string::npos);
    r = run_cli({"serve-plans", "--batches", batches, "--store", store, "--model", "analytic:gpt-6.7b", "--stages", "4",
                 "--layers-per-stage", "8", "--memory-mb", "40000", "--mbs", "4"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("--mbs does not apply to a planned model") != std::string::npos);
    r = run_cli({"serve-plans", "--batches", batches, "--store", store, "--stages", "2", "--memory-mb", "40000"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("--memory-mb does not apply to --model tiny") != std::string::npos);
    r = run_cli({"serve-plans", "--batches", batches, "--store", store, "--model", "gpt_6.7b", "--stages", "4",
                 "--layers-per-stage", "8", "--memory-mb", "40000"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("pass --profiles DIR") != std::string::npos);
    r = run_cli({"fetch-plan", "--store", store, "--job", "none", "--iteration", "0", "--rank", "0", "--out",
                 pipeplan::test::temp_path(".plan"), "--timeout-ms", "0"});
    CHECK(r.exit_code != 0);
    CHECK(!r.err.empty());
    std::filesystem::remove_all(batches);
}

TEST_CASE("pipeplan fetch-plan: records copied to another key, FIFOs and negative iterations are errors at once") {
    namespace fs = std::filesystem;
    const fs::path batches = pipeplan::test::temp_path(".batches");
    fs::create_directories(batches);
    for (int i = 0; i < 2; ++i) fs::copy_file(small_batch(), batches / ("b" + std::to_string(i) + ".csv"));
    const std::string store = pipeplan::test::temp_path(".store");
    REQUIRE(run_cli({"serve-plans", "--batches", batches.string(), "--store", "dir:" + store, "--stages", "2", "--job", "j"})
                .exit_code == 0);
    const fs::path it0 = fs::path(store) / "j" / "iteration_0";
    fs::copy_file(it0 / "rank_1.plan", it0 / "rank_0.plan", fs::copy_options::overwrite_existing);
    const std::string out = pipeplan::test::temp_path(".plan");
    auto r = run_cli({"fetch-plan", "--store", "dir:" + store, "--job", "j", "--iteration", "0", "--rank", "0", "--out", out});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("stored under key 'j/0/1'") != std::string::npos);
    fs::remove(it0 / "rank_0.plan");
    REQUIRE(::mkfifo((it0 / "rank_0.plan").c_str(), 0600) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    r = run_cli({"fetch-plan", "--store", "dir:" + store, "--job", "j", "--iteration", "0", "--rank", "0", "--out", out,
                 "--timeout-ms", "500"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("is a FIFO") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    for (const char* it : {"-1", "18446744073709551616"}) {
        r = run_cli({"fetch-plan", "--store", "dir:" + store, "--job", "j", "--iteration", it, "--rank", "0", "--out", out});
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("--iteration") != std::string::npos);
    }
    r = run_cli({"fetch-plan", "--store", "dir:" + store, "--job", "j", "--iteration", "1", "--rank", "1", "--out", out});
    CHECK(r.exit_code == 0);
    CHECK(run_cli({"plan-check", "--partial", out}).exit_code == 0);
    fs::remove_all(batches);
    fs::remove_all(store);
}

TEST_CASE("pipeplan serve-plans: a second planner of a running job is refused, naming the job") {
    namespace fs = std::filesystem;
    const fs::path batches = pipeplan::test::temp_path(".batches");
    fs::create_directories(batches);
    fs::copy_file(small_batch(), batches / "b0.csv");
    const std::string store = pipeplan::test::temp_path(".store");
    fs::create_directories(fs::path(store) / "dup");
    const int fd = ::open((fs::path(store) / "dup" / ".writer.lock").c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX) == 0);  // the first planner, still serving
    const auto r = run_cli({"serve-plans", "--batches", batches.string(), "--store", "dir:" + store, "--stages", "2", "--job", "dup"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("job 'dup' is being written by another planner") != std::string::npos);
    ::close(fd);
    CHECK(run_cli({"serve-plans", "--batches", batches.string(), "--store", "dir:" + store, "--stages", "2", "--job", "dup"})
              .exit_code == 0);
    fs::remove_all(batches);
    fs::remove_all(store);
}

TEST_CASE("pipeplan run-cpu --fail-rank R --fail-at N: rank R fails before its N-th instruction, the others abort") {
    const auto r = run_cli({"run-cpu", "--batch", small_batch(), "--stages", "3", "--fail-rank", "1", "--fail-at", "2"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("rank 1: instruction #2 ") != std::string::npos);
    CHECK(r.err.find("fault injected") != std::string::npos);
    const auto lone = run_cli({"run-cpu", "--batch", small_batch(), "--stages", "3", "--fail-rank", "1"});
    CHECK(lone.exit_code == 1);
    CHECK(lone.err.find("--fail-at") != std::string::npos);
}
