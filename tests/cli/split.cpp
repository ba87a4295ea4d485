// CLI contract tests for `pipeplan split`: JSON keys, every method, --dp, both
// accounting modes, errors; on the analytic model (no data needed) and the real profiles.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"
#include "support.hpp"

using pipeplan::test::read_text_file;
using pipeplan::test::run_cli;

namespace {

std::string write_batch(const std::string& text) {
    const std::string path = pipeplan::test::temp_path(".csv");
    std::ofstream(path) << text;
    return path;
}

/// A batch of `n` samples with deterministic, varied lengths.
std::string make_batch(int n, int scale = 1) {
    std::string text = "task,input_tokens,target_tokens\n";
    unsigned x = 12345;
    for (int i = 0; i < n; ++i) {
        x = x * 1103515245u + 12345u;
        const unsigned in = 10 + (x >> 8) % (400 * static_cast<unsigned>(scale));
        const unsigned tgt = 1 + (x >> 20) % 60;
        text += "t" + std::to_string(i) + "," + std::to_string(in) + "," + std::to_string(tgt) + "\n";
    }
    return write_batch(text);
}

std::vector<std::string> base(const std::string& model, const std::string& batch) {
    std::vector<std::string> a{"split", "--model", model, "--stages", "4", "--memory-mb", "36000", "--batch", batch};
    if (model.rfind("analytic:", 0) != 0) {
        a.push_back("--profiles");
        a.push_back((*pipeplan::test::shared_data_dir() / "cost_models").string());
    }
    if (model.find("t5") != std::string::npos) {
        for (const char* s : {"--tp", "4", "--layers-per-stage", "6"}) a.push_back(s);
    } else {
        for (const char* s : {"--tp", "2", "--layers-per-stage", "8"}) a.push_back(s);
    }
    return a;
}

nlohmann::json split_json(std::vector<std::string> args) {
    args.push_back("--json");
    const auto r = run_cli(args);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
}

/// The contract: keys, a partition of 0..n-1, limits respected, objective recomputed.
void check_contract(const nlohmann::json& j, int n, bool encoder_decoder) {
    for (const char* k : {"microbatches", "objective_ms", "tmax_ms", "sum_ms", "recompute", "memory_limit_mb",
                          "per_microbatch"})
        REQUIRE(j.contains(k));
    std::vector<int> ids;
    for (const auto& mb : j["microbatches"]) {
        CHECK(!mb.empty());
        for (const auto& id : mb) ids.push_back(id.get<int>());
    }
    std::sort(ids.begin(), ids.end());
    std::vector<int> want(static_cast<std::size_t>(n));
    std::iota(want.begin(), want.end(), 0);
    CHECK(ids == want);
    REQUIRE(j["per_microbatch"].size() == j["microbatches"].size());
    double sum = 0, mx = 0;
    for (const auto& m : j["per_microbatch"]) {
        for (const char* k : {"mbs", "seqlen", "dec_seqlen", "time_ms", "stored_mb", "peak_mb"}) REQUIRE(m.contains(k));
        CHECK(m["stored_mb"].get<double>() <= j["memory_limit_mb"].get<double>());
        CHECK(m["peak_mb"].get<double>() <= j["available_mb"].get<double>());
        CHECK((m["dec_seqlen"].get<int>() > 0) == encoder_decoder);
        sum += m["time_ms"].get<double>();
        mx = std::max(mx, m["time_ms"].get<double>());
    }
    CHECK(j["sum_ms"].get<double>() == doctest::Approx(sum));
    CHECK(j["tmax_ms"].get<double>() == doctest::Approx(mx));
    const int s = j["stages"].get<int>(), c = j["virtual_chunks"].get<int>(), dp = j["dp"].get<int>();
    CHECK(j["objective_ms"].get<double>() == doctest::Approx((s - 1) * mx / c + sum / dp));
    const std::string rc = j["recompute"].get<std::string>();
    CHECK((rc == "none" || rc == "selective" || rc == "full"));
}

}  // namespace

