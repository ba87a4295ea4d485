// CLI contract tests for `pipeplan plan`, `plan-check`, `plan-show` and the main job.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"
#include "support.hpp"

using pipeplan::test::read_text_file;
using pipeplan::test::run_cli;
using pipeplan::test::temp_path;

namespace {

std::string plan_batch() {
    const std::string path = temp_path(".csv");
    std::ofstream out(path);
    out << "task,input_tokens,target_tokens\n";
    unsigned x = 777;
    for (int i = 0; i < 120; ++i) {
        x = x * 1103515245u + 12345u;
        out << "t" << i << "," << 16 + (x >> 8) % 900 << "," << 1 + (x >> 20) % 80 << "\n";
    }
    return path;
}

std::vector<std::string> plan_args(const std::string& batch, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"plan", "--model", "analytic:gpt-6.7b", "--tp", "2", "--stages", "4", "--layers-per-stage",
                               "8", "--memory-mb", "40000", "--batch", batch};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

std::string make_plan_dir() {
    const std::string d = temp_path("_plan");
    std::filesystem::create_directories(d);
    return d;
}

}  // namespace

TEST_CASE("cli plan: --json summary keys, on the analytic model") {
    const auto r = run_cli(plan_args(plan_batch(), {"--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    for (const char* k : {"schedule", "microbatches", "makespan_ms", "lower_bound_ms", "peak_memory_mb", "arena_mb", "plan_bytes",
                          "planning_ms", "candidates"})
        CHECK(j.contains(k));
    for (const char* k : {"split", "schedule", "lower", "validate", "total"}) CHECK(j["planning_ms"].contains(k));
    CHECK(j["peak_memory_mb"].size() == 4);
    CHECK(j["arena_mb"].size() == 4);
    CHECK(j["makespan_ms"].get<double>() >= j["lower_bound_ms"].get<double>());
    CHECK(j["microbatches"].get<int>() > 0);
    std::size_t polished = 0;
    for (const auto& c : j["candidates"]) {
        for (const char* k : {"schedule", "split", "feasible", "makespan_ms", "peak_memory_mb", "polished"}) CHECK(c.contains(k));
        polished += c["polished"].get<bool>();
    }
    CHECK(polished <= 1);  // the chosen candidate after the polish, when it found a faster order
}

TEST_CASE("cli plan: --send-rule is recorded in the rank files and checked; unknown rules are refused") {
    const std::string batch = plan_batch();
    for (const std::string rule : {"buffered", "blocking", "grouped"}) {
        CAPTURE(rule);
        const std::string d = make_plan_dir();
        const auto p = run_cli(plan_args(batch, {"--send-rule", rule, "--out", d, "--format", "json"}));
        INFO(p.err);
        REQUIRE(p.exit_code == 0);
        CHECK(nlohmann::json::parse(read_text_file(d + "/rank_0.json"))["header"]["send_rule"] == rule);
        const auto show = run_cli({"plan-show", d + "/rank_1.json"});
        CHECK(show.out.find("send_rule " + rule) != std::string::npos);
        const auto check = run_cli({"plan-check", d + "/rank_0.json", d + "/rank_1.json", d + "/rank_2.json", d + "/rank_3.json"});
        INFO(check.out);
        CHECK(check.exit_code == 0);
        std::filesystem::remove_all(d);
    }
    const auto bad = run_cli(plan_args(batch, {"--send-rule", "eager"}));
    CHECK(bad.exit_code != 0);
    CHECK(bad.err.find("unknown send rule 'eager' (valid: buffered, blocking, grouped)") != std::string::npos);
}

TEST_CASE("cli plan: --out writes rank files byte-identically across runs; plan-check and plan-show read them") {
    const std::string batch = plan_batch();
    for (const std::string fmt : {"binary", "json"}) {
        const std::string a = make_plan_dir(), b = make_plan_dir();
        REQUIRE(run_cli(plan_args(batch, {"--out", a, "--format", fmt})).exit_code == 0);
        REQUIRE(run_cli(plan_args(batch, {"--out", b, "--format", fmt})).exit_code == 0);
        const std::string ext = fmt == "json" ? ".json" : ".plan";
        std::vector<std::string> files;
        for (int r = 0; r < 4; ++r) {
            const std::string name = "/rank_" + std::to_string(r) + ext;
            CHECK(read_text_file(a + name) == read_text_file(b + name));  // two processes, same bytes
            CHECK_FALSE(read_text_file(a + name).empty());
            files.push_back(a + name);
        }
        CHECK(read_text_file(a + "/plan.json") == read_text_file(b + "/plan.json"));
        std::vector<std::string> check{"plan-check"};
        check.insert(check.end(), files.begin(), files.end());
        const auto c = run_cli(check);
        INFO(c.out << c.err);
        CHECK(c.exit_code == 0);
        CHECK(c.out.find("whole plan: 4 ranks") != std::string::npos);
        CHECK(c.out.find("valid") != std::string::npos);
        const auto s = run_cli({"plan-show", files[1]});
        CHECK(s.exit_code == 0);
        CHECK(s.out.find("rank 1:") != std::string::npos);
        CHECK(s.out.find("recv_activation_start") != std::string::npos);
        std::filesystem::remove_all(a);
        std::filesystem::remove_all(b);
    }
}

TEST_CASE("cli plan-check: a plan over the device memory it was made for fails naming the rank and its figures") {
    const std::string d = make_plan_dir();
    REQUIRE(run_cli(plan_args(plan_batch(), {"--out", d, "--format", "json"})).exit_code == 0);
    const auto ok = run_cli({"plan-check", d});
    INFO(ok.out << ok.err);
    CHECK(ok.exit_code == 0);
    CHECK(ok.out.find("device memory 40000.0 MB: fits") != std::string::npos);
    // The same programs claimed for a 1000 MB device (every rank file alike): rank 1 does not fit.
    std::vector<nlohmann::json> files;
    for (int r = 0; r < 4; ++r) files.push_back(nlohmann::json::parse(read_text_file(d + "/rank_" + std::to_string(r) + ".json")));
    const double state_mb = files[1]["header"]["model_state_mb"][1].get<double>();
    const double arena_mb = files[1]["programs"][0]["arena_bytes"].get<double>() / 1e6;
    const auto write_all = [&] {
        std::vector<std::string> args{"plan-check"};
        for (int r = 0; r < 4; ++r) {
            const std::string f = d + "/edited_" + std::to_string(r) + ".json";
            std::ofstream(f) << files[std::size_t(r)].dump();
            args.push_back(f);
        }
        return run_cli(args);
    };
    for (auto& f : files) f["header"]["device_memory_mb"] = 1000.0;
    const auto over = write_all();
    INFO(over.out << over.err);
    CHECK(over.exit_code == 1);
    char want[200];
    std::snprintf(want, sizeof want, "rank 1: memory: arena %.1f MB + model state %.1f MB = %.1f MB exceeds the device memory of 1000.0 MB",
                  arena_mb, state_mb, arena_mb + state_mb);
    CHECK(over.out.find(want) != std::string::npos);
    CHECK(over.out.find("EXCEEDS") != std::string::npos);
    // A version 3 file records neither: plan-check says the rule could not be checked.
    for (auto& f : files) {
        f["version"] = 3;
        f["header"]["version"] = 3;
        f["header"].erase("device_memory_mb");
        f["header"].erase("model_state_mb");
    }
    const auto old = write_all();
    INFO(old.out << old.err);
    CHECK(old.exit_code == 0);
    CHECK(old.out.find("memory: not checked: the plan (format version 3) records no device memory") != std::string::npos);
    std::filesystem::remove_all(d);
}

TEST_CASE("cli plan-check: corrupted and truncated files give clear errors") {
    const std::string d = make_plan_dir();
    REQUIRE(run_cli(plan_args(plan_batch(), {"--out", d})).exit_code == 0);
    std::string bytes = read_text_file(d + "/rank_0.plan");
    const std::string trunc = d + "/trunc.plan", corrupt = d + "/corrupt.plan";
    std::ofstream(trunc, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 1);
    std::ofstream(corrupt, std::ios::binary) << bytes;
    const auto t = run_cli({"plan-check", trunc});
    CHECK(t.exit_code == 1);
    CHECK(t.err.find("trunc.plan") != std::string::npos);
    CHECK(t.err.find("truncated") != std::string::npos);
    const auto c = run_cli({"plan-check", corrupt});
    CHECK(c.exit_code == 1);
    CHECK(c.err.find("checksum") != std::string::npos);
    std::filesystem::remove_all(d);
}

TEST_CASE("cli plan: torch CSVs, trace and SVG; schedule, network and accounting flags") {
    const std::string batch = plan_batch();
    const std::string csv = temp_path(".csv"), comms = temp_path(".csv"), trace = temp_path(".json"), svg = temp_path(".svg");
    const auto r = run_cli(plan_args(batch, {"--schedule", "1f1b", "--torch-csv", csv, "--torch-csv-comms", comms, "--trace",
                                             trace, "--svg", svg, "--bandwidth-gbps", "25", "--latency-us", "10", "--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out)["schedule"] == "1f1b");
    const std::string c = read_text_file(csv);
    CHECK(c.rfind("0F0,", 0) == 0);
    CHECK(c.find("SEND") == std::string::npos);
    CHECK(read_text_file(comms).find("0SEND_F0") != std::string::npos);
    CHECK(read_text_file(comms).find("REDUCE_GRAD") != std::string::npos);
    const auto t = nlohmann::json::parse(read_text_file(trace));
    CHECK(t["traceEvents"].size() > 10);
    CHECK(read_text_file(svg).find("<svg") != std::string::npos);
    for (const auto& p : {csv, comms, trace, svg}) std::filesystem::remove(p);
    const auto d = run_cli(plan_args(batch, {"--accounting", "dynapipe", "--json"}));
    CHECK(d.exit_code == 0);
    const auto bad = run_cli(plan_args(batch, {"--schedule", "fastest"}));
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("unknown schedule") != std::string::npos);
}

TEST_CASE("cli plan: the real GPT-6.7B profiles" * PIPEPLAN_NEEDS_DATA()) {
    auto args = plan_args(plan_batch(), {"--json", "--profiles", (*pipeplan::test::shared_data_dir() / "cost_models").string()});
    args[2] = "gpt_6.7b";
    args[10] = "36000";
    const auto r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    // A V schedule reaches its own scenario's bound exactly (up to rounding).
    CHECK(j["makespan_ms"].get<double>() >= j["lower_bound_ms"].get<double>() * (1.0 - 1e-12));
}

TEST_CASE("cli: the main job prints the plan summary") {
    const auto r = run_cli({});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("Planning one iteration end to end") != std::string::npos);
    CHECK(r.out.find("candidates") != std::string::npos);
    CHECK(r.out.find("<- chosen") != std::string::npos);
    CHECK(r.out.find("lower bound") != std::string::npos);
    CHECK(r.out.find("arena_mb") != std::string::npos);
    CHECK(r.out.find("planning time") != std::string::npos);
}

namespace {

/// plan's arguments without the pipeline shape (--stages / --layers-per-stage).
std::vector<std::string> shape_free_args(const std::string& batch, std::vector<std::string> extra) {
    std::vector<std::string> a{"plan", "--model", "analytic:gpt-6.7b", "--tp", "2", "--memory-mb", "40000", "--batch", batch};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

/// Each command exits with status 1 and names the problem (the expected text) on stderr.
void check_usage_errors(const std::vector<std::pair<std::vector<std::string>, std::string>>& cases) {
    for (const auto& [args, text] : cases) {
        const auto r = run_cli(args);
        INFO(text);
        CHECK(r.exit_code == 1);
        CHECK(r.err.find(text) != std::string::npos);
    }
}

nlohmann::json without_timings(nlohmann::json j) {
    j.erase("planning_ms");
    return j;
}

}  // namespace

TEST_CASE("cli plan --layers: non-uniform stages plan and validate; 8,8,8,8 is --layers-per-stage 8 exactly") {
    const std::string batch = plan_batch();
    const std::string d = make_plan_dir();
    const auto r = run_cli(shape_free_args(batch, {"--layers", "11,9,7,5", "--out", d, "--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out)["peak_memory_mb"].size() == 4);
    std::vector<std::string> check{"plan-check"};
    for (int k = 0; k < 4; ++k) check.push_back(d + "/rank_" + std::to_string(k) + ".plan");
    const auto c = run_cli(check);
    INFO(c.out << c.err);
    CHECK(c.exit_code == 0);
    CHECK(c.out.find("whole plan: 4 ranks") != std::string::npos);

    // the uniform layout written out: the same figures and the same plan bytes
    const std::string a = make_plan_dir(), b = make_plan_dir();
    // (the V candidates too: the even counts split into the same V chunks)
    const auto x = run_cli(shape_free_args(batch, {"--layers", "8,8,8,8", "--out", a, "--json"}));
    const auto y = run_cli(shape_free_args(batch, {"--stages", "4", "--layers-per-stage", "8", "--out", b, "--json"}));
    REQUIRE(x.exit_code == 0);
    REQUIRE(y.exit_code == 0);
    CHECK(without_timings(nlohmann::json::parse(x.out)) == without_timings(nlohmann::json::parse(y.out)));
    for (const std::string f : {"/rank_0.plan", "/rank_1.plan", "/rank_2.plan", "/rank_3.plan", "/plan.json"}) {
        CHECK_FALSE(read_text_file(a + f).empty());
        CHECK(read_text_file(a + f) == read_text_file(b + f));
    }
    // --stages with --layers must agree with the list
    CHECK(run_cli(shape_free_args(batch, {"--layers", "8,8,8,8", "--stages", "4", "--json"})).exit_code == 0);
    check_usage_errors({
        {shape_free_args(batch, {"--layers", "8,8,8", "--stages", "4"}), "--layers lists 3 chunks, but --stages 4"},
        {shape_free_args(batch, {"--layers", "8,8,8,8", "--layers-per-stage", "8"}), "--layers replaces --layers-per-stage"},
        {shape_free_args(batch, {"--layers", "4,4,4,4,4,4", "--chunks", "4"}), "not a multiple of --chunks 4"},
        {shape_free_args(batch, {"--layers", "8,0,8,8"}), "--layers"},
        {shape_free_args(batch, {"--layers", "8,8,8,8", "--accounting", "dynapipe"}), "--layers needs --accounting pipeplan"},
        {shape_free_args(batch, {}), "--layers L0,L1"},
    });
    for (const auto& dir : {d, a, b}) std::filesystem::remove_all(dir);
}

TEST_CASE("cli plan --energy-target-ms: set_frequency plans validate and carry the chosen clocks") {
    const std::string batch = plan_batch();
    const auto base = run_cli(plan_args(batch, {"--schedule", "1f1b", "--json"}));
    REQUIRE(base.exit_code == 0);
    const double makespan = nlohmann::json::parse(base.out)["makespan_ms"].get<double>();
    const double target = 1.15 * makespan;
    const std::string d = make_plan_dir(), trace = temp_path(".json"), svg = temp_path(".svg");
    const auto r = run_cli(plan_args(batch, {"--schedule", "1f1b", "--energy-target-ms", std::to_string(target), "--out", d,
                                             "--format", "json", "--trace", trace, "--svg", svg, "--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& e = j["energy"];
    CHECK(e["chosen"]["time_ms"].get<double>() <= target + 1e-9);
    CHECK(e["min_time_ms"].get<double>() == doctest::Approx(makespan).epsilon(1e-9));
    CHECK(e["saving_fraction"].get<double>() > 0.0);
    const auto& clocks = e["chosen"]["frequencies_mhz"];
    REQUIRE(clocks.size() == 4);
    std::vector<std::string> check{"plan-check"};
    std::size_t changes = 0;
    for (std::size_t k = 0; k < 4; ++k) {
        const std::string f = d + "/rank_" + std::to_string(k) + ".json";
        check.push_back(f);
        const auto plan = nlohmann::json::parse(read_text_file(f));
        CHECK(plan["header"]["predicted_makespan_ms"].get<double>() == e["chosen"]["time_ms"].get<double>());
        std::vector<long long> seen;
        long long current = 0;
        for (const auto& x : plan["programs"][0]["instructions"]) {
            const std::string kind = x["kind"];
            if (kind == "set_frequency") {
                current = x["bytes"].get<long long>();
                ++changes;
            }
            if (kind == "forward" || kind == "backward" || kind == "backward_weight" || kind == "recompute") seen.push_back(current);
        }
        CHECK(seen == clocks[k].get<std::vector<long long>>());  // the plan's clocks are the chosen frequencies
    }
    CHECK(changes == e["chosen"]["set_frequency_instructions"].get<std::size_t>());
    const auto c = run_cli(check);
    INFO(c.out << c.err);
    CHECK(c.exit_code == 0);
    CHECK(c.out.find("valid") != std::string::npos);
    const auto show = run_cli({"plan-show", d + "/rank_0.json"});
    CHECK(show.out.find("set_frequency") != std::string::npos);
    CHECK(show.out.find(" MHz") != std::string::npos);
    CHECK(read_text_file(trace).find("\"frequency_mhz\":") != std::string::npos);
    CHECK(read_text_file(svg).find("GPU clock") != std::string::npos);

    const auto fastest = run_cli(plan_args(batch, {"--schedule", "1f1b", "--energy-target-ms", "min", "--json"}));
    REQUIRE(fastest.exit_code == 0);
    CHECK(nlohmann::json::parse(fastest.out)["energy"]["chosen"]["time_ms"].get<double>() ==
          doctest::Approx(makespan).epsilon(1e-9));
    check_usage_errors({
        {plan_args(batch, {"--gpu", "a100"}), "--gpu does not apply without --energy-target-ms"},
        {plan_args(batch, {"--energy-target-ms", "-3"}), "--energy-target-ms"},
        {plan_args(batch, {"--energy-target-ms", "min", "--dp", "2"}), "needs --dp 1"},
        {plan_args(batch, {"--energy-target-ms", "1"}), "--energy-target-ms 1 is below the plan's minimum iteration time"},
    });
    std::filesystem::remove_all(d);
    std::filesystem::remove(trace);
    std::filesystem::remove(svg);
}

TEST_CASE("cli plan: --threads 1 and --threads 4 write byte-identical plans (two processes, dp 1 and dp 2)") {
    const std::string batch = plan_batch();
    for (const std::string dp : {"1", "2"}) {
        const std::string a = make_plan_dir(), b = make_plan_dir();
        const auto ra = run_cli(plan_args(batch, {"--dp", dp, "--threads", "1", "--out", a}));
        const auto rb = run_cli(plan_args(batch, {"--dp", dp, "--threads", "4", "--out", b}));
        INFO(ra.err << rb.err);
        REQUIRE(ra.exit_code == 0);
        REQUIRE(rb.exit_code == 0);
        const int ranks = 4 * std::stoi(dp);
        for (int r = 0; r < ranks; ++r) {
            const std::string name = "/rank_" + std::to_string(r) + ".plan";
            CHECK_FALSE(read_text_file(a + name).empty());
            CHECK(read_text_file(a + name) == read_text_file(b + name));
        }
        CHECK(read_text_file(a + "/plan.json") == read_text_file(b + "/plan.json"));
    }
    for (const std::string bad : {"0", "257", "-1", "2.5", "x"}) {
        const auto r = run_cli(plan_args(batch, {"--threads", bad}));
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("--threads") != std::string::npos);
    }
}

TEST_CASE("cli plan: dp 2 exports — a torch CSV per replica and a trace process per replica") {
    const std::string batch = plan_batch();
    const std::string d = make_plan_dir();
    const auto r = run_cli(plan_args(batch, {"--dp", "2", "--torch-csv", d + "/s.csv", "--torch-csv-comms", d + "/c.csv",
                                             "--trace", d + "/t.json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    for (const std::string f : {"/s_r0.csv", "/s_r1.csv", "/c_r0.csv", "/c_r1.csv"}) {
        const std::string text = read_text_file(d + f);
        CHECK(std::count(text.begin(), text.end(), '\n') == 4);  // one row per pipeline rank
    }
    CHECK_FALSE(std::filesystem::exists(d + "/s.csv"));
    const auto t = nlohmann::json::parse(read_text_file(d + "/t.json"));
    std::set<int> tids, pids;
    for (const auto& e : t["traceEvents"])
        if (e["name"] == "thread_name") {
            tids.insert(e["tid"].get<int>());
            pids.insert(e["pid"].get<int>());
        }
    CHECK(tids.size() == 8);
    CHECK(pids == std::set<int>{0, 1});
}

TEST_CASE("cli plan: --microbatches plans a given split; bad files name the field") {
    const std::string batch = plan_batch();
    const auto s = run_cli({"split", "--model", "analytic:gpt-6.7b", "--tp", "2", "--stages", "4", "--layers-per-stage", "8",
                            "--memory-mb", "40000", "--batch", batch, "--json"});
    REQUIRE(s.exit_code == 0);
    const std::string given = temp_path(".json");
    std::ofstream(given) << s.out;
    const auto r = run_cli(plan_args(batch, {"--microbatches", given, "--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["microbatches"].get<std::size_t>() == nlohmann::json::parse(s.out)["microbatches"].size());
    for (const auto& c : j["candidates"]) CHECK(c["split"] == "given");

    const std::string bad = temp_path(".json");
    std::ofstream(bad) << R"({"microbatches": [[0, 1], [2, "x"]]})";
    const auto b = run_cli(plan_args(batch, {"--microbatches", bad}));
    CHECK(b.exit_code == 1);
    CHECK(b.err.find("microbatches[1][1]") != std::string::npos);
    std::ofstream(bad) << R"({"microbatches": [[0, 1], [2]]})";  // samples 3.. in no micro-batch
    const auto m = run_cli(plan_args(batch, {"--microbatches", bad}));
    CHECK(m.exit_code == 1);
    CHECK(m.err.find("sample 3 is in no given micro-batch") != std::string::npos);
}

TEST_CASE("cli plan: the summary gives recompute, model states per rank, micro-batch shapes and the links used") {
    const std::string batch = plan_batch();
    // 4 stages on nodes of 2 devices: pairs (0,1), (2,3) are intra-node, (1,2) inter-node.
    const auto r = run_cli(plan_args(batch, {"--dp", "2", "--devices-per-node", "2", "--intra-node-bandwidth-gbps", "2400",
                                             "--bandwidth-gbps", "200", "--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["recompute"].is_string());
    CHECK(j["checkpointed_forwards"].get<std::size_t>() == 0);
    REQUIRE(j["model_state_mb"].size() == 8);  // per rank: 2 replicas x 4 devices
    for (std::size_t k = 0; k < 8; ++k) {
        CHECK(j["model_state_mb"][k].get<double>() > 1000.0);  // 8 GPT-6.7B layers at tp 2: GBs of states
        CHECK(j["model_state_mb"][k].get<double>() < j["peak_memory_mb"][k].get<double>());
        CHECK(j["model_state_mb"][k] == j["model_state_mb"][k % 4]);  // replicas hold the same states
    }
    REQUIRE(j["microbatch_shapes"].size() == j["microbatches"].get<std::size_t>());
    std::size_t samples = 0;
    for (const auto& s : j["microbatch_shapes"]) {
        CHECK(s["samples"].get<int>() >= 1);
        CHECK(s["seqlen_tokens"].get<int>() >= 16);
        CHECK_FALSE(s.contains("rows"));  // not packed
        samples += s["samples"].get<std::size_t>();
    }
    CHECK(samples == 120);
    CHECK(j["links"]["intra_node"]["pairs"] == 2);
    CHECK(j["links"]["intra_node"]["bandwidth_gbps"].get<double>() == 2400.0);
    CHECK(j["links"]["inter_node"]["pairs"] == 1);
    CHECK(j["links"]["inter_node"]["bandwidth_gbps"].get<double>() == 200.0);

    const auto t = run_cli(plan_args(batch, {"--devices-per-node", "4", "--intra-node-bandwidth-gbps", "2400"}));
    INFO(t.err);
    REQUIRE(t.exit_code == 0);
    CHECK(pipeplan::test::contains(t.out, "MB = 10^6 bytes"));
    CHECK(pipeplan::test::contains(t.out, "recompute: "));
    CHECK(pipeplan::test::contains(t.out, "micro-batch shapes (samples x padded tokens"));
    CHECK(pipeplan::test::contains(t.out, "links between pipeline neighbours: 3 intra-node pairs at 2400 Gbit/s"));
    CHECK(pipeplan::test::contains(t.out, "no inter-node pair"));
    CHECK(pipeplan::test::contains(t.out, "model_state_mb"));
    CHECK_FALSE(pipeplan::test::contains(t.out, "100 Gbit/s"));
}

TEST_CASE("cli plan --svg: width grows with the ops, kinds by pattern, the memory limit, one group per replica") {
    const std::string batch = plan_batch();
    pipeplan::test::temp_dir d;
    const auto r = run_cli(plan_args(batch, {"--dp", "2", "--svg", d / "p.svg", "--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    const std::string svg = read_text_file(d / "p.svg");
    char title[160];
    std::snprintf(title, sizeof title, "makespan %.2f ms, lower bound %.2f ms", j["makespan_ms"].get<double>(),
                  j["lower_bound_ms"].get<double>());
    CHECK(pipeplan::test::contains(svg, title));  // the summary's numbers
    CHECK(pipeplan::test::contains(svg, "replica 0 — makespan"));
    CHECK(pipeplan::test::contains(svg, "replica 1 — makespan"));
    CHECK(pipeplan::test::contains(svg, "device memory limit 40000 MB"));
    CHECK(pipeplan::test::contains(svg, "url(#pp-hlines)"));  // backwards carry their pattern
    std::size_t boxes = 0;
    for (std::size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1)) ++boxes;
    // F and B (and W for the split-backward schedules) of every micro-batch of both replicas, on
    // 4 devices each, per chunk (two per device for the V schedules).
    const std::string chosen = j["schedule"].get<std::string>();
    const bool v = chosen == "zb-v" || chosen == "v-half" || chosen == "v-min";
    const std::size_t kinds = chosen == "zb-h1" || v ? 3 : 2, chunks = v ? 2 : 1;
    CHECK(boxes == kinds * chunks * 4 * j["microbatches"].get<std::size_t>());
}

TEST_CASE("cli plan --out: a plan directory is replaced whole; a smaller plan leaves no stale rank files") {
    const std::string batch = plan_batch();
    const std::string d = make_plan_dir();
    REQUIRE(run_cli(plan_args(batch, {"--out", d, "--dp", "2"})).exit_code == 0);  // 8 ranks
    CHECK(std::filesystem::exists(d + "/rank_7.plan"));
    REQUIRE(run_cli(plan_args(batch, {"--out", d})).exit_code == 0);  // 4 ranks
    for (int r = 4; r < 8; ++r) CHECK_FALSE(std::filesystem::exists(d + "/rank_" + std::to_string(r) + ".plan"));
    const auto c = run_cli({"plan-check", d});
    INFO(c.out << c.err);
    CHECK(c.exit_code == 0);
    CHECK(c.out.find("whole plan: 4 ranks") != std::string::npos);
    CHECK(run_cli({"plan-show", d, "--rank", "2"}).exit_code == 0);
    const std::string parent = std::filesystem::path(d).parent_path().string(), name = std::filesystem::path(d).filename().string();
    for (const auto& e : std::filesystem::directory_iterator(parent))
        CHECK(e.path().filename().string().rfind("." + name + ".tmp.", 0) != 0);
    // A folder that is not a plan directory is never replaced.
    const std::string other = make_plan_dir();
    std::ofstream(other + "/notes.txt") << "keep me";
    const auto r = run_cli(plan_args(batch, {"--out", other}));
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("notes.txt") != std::string::npos);
    CHECK(read_text_file(other + "/notes.txt") == "keep me");
    std::filesystem::remove_all(d);
    std::filesystem::remove_all(other);
}

TEST_CASE("cli plan-check: mixed plans, duplicate and missing ranks are errors naming the files") {
    const std::string batch = plan_batch();
    const std::string a = make_plan_dir(), b = make_plan_dir();
    REQUIRE(run_cli(plan_args(batch, {"--out", a})).exit_code == 0);
    REQUIRE(run_cli(plan_args(batch, {"--out", b, "--iteration", "1"})).exit_code == 0);
    const auto mixed = run_cli({"plan-check", a + "/rank_0.plan", a + "/rank_1.plan", b + "/rank_2.plan", a + "/rank_3.plan"});
    CHECK(mixed.exit_code == 1);
    CHECK(mixed.err.find(b + "/rank_2.plan") != std::string::npos);
    CHECK(mixed.err.find("another plan") != std::string::npos);
    const auto dup = run_cli({"plan-check", a + "/rank_0.plan", a + "/rank_1.plan", a + "/rank_1.plan", a + "/rank_3.plan"});
    CHECK(dup.exit_code == 1);
    CHECK(dup.err.find("rank 1 is also in '" + a + "/rank_1.plan'") != std::string::npos);
    const auto missing = run_cli({"plan-check", a + "/rank_0.plan", a + "/rank_3.plan"});
    CHECK(missing.exit_code == 1);
    CHECK(missing.err.find("rank(s) 1, 2") != std::string::npos);
    const auto partial = run_cli({"plan-check", "--partial", a + "/rank_0.plan", a + "/rank_3.plan"});
    CHECK(partial.exit_code == 0);
    // A rank file planted in a plan directory from another plan.
    std::filesystem::copy_file(b + "/rank_2.plan", a + "/rank_2.plan", std::filesystem::copy_options::overwrite_existing);
    const auto planted = run_cli({"plan-check", a});
    CHECK(planted.exit_code == 1);
    CHECK(planted.err.find("rank_2.plan") != std::string::npos);
    std::filesystem::remove_all(a);
    std::filesystem::remove_all(b);
}

TEST_CASE("cli plan-check: header values that make no sense are errors naming the field") {
    const std::string d = make_plan_dir();
    REQUIRE(run_cli(plan_args(plan_batch(), {"--out", d, "--format", "json"})).exit_code == 0);
    const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits{
        {"header.predicted_makespan_ms", [](nlohmann::json& h) { h["predicted_makespan_ms"] = -1; }},
        {"header.predicted_peak_memory_mb", [](nlohmann::json& h) { h["predicted_peak_memory_mb"].erase(0); }},
        {"header.version", [](nlohmann::json& h) { h["version"] = 5; }},
        {"header.device_memory_mb", [](nlohmann::json& h) { h["device_memory_mb"] = -1; }},
        {"header.model_state_mb", [](nlohmann::json& h) { h["model_state_mb"].erase(0); }},
        {"header.microbatches[1].sample_ids", [](nlohmann::json& h) { h["microbatches"][1]["sample_ids"] = {4294967295u}; }},
    };
    for (const auto& [field, edit] : edits) {
        CAPTURE(field);
        const std::string e = make_plan_dir();
        std::vector<std::string> check{"plan-check"};
        for (int r = 0; r < 4; ++r) {
            const std::string name = "/rank_" + std::to_string(r) + ".json";
            nlohmann::json j = nlohmann::json::parse(read_text_file(d + name));
            edit(j["header"]);
            std::ofstream(e + name) << j.dump();
            check.push_back(e + name);
        }
        const auto c = run_cli(check);
        CHECK(c.exit_code == 1);
        CHECK((c.out + c.err).find(field) != std::string::npos);
        std::filesystem::remove_all(e);
    }
    std::filesystem::remove_all(d);
}

TEST_CASE("cli plan-check / plan-show: a directory without a manifest, a FIFO and /dev/zero are clear errors") {
    const std::string d = make_plan_dir();
    const auto dir = run_cli({"plan-check", d});
    CHECK(dir.exit_code == 1);
    CHECK(dir.err.find("is a directory") != std::string::npos);
    CHECK(run_cli({"plan-show", d}).exit_code == 1);
    const std::string fifo = d + "/fifo.plan";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto f = run_cli({"plan-check", fifo});
    CHECK(f.exit_code == 1);
    CHECK(f.err.find("is a FIFO") != std::string::npos);
    const auto z = run_cli({"plan-show", "/dev/zero"});
    CHECK(z.exit_code == 1);
    CHECK(z.err.find("is a character device") != std::string::npos);
    std::filesystem::remove_all(d);
}

TEST_CASE("cli plan: --bandwidth-gbps below 1 Mbit/s is a usage error, not a plan of 0 MB messages") {
    const auto r = run_cli(plan_args(plan_batch(), {"--bandwidth-gbps", "4.9e-324"}));
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("[0.001, 1000000]") != std::string::npos);
}

TEST_CASE("cli plan: a replica without work and a bad encoder-decoder sample are clear errors naming the cause") {
    const std::string one = temp_path(".csv");
    std::ofstream(one) << "input_tokens,target_tokens\n100,10\n";
    const auto dp = run_cli(plan_args(one, {"--dp", "64"}));
    CHECK(dp.exit_code == 1);
    CHECK(dp.err.find("without work") != std::string::npos);
    CHECK(dp.err.find("make_scenario_from_split") == std::string::npos);
    const std::string t5 = temp_path(".csv");
    std::ofstream(t5) << "input_tokens,target_tokens\n100,10\n0,7\n";
    const auto r = run_cli({"plan", "--model", "analytic:t5-11b", "--stages", "2", "--layers-per-stage", "4", "--memory-mb",
                            "80000", "--batch", t5});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(t5 + ":3") != std::string::npos);
    CHECK(r.err.find("input_tokens") != std::string::npos);
}

TEST_CASE("cli plan --schedule zb-v|v-half|v-min: V plans export, check and refuse what does not apply") {
    const std::string batch = plan_batch();
    for (const std::string name : {"zb-v", "v-half", "v-min"}) {
        CAPTURE(name);
        const std::string csv = temp_path(".csv"), trace = temp_path(".json"), svg = temp_path(".svg"), d = make_plan_dir();
        const auto r = run_cli(plan_args(batch, {"--schedule", name, "--max-pending-w", "2", "--torch-csv", csv, "--trace", trace,
                                                 "--svg", svg, "--out", d, "--json"}));
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(nlohmann::json::parse(r.out)["schedule"] == name);
        const std::string c = read_text_file(csv);
        CHECK(c.find("0F0") != std::string::npos);  // rank 0 runs the V's first chunk (stage 0) ...
        CHECK(c.find("7F0") != std::string::npos);  // ... and its last (stage 2S - 1 = 7)
        CHECK(c.find("7W0") != std::string::npos);  // split backward: W ops
        CHECK(nlohmann::json::parse(read_text_file(trace))["traceEvents"].size() > 10);
        CHECK(read_text_file(svg).find("<svg") != std::string::npos);
        const auto check = run_cli({"plan-check", d});
        INFO(check.err);
        CHECK(check.exit_code == 0);
        for (const auto& p : {csv, trace, svg}) std::filesystem::remove(p);
        std::filesystem::remove_all(d);
    }
    const auto two = run_cli(plan_args(batch, {"--schedule", "zb-v", "--chunks", "2", "--json"}));
    INFO(two.err);
    CHECK(two.exit_code == 0);
    const auto three = run_cli(plan_args(batch, {"--schedule", "zb-v", "--chunks", "3"}));
    CHECK(three.exit_code == 1);
    CHECK(three.err.find("does not apply") != std::string::npos);
    const auto pending = run_cli(plan_args(batch, {"--schedule", "1f1b", "--max-pending-w", "2"}));
    CHECK(pending.exit_code == 1);
    CHECK(pending.err.find("--max-pending-w does not apply") != std::string::npos);
    const auto overlap = run_cli(plan_args(batch, {"--schedule", "zb-v", "--overlap-factor", "0.5"}));
    CHECK(overlap.exit_code == 1);
    CHECK(overlap.err.find("--overlap-factor does not apply") != std::string::npos);
    const auto dpv = run_cli(plan_args(batch, {"--overlap-factor", "0.5", "--json"}));  // dualpipe-v a candidate
    INFO(dpv.err);
    REQUIRE(dpv.exit_code == 0);
    bool tried = false;
    const nlohmann::json dpv_json = nlohmann::json::parse(dpv.out);  // (a range-for over a temporary's member dangles)
    for (const auto& c : dpv_json["candidates"]) tried |= c["schedule"] == "dualpipe-v";
    CHECK(tried);
    auto odd_args = plan_args(batch, {"--schedule", "zb-v"});
    *(std::find(odd_args.begin(), odd_args.end(), "--layers-per-stage") + 1) = "7";
    const auto odd = run_cli(odd_args);
    CHECK(odd.exit_code == 1);
    CHECK(odd.err.find("even number of layers") != std::string::npos);
}
