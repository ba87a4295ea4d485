// CLI contract tests for `pipeplan compare`, --lengths for `plan` and `split`, packed
// micro-batches through `split --json` and `plan --microbatches`, and the main job's line.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"

using pipeplan::test::contains;
using pipeplan::test::run_cli;
using pipeplan::test::temp_path;

namespace {

/// A length file of 400 samples from two tasks (seeded).
std::string compare_lengths() {
    const std::string path = temp_path(".csv");
    std::ofstream out(path);
    out << "task,category,input_tokens,target_tokens\n";
    unsigned x = 4242;
    for (int i = 0; i < 400; ++i) {
        x = x * 1103515245u + 12345u;
        const bool long_task = (x >> 10) % 5 == 0;
        out << (long_task ? "long" : "short") << ",c," << (long_task ? 300 + (x >> 8) % 1500 : 20 + (x >> 8) % 200) << ","
            << 1 + (x >> 20) % 60 << "\n";
    }
    return path;
}

std::vector<std::string> compare_args(const std::string& lengths, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"compare", "--model", "analytic:gpt-6.7b", "--tp", "2", "--stages", "4", "--layers-per-stage",
                               "8", "--memory-mb", "40000", "--lengths", lengths, "--tokens", "8192", "--iterations", "2",
                               "--padding-mbs", "1,4", "--packing-rows", "1,2", "--token-budgets", "4096",
                               "--recompute", "none,full"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

}  // namespace

TEST_CASE("cli compare: --json prints only the report, with every method per setting; --csv and --html are written") {
    const std::string lengths = compare_lengths();
    const std::string html = temp_path(".html"), csv = temp_path(".csv");
    const auto r = run_cli(compare_args(lengths, {"--sweep", "max-seqlen=512,2048", "--json", "--html", html, "--csv", csv}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);  // nothing but JSON on standard output
    CHECK(j["seed"] == 1);
    REQUIRE(j["settings"].size() == 2);
    CHECK(j["settings"][0]["max_seqlen"] == 512);
    CHECK(j["settings"][1]["max_seqlen"] == 2048);
    for (const auto& s : j["settings"])
        for (const char* m : {"padding", "packing", "tokens", "dynapipe", "pipeplan"}) {
            REQUIRE(s["methods"].contains(m));
            CHECK(s["methods"][m].contains("feasible"));
        }
    const auto again = run_cli(compare_args(lengths, {"--sweep", "max-seqlen=512,2048", "--json"}));
    auto a = nlohmann::json::parse(again.out), b = j;
    for (auto* doc : {&a, &b})
        for (auto& s : (*doc)["settings"])
            for (auto& [name, m] : s["methods"].items()) {
                m.erase("planning_ms");
                m["per_iteration"].erase("planning_ms");
            }
    CHECK(a == b);  // deterministic for a seed
    std::ifstream h(html);
    const std::string page((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
    CHECK(contains(page, "<svg"));
    std::ifstream c(csv);
    std::string header;
    std::getline(c, header);
    CHECK(header.rfind("max_seqlen,tokens,method,feasible,tokens_per_s", 0) == 0);
}

TEST_CASE("cli compare: the table, and flags that do not apply are errors") {
    const std::string lengths = compare_lengths();
    const auto r = run_cli(compare_args(lengths));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.out, "pipeplan"));
    CHECK(contains(r.out, "speedup"));
    CHECK(run_cli(compare_args(lengths, {"--schedule", "1f1b"})).exit_code == 1);
    CHECK(run_cli(compare_args(lengths, {"--sweep", "seqlen=1"})).exit_code == 1);
    const auto g = run_cli(compare_args(lengths, {"--gpus", "8"}));
    CHECK(g.exit_code == 1);
    CHECK(contains(g.err, "--stages"));
    const auto m = run_cli(compare_args(lengths, {"--mix", "nosuchtask=1"}));
    CHECK(m.exit_code == 1);
    CHECK(contains(m.err, "nosuchtask"));
}

TEST_CASE("cli plan and split: --lengths draws the batch; packed micro-batches stay packed through plan --microbatches") {
    const std::string lengths = compare_lengths();
    const std::vector<std::string> model{"--model", "analytic:gpt-6.7b", "--tp", "2", "--stages", "4", "--layers-per-stage", "8",
                                         "--memory-mb", "40000"};
    std::vector<std::string> split{"split"};
    split.insert(split.end(), model.begin(), model.end());
    for (const char* a : {"--lengths", "", "--tokens", "16384", "--seed", "3", "--method", "packing", "--mbs", "1",
                          "--max-seqlen", "2048", "--json"})
        split.push_back(a);
    split[split.size() - 12] = lengths;
    const auto s = run_cli(split);
    INFO(s.err);
    REQUIRE(s.exit_code == 0);
    const auto sj = nlohmann::json::parse(s.out);
    CHECK(sj["per_microbatch"][0]["mbs"] == 1);
    CHECK(sj["per_microbatch"][0]["seqlen"] == 2048);
    const std::string given = temp_path(".json");
    std::ofstream(given) << s.out;
    const std::string out_dir = temp_path("_plan");
    std::vector<std::string> plan{"plan"};
    plan.insert(plan.end(), model.begin(), model.end());
    for (const std::string& a : {std::string("--lengths"), lengths, std::string("--tokens"), std::string("16384"),
                                 std::string("--seed"), std::string("3"), std::string("--max-seqlen"), std::string("2048"),
                                 std::string("--microbatches"), given, std::string("--out"), out_dir,
                                 std::string("--format"), std::string("json"), std::string("--json")})
        plan.push_back(a);
    const auto p = run_cli(plan);
    INFO(p.err);
    REQUIRE(p.exit_code == 0);
    const auto pj = nlohmann::json::parse(p.out);
    CHECK(pj["microbatches"] == sj["microbatches"].size());
    // The plan's micro-batch table keeps the rows: [1 row, 2048 tokens] with its samples per row.
    std::ifstream rank0(out_dir + "/rank_0.json");
    const auto rj = nlohmann::json::parse(rank0);
    const auto& mb0 = rj["header"]["microbatches"][0];
    CHECK(mb0["shape"][0] == 1);
    CHECK(mb0["shape"][1] == 2048);
    REQUIRE(mb0.contains("row_sizes"));
    CHECK(mb0["row_sizes"][0] == mb0["sample_ids"].size());
    // Without --lengths the drawing flags are errors; --batch and --lengths together too.
    std::vector<std::string> bad{"plan"};
    bad.insert(bad.end(), model.begin(), model.end());
    bad.push_back("--seed");
    bad.push_back("3");
    CHECK(run_cli(bad).exit_code == 1);
}

TEST_CASE("cli: the main job ends with the comparison against packing") {
    const auto r = run_cli({});
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.out, "the throughput of packing ("));
}