TEST_CASE("cli split: the exact split on the analytic model (no data needed)") {
    const std::string batch = make_batch(60);
    auto j = split_json(base("analytic:gpt-6.7b", batch));
    check_contract(j, 60, false);
    CHECK(j["method"] == "dp");
    CHECK(!j.contains("dp_groups"));
    // --dp: the work term is divided and the micro-batches are balanced over the ranks.
    auto args = base("analytic:gpt-6.7b", batch);
    for (const char* s : {"--dp", "2"}) args.push_back(s);
    j = split_json(args);
    check_contract(j, 60, false);
    REQUIRE(j.contains("dp_groups"));
    CHECK(j["dp_groups"].size() == 2);
    std::vector<int> mbs;
    for (const auto& g : j["dp_groups"])
        for (const auto& k : g) mbs.push_back(k.get<int>());
    std::sort(mbs.begin(), mbs.end());
    std::vector<int> want(j["microbatches"].size());
    std::iota(want.begin(), want.end(), 0);
    CHECK(mbs == want);
    // Encoder-decoder analytic model.
    j = split_json(base("analytic:t5-11b", batch));
    check_contract(j, 60, true);
}

TEST_CASE("cli split: every method and accounting mode on the analytic model") {
    const std::string batch = make_batch(40);
    for (const std::vector<std::string>& extra :
         std::vector<std::vector<std::string>>{{"--method", "fixed", "--mbs", "4"},
                                               {"--method", "fixed", "--mbs", "4", "--fixed-order", "sorted"},
                                               {"--method", "tokens", "--tokens-per-mb", "2048"},
                                               {"--method", "packing", "--mbs", "2", "--max-seqlen", "1024"},
                                               {"--method", "dp", "--pack", "--separator-tokens", "1"},
                                               {"--accounting", "dynapipe"},
                                               {"--order", "dataset", "--chunks", "2"},
                                               {"--max-seqlen", "256"}}) {  // --interpolation does not apply to analytic models
        auto args = base("analytic:gpt-6.7b", batch);
        args.insert(args.end(), extra.begin(), extra.end());
        std::string joined;
        for (const auto& e : extra) joined += e + " ";
        INFO("args: " << joined);
        const auto j = split_json(args);
        check_contract(j, 40, false);
        if (extra[1] == "fixed") {
            CHECK(j["microbatches"].size() == 10);
            if (extra.size() == 4) CHECK(j["microbatches"][0] == nlohmann::json::array({0, 1, 2, 3}));
        }
        if (extra[1] == "packing")
            for (const auto& m : j["per_microbatch"]) CHECK(m["seqlen"] == 1024);
        if (extra[0] == "--max-seqlen")
            for (const auto& m : j["per_microbatch"]) CHECK(m["seqlen"].get<int>() <= 256);
        if (extra[0] == "--accounting") CHECK(j["accounting"] == "dynapipe");
    }
}

TEST_CASE("cli split: human-readable summary without --json") {
    const auto r = run_cli(base("analytic:gpt-6.7b", make_batch(10)));
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("objective") != std::string::npos);
    CHECK(r.out.find("micro-batches") != std::string::npos);
}

TEST_CASE("cli split: errors name the problem, exit 1, print no JSON") {
    SUBCASE("batch CSV without target_tokens") {
        const auto r = run_cli(base("analytic:gpt-6.7b", write_batch("input_tokens,x\n5,6\n")));
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("target_tokens") != std::string::npos);
        CHECK(r.out.empty());
    }
    SUBCASE("a malformed row names file and line") {
        const std::string f = write_batch("input_tokens,target_tokens\n5,6\n7,seven\n");
        const auto r = run_cli(base("analytic:gpt-6.7b", f));
        CHECK(r.exit_code == 1);
        CHECK(r.err.find(f + ":3: column 'target_tokens'") != std::string::npos);
    }
    SUBCASE("empty batch") {
        const auto r = run_cli(base("analytic:gpt-6.7b", write_batch("input_tokens,target_tokens\n")));
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("no samples") != std::string::npos);
        CHECK(r.out.empty());
    }
    SUBCASE("a device too small: by how much") {
        // The model states of 8 GPT-6.7B layers at tp 2 need ~14.7 GB.
        const auto tiny = run_cli({"split", "--model", "analytic:gpt-6.7b", "--stages", "4", "--layers-per-stage", "8",
                                   "--tp", "2", "--memory-mb", "1000", "--batch", make_batch(5)});
        CHECK(tiny.exit_code == 1);
        CHECK(tiny.err.find("model states") != std::string::npos);
        CHECK(tiny.err.find("over by") != std::string::npos);
    }
    SUBCASE("a method without its knob, an unknown method") {
        auto args = base("analytic:gpt-6.7b", make_batch(5));
        args.insert(args.end(), {"--method", "fixed"});
        auto r = run_cli(args);
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("--mbs") != std::string::npos);
        args = base("analytic:gpt-6.7b", make_batch(5));
        args.insert(args.end(), {"--method", "random"});
        r = run_cli(args);
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("dp, fixed, tokens, packing") != std::string::npos);
    }
    SUBCASE("a profiled model needs --profiles") {
        const auto r = run_cli({"split", "--model", "gpt_6.7b", "--stages", "4", "--layers-per-stage", "8",
                                "--memory-mb", "36000", "--batch", make_batch(5)});
        CHECK(r.exit_code == 1);
        CHECK(r.err.find("--profiles") != std::string::npos);
    }
}

TEST_CASE("cli split: the real profiles, both accounting modes, GPT and T5" * PIPEPLAN_NEEDS_DATA()) {
    const std::string gpt_batch = make_batch(120);
    for (const char* acc : {"pipeplan", "dynapipe"}) {
        auto args = base("gpt_6.7b", gpt_batch);
        args.insert(args.end(), {"--accounting", acc, "--dp", "2"});
        const auto j = split_json(args);
        check_contract(j, 120, false);
        CHECK(j["accounting"] == acc);
        CHECK(j["dp_groups"].size() == 2);
        auto t5 = base("t5_11b", gpt_batch);
        t5.insert(t5.end(), {"--accounting", acc});
        check_contract(split_json(t5), 120, true);
    }
    for (const std::vector<std::string>& extra :
         std::vector<std::vector<std::string>>{{"--method", "fixed", "--mbs", "2", "--fixed-order", "sorted"},
                                               {"--method", "tokens", "--tokens-per-mb", "4096"},
                                               {"--method", "packing", "--mbs", "1", "--max-seqlen", "2048"}}) {
        auto args = base("gpt_6.7b", gpt_batch);
        args.insert(args.end(), extra.begin(), extra.end());
        check_contract(split_json(args), 120, false);
    }
    // --accounting dynapipe reads the profiles as DynaPipe does whatever --interpolation says
    // (the reference harness passes `linear`): T5's repeated rows give the same, maximum, costs.
    {
        auto t5 = base("t5_11b", gpt_batch);
        t5.insert(t5.end(), {"--accounting", "dynapipe"});
        auto lin = t5, dyn = t5;
        lin.insert(lin.end(), {"--interpolation", "linear"});
        dyn.insert(dyn.end(), {"--interpolation", "dynapipe"});
        const auto jl = split_json(lin), jd = split_json(dyn), jp = split_json(base("t5_11b", gpt_batch));
        CHECK(jl["per_microbatch"] == jd["per_microbatch"]);
        CHECK(jl["objective_ms"] == jd["objective_ms"]);
        CHECK(jl["objective_ms"] != jp["objective_ms"]);
    }
    // A sample longer than the profiles: the error says by how many tokens.
    const auto r = run_cli(base("gpt_6.7b", write_batch("input_tokens,target_tokens\n100,2\n9000,100\n")));
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("sample 1 is longer than the model supports") != std::string::npos);
    CHECK(r.err.find("over by") != std::string::npos);
}

TEST_CASE("cli split --scenario-out feeds cli simulate") {
    const std::string batch = make_batch(80);
    const std::string scenario = pipeplan::test::temp_path(".json");
    auto args = base("analytic:gpt-6.7b", batch);
    for (const char* s : {"--scenario-out", scenario.c_str(), "--hidden-size", "4096"}) args.push_back(s);
    const auto j = split_json(args);
    const auto sim = run_cli({"simulate", "--scenario", scenario, "--schedule", "1f1b", "--json"});
    INFO("stderr: " << sim.err);
    REQUIRE(sim.exit_code == 0);
    const auto s = nlohmann::json::parse(sim.out);
    CHECK(s["device_orders"].size() == 4);
    // Every micro-batch of the split runs forward and backward once on every device.
    CHECK(s["device_orders"][0].size() == 2 * j["microbatches"].size());
    CHECK(s["makespan_ms"].get<double>() >= s["lower_bound_ms"].get<double>() * (1 - 1e-9));
    // The simulated 1F1B time is at least the split's total work of the bottleneck device.
    CHECK(s["makespan_ms"].get<double>() >= j["tmax_ms"].get<double>());
    std::filesystem::remove(scenario);

    // C = 2: the scenario carries its placement (8 chunks on 4 devices), so interleaved runs it
    // as placed (no second split into chunks); a contradicting --chunks is an error.
    auto c2 = base("analytic:gpt-6.7b", batch);
    for (const char* s2 : {"--chunks", "2", "--scenario-out", scenario.c_str()}) c2.push_back(s2);
    const auto j2 = split_json(c2);
    const auto sj = nlohmann::json::parse(read_text_file(scenario));
    CHECK(sj["stages"] == 8);
    CHECK(sj["devices"] == 4);
    CHECK(sj["placement"] == nlohmann::json({0, 1, 2, 3, 0, 1, 2, 3}));
    for (const char* chunks : {"", "2"}) {
        CAPTURE(chunks);
        std::vector<std::string> cmd{"simulate", "--scenario", scenario, "--schedule", "interleaved", "--json"};
        if (*chunks) cmd.insert(cmd.end(), {"--chunks", chunks});
        const auto i2 = run_cli(cmd);
        INFO("stderr: " << i2.err);
        REQUIRE(i2.exit_code == 0);
        const auto s2 = nlohmann::json::parse(i2.out);
        CHECK(s2["devices"] == 4);
        CHECK(s2["chunks"] == 2);
        CHECK(s2["device_orders"].size() == 4);
        CHECK(s2["device_orders"][0].size() == 2 * 2 * j2["microbatches"].size());
        CHECK(s2["device_orders"][0][0] == "F0.0");
    }
    auto bad3 = run_cli({"simulate", "--scenario", scenario, "--schedule", "interleaved", "--chunks", "3"});
    CHECK(bad3.exit_code == 1);
    CHECK(bad3.err.find("--chunks 3 contradicts the scenario") != std::string::npos);
    auto lin = run_cli({"simulate", "--scenario", scenario, "--schedule", "1f1b"});
    CHECK(lin.exit_code == 1);
    CHECK(lin.err.find("runs one stage per device") != std::string::npos);
    const auto ad = run_cli({"simulate", "--scenario", scenario, "--schedule", "adaptive", "--json"});
    REQUIRE(ad.exit_code == 0);
    CHECK(nlohmann::json::parse(ad.out)["devices"] == 4);
    std::filesystem::remove(scenario);

    // dynapipe accounting has no per-chunk layout: a clear error, and no file written.
    auto bad = base("analytic:gpt-6.7b", batch);
    for (const char* s2 : {"--accounting", "dynapipe", "--scenario-out", scenario.c_str()}) bad.push_back(s2);
    const auto r = run_cli(bad);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("'dynapipe' accounting") != std::string::npos);
    CHECK(!std::filesystem::exists(scenario));
}

TEST_CASE("cli split --dp 2 --scenario-out: one scenario per replica, each its own pipeline") {
    const std::string batch = make_batch(80);
    pipeplan::test::temp_dir d;
    auto args = base("analytic:gpt-6.7b", batch);
    args.insert(args.end(), {"--dp", "2", "--scenario-out", d / "sc.json", "--hidden-size", "4096"});
    const auto j = split_json(args);
    REQUIRE(j["dp_groups"].size() == 2);
    CHECK_FALSE(std::filesystem::exists(d / "sc.json"));
    double slowest = 0.0;
    for (int k = 0; k < 2; ++k) {
        const std::string file = d / ("sc_r" + std::to_string(k) + ".json");
        const auto sc = nlohmann::json::parse(read_text_file(file));
        CHECK(sc["microbatches"].size() == j["dp_groups"][k].size());  // this replica's micro-batches only
        const auto sim = run_cli({"simulate", "--scenario", file, "--schedule", "1f1b", "--json"});
        REQUIRE(sim.exit_code == 0);
        slowest = std::max(slowest, nlohmann::json::parse(sim.out)["makespan_ms"].get<double>());
    }
    // Each replica is its own pipeline over about half the micro-batches: even the slowest runs
    // well under the one pipeline of every micro-batch.
    auto whole = base("analytic:gpt-6.7b", batch);
    whole.insert(whole.end(), {"--scenario-out", d / "all.json", "--hidden-size", "4096"});
    (void)split_json(whole);
    const auto all = run_cli({"simulate", "--scenario", d / "all.json", "--schedule", "1f1b", "--json"});
    REQUIRE(all.exit_code == 0);
    CHECK(slowest < 0.8 * nlohmann::json::parse(all.out)["makespan_ms"].get<double>());
    const auto bad = run_cli([&] {
        auto a = base("analytic:gpt-6.7b", batch);
        for (const char* s : {"--dp", "2", "--scenario-out", "-"}) a.push_back(s);
        return a;
    }());
    CHECK(bad.exit_code == 1);
    CHECK(pipeplan::test::contains(bad.err, "one scenario per replica"));
}
