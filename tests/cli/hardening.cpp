// Hardening of the CLI against bad and extreme input: each test generates one bad or extreme
// input and checks the CLI answers with a clear error and exit status 1, touches
// nothing but the named output, and never prints a half-written or lost result.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_cli.hpp"
#include "support.hpp"

using pipeplan::test::contains;
using pipeplan::test::read_text_file;
using pipeplan::test::run_cli;
using pipeplan::test::temp_dir;
using pipeplan::test::temp_path;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

/// A two-stage scenario with two micro-batches.
std::string scenario(const temp_dir& d) {
    const std::string path = d / "s.json";
    write(path, R"({"stages": 2, "microbatches": [
      {"forward_ms": [1, 1], "backward_ms": [2, 2], "stored_mb": [1, 1], "peak_mb": [2, 2]},
      {"forward_ms": [1, 1], "backward_ms": [2, 2], "stored_mb": [1, 1], "peak_mb": [2, 2]}],
      "model_state_mb": [1, 1]})");
    return path;
}

std::vector<std::string> simulate(const std::string& scenario_path, std::vector<std::string> more = {}) {
    std::vector<std::string> a{"simulate", "--scenario", scenario_path, "--schedule", "1f1b"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

/// A batch file of `rows` (each "input_tokens,target_tokens").
std::string batch(const temp_dir& d, const std::string& body, const std::string& name = "b.csv") {
    const std::string path = d / name;
    write(path, "task,input_tokens,target_tokens\n" + body);
    return path;
}

std::vector<std::string> split(const std::string& batch_path, std::vector<std::string> more = {}) {
    std::vector<std::string> a{"split", "--model", "analytic:gpt-6.7b", "--stages", "2", "--layers-per-stage", "4",
                               "--memory-mb", "40000", "--batch", batch_path};
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

/// A small GPT-like profile `m` in folder `d` (tp 1 and 2; encoder layers only). `bom` puts a
/// UTF-8 byte order mark before each header; `embedding` adds the embedding's parameter rows.
void small_profile(const temp_dir& d, bool bom = false, bool embedding = true) {
    const std::string b = bom ? "\xEF\xBB\xBF" : "";
    std::string timing = b + "tp,recompute,component,phase,enc_seqlen,dec_seqlen,mbs,time_ms\n";
    std::string act = b + "tp,recompute,component,kind,enc_seqlen,dec_seqlen,mbs,memory_mb\n";
    std::string state = b + "tp,recompute,component,memory_mb\n";
    for (int tp : {1, 2}) {
        for (int s : {16, 32, 64})
            for (int mbs : {1, 2}) {
                const std::string key = std::to_string(tp) + ",none,encoder,";
                const std::string at = "," + std::to_string(s) + ",0," + std::to_string(mbs) + ",";
                const double t = 0.01 * s * mbs / tp;
                timing += key + "forward" + at + std::to_string(t) + "\n" + key + "backward" + at +
                          std::to_string(2 * t) + "\n";
                act += key + "stored" + at + std::to_string(t) + "\n" + key + "peak" + at + std::to_string(2 * t) + "\n";
            }
        state += std::to_string(tp) + ",none,encoder,100\n";
        if (embedding) state += std::to_string(tp) + ",none,embedding,50\n";
    }
    write(d / "m_timing.csv", timing);
    write(d / "m_activation.csv", act);
    write(d / "m_model_state.csv", state);
}

std::vector<std::string> cost(const temp_dir& d, std::vector<std::string> more = {}) {
    std::vector<std::string> a{"cost", "--profiles", d.path.string(), "--model", "m", "--mbs", "1", "--seqlen", "20"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

/// The CLI failed cleanly: exit 1 and an error message containing every `parts`.
void check_error(const pipeplan::test::cli_result& r, std::initializer_list<std::string> parts) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 1);
    for (const auto& p : parts) CHECK(contains(r.err, p));
}

}  // namespace

// ---- finding 1: times that overflow never hang and never print inf or nan -------------------

TEST_CASE("cli hardening 1: times summing to infinity are an error, not a hang or 'inf'") {
    temp_dir d;
    const std::string path = d / "huge.json";
    write(path, R"({"stages": 2, "microbatches": [
      {"forward_ms": [1, 1], "backward_ms": [1e308, 1], "stored_mb": [1, 1], "peak_mb": [2, 2]},
      {"forward_ms": [1, 1], "backward_ms": [1e308, 1], "stored_mb": [1, 1], "peak_mb": [2, 2]}],
      "model_state_mb": [1, 1]})");
    for (const auto& extra : std::vector<std::vector<std::string>>{{}, {"--svg", d / "g.svg"}, {"--json"}}) {
        const auto r = run_cli(simulate(path, extra));
        INFO("stderr: " << r.err);
        CHECK(r.exit_code == 1);
        CHECK(!contains(r.out, "inf"));
        CHECK(!contains(r.out, "nan"));
    }
    CHECK(!fs::exists(d / "g.svg"));
    // One 1e308 time: the makespan is finite, but not in the trace's microseconds.
    const std::string one = d / "one.json";
    write(one, R"({"stages": 2, "microbatches": [
      {"forward_ms": [1, 1], "backward_ms": [1e308, 1], "stored_mb": [1, 1], "peak_mb": [2, 2]}],
      "model_state_mb": [1, 1]})");
    const auto r = run_cli(simulate(one, {"--trace", d / "t.json"}));
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 1);
    CHECK(!fs::exists(d / "t.json"));
}

// ---- finding 2: output files ------------------------------------------------------------

TEST_CASE("cli hardening 2: a character device is written to, never replaced") {
    temp_dir d;
    const auto r = run_cli(simulate(scenario(d), {"--trace", "/dev/full"}));
    check_error(r, {"cannot write '/dev/full'", "No space left on device"});
    struct stat st {};
    REQUIRE(::stat("/dev/full", &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
    // /dev/null takes the trace and stays a device.
    CHECK(run_cli(simulate(scenario(d), {"--trace", "/dev/null", "--svg", "/dev/null"})).exit_code == 0);
    REQUIRE(::stat("/dev/null", &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("cli hardening 2: a symlink stays a link and its target gets the output") {
    temp_dir d;
    const std::string target = d / "target.json", link = d / "link.json";
    write(target, "old");
    fs::create_symlink("target.json", link);  // relative, resolved against the link's folder
    REQUIRE(run_cli(simulate(scenario(d), {"--trace", link})).exit_code == 0);
    CHECK(fs::is_symlink(link));
    CHECK(nlohmann::json::parse(read_text_file(target)).contains("traceEvents"));
    // A dangling link: the missing target is created, the link kept.
    const std::string dangling = d / "dangling.svg";
    fs::create_symlink("new.svg", dangling);
    REQUIRE(run_cli(simulate(scenario(d), {"--svg", dangling})).exit_code == 0);
    CHECK(fs::is_symlink(dangling));
    CHECK(read_text_file(d / "new.svg").rfind("<svg", 0) == 0);
    // No temporary file is left behind.
    for (const auto& e : fs::directory_iterator(d.path)) CHECK(!contains(e.path().filename().string(), ".tmp."));
}

TEST_CASE("cli hardening 2: a FIFO is streamed to and stays a FIFO") {
    temp_dir d;
    const std::string fifo = d / "out.fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    REQUIRE(fd >= 0);
    std::atomic<bool> done{false};
    pipeplan::test::cli_result r;
    const std::string sc = scenario(d);
    std::thread cli([&] {
        r = run_cli(simulate(sc, {"--svg", fifo}));
        done = true;
    });
    std::string got;
    char buf[4096];
    for (;;) {
        const bool finished = done.load();
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, 50);
        const ::ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) got.append(buf, static_cast<std::size_t>(n));
        else if (finished) break;
    }
    cli.join();
    ::close(fd);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(got.rfind("<svg", 0) == 0);
    CHECK(contains(got, "</svg>"));
    CHECK(fs::is_fifo(fifo));
}

TEST_CASE("cli hardening 2: '-' is standard output and the summary moves to standard error") {
    temp_dir d;
    auto r = run_cli(simulate(scenario(d), {"--svg", "-"}));
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.rfind("<svg", 0) == 0);
    CHECK(!contains(r.out, "peak memory"));  // the summary's lines
    CHECK(contains(r.err, "peak memory"));

    r = run_cli(split(batch(d, "a,100,10\nb,300,20\n"), {"--scenario-out", "-"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out)["stages"] == 2);
    CHECK(contains(r.err, "split of 2 samples"));

    check_error(run_cli(simulate(scenario(d), {"--svg", "-", "--trace", "-"})), {"both standard output"});
}

TEST_CASE("cli hardening 2: lost standard output and unwritable outputs are errors") {
    temp_dir d;
    auto r = pipeplan::test::run_cli_with_stdout(simulate(scenario(d)), "/dev/full");
    check_error(r, {"standard output", "No space left on device"});
    r = pipeplan::test::run_cli_with_stdout(simulate(scenario(d), {"--trace", "-"}), "/dev/full");
    check_error(r, {"No space left on device"});

    check_error(run_cli(simulate(scenario(d), {"--trace", d.path.string()})), {"is a directory"});
    const std::string missing = d / "no/such/dir/t.json";
    check_error(run_cli(simulate(scenario(d), {"--trace", missing})), {"cannot write", "no/such/dir"});
    CHECK(!fs::exists(d / "no"));
}

// ---- finding 3: deeply nested JSON is rejected at once ------------------------------------

TEST_CASE("cli hardening 3: a scenario nested a million deep is an immediate error") {
    temp_dir d;
    const std::string path = d / "deep.json";
    write(path, "{\"stages\":\n" + std::string(1000000, '[') + std::string(1000000, ']') + "}");
    const auto r = run_cli(simulate(path));
    check_error(r, {"deep.json:2", "nested deeper than 64"});
}

// ---- finding 4: flags are range-checked, errors name their input, usage errors exit 1 ---------

TEST_CASE("cli hardening 4: out-of-range flags are usage errors (exit 1) naming the flag") {
    temp_dir d;
    const std::string sc = scenario(d);
    for (const char* v : {"-1", "4294967296", "0", "1000000", "2.5", "x"}) {
        CAPTURE(v);
        check_error(run_cli({"simulate", "--scenario", sc, "--schedule", "interleaved", "--chunks", v}),
                    {"--chunks", "[1, 64]"});
    }
    const std::string b = batch(d, "a,100,10\n");
    check_error(run_cli(split(b, {"--stages", "2147483647"})), {"--stages", "[1, 4096]"});
    check_error(run_cli(split(b, {"--dp", "2147483647"})), {"--dp"});
    check_error(run_cli(split(b, {"--dp", "1000000"})), {"--dp"});
    check_error(run_cli(split(b, {"--memory-mb", "nan"})), {"--memory-mb"});
    check_error(run_cli(split(b, {"--memory-mb", "-5"})), {"--memory-mb"});
    check_error(run_cli({"cost", "--model", "analytic:gpt-6.7b", "--mbs", "1", "--seqlen", "99999999999"}),
                {"--seqlen"});
    check_error(run_cli({"cost", "--model", "analytic:gpt-6.7b", "--mbs", "1", "--seqlen", "8", "--bogus"}),
                {"--bogus"});
    check_error(run_cli({"simulate"}), {"--scenario"});  // a missing required flag
    // A JSON number beyond a double names the file and its line.
    const std::string big = d / "big.json";
    write(big, "{\"stages\": 2,\n \"microbatches\": [{\"forward_ms\": [1e400, 1]}]}");
    check_error(run_cli(simulate(big)), {"big.json:2", "number overflow"});
    CHECK(run_cli({"simulate", "--help"}).exit_code == 0);
}

// ---- finding 6: profile loading ------------------------------------------------------------

TEST_CASE("cli hardening 6: a profile with thousands of tp degrees loads and answers per tp") {
    temp_dir d;
    std::string timing = "tp,recompute,component,phase,enc_seqlen,dec_seqlen,mbs,time_ms\n";
    std::string act = "tp,recompute,component,kind,enc_seqlen,dec_seqlen,mbs,memory_mb\n";
    std::string state = "tp,recompute,component,memory_mb\n";
    for (int tp = 1; tp <= 20000; ++tp) {  // the CLI queries up to --tp 4096; the file has more
        const std::string t = std::to_string(tp);
        timing += t + ",none,encoder,forward,16,0,1," + t + "\n" + t + ",none,encoder,backward,16,0,1,1\n";
        act += t + ",none,encoder,stored,16,0,1,1\n";
        state += t + ",none,encoder,1\n" + t + ",none,embedding,1\n";
    }
    write(d / "m_timing.csv", timing);
    write(d / "m_activation.csv", act);
    write(d / "m_model_state.csv", state);
    for (const char* tp : {"1", "777", "4096"}) {
        const auto r = run_cli({"cost", "--profiles", d.path.string(), "--model", "m", "--tp", tp, "--mbs", "1",
                                "--seqlen", "16", "--json"});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(nlohmann::json::parse(r.out)["forward_ms"].get<double>() == std::stod(tp));
    }
}

// ---- finding 7: messages ---------------------------------------------------------------------

TEST_CASE("cli hardening 7: a UTF-8 byte order mark is not part of the first column name") {
    temp_dir d;
    small_profile(d, true);
    const auto r = run_cli(cost(d, {"--json"}));
    INFO(r.err);
    CHECK(r.exit_code == 0);
    write(d / "bom.csv", "\xEF\xBB\xBFinput_tokens,target_tokens\n5,5\n");
    const auto ok = run_cli(split(d / "bom.csv"));
    INFO(ok.err);
    CHECK(ok.exit_code == 0);
}

TEST_CASE("cli hardening 7: a directory given as a file says so") {
    temp_dir d;
    check_error(run_cli(split(d.path.string())), {"is a directory"});
    small_profile(d);
    fs::remove(d / "m_timing.csv");
    fs::create_directories(d / "m_timing.csv");
    check_error(run_cli(cost(d)), {"m_timing.csv", "not a regular file"});
    temp_dir e;
    small_profile(e);
    fs::remove(e / "m_activation.csv");
    fs::create_directories(e / "m_activation.csv");
    check_error(run_cli(cost(e)), {"m_activation.csv", "is a directory"});
}

TEST_CASE("cli hardening 7: header-only profiles and missing embedding rows are errors") {
    temp_dir d;
    small_profile(d);
    write(d / "m_activation.csv", "tp,recompute,component,kind,enc_seqlen,dec_seqlen,mbs,memory_mb\n");
    check_error(run_cli(cost(d)), {"m_activation.csv", "no data rows"});
    check_error(run_cli({"profile-error", "--profiles", d.path.string(), "--model", "m"}), {"no data rows"});
    check_error(run_cli({"calibrate", "--profiles", d.path.string(), "--model", "m", "--preset", "gpt-6.7b"}),
                {"no data rows"});
    temp_dir e;
    small_profile(e, false, false);
    check_error(run_cli(cost(e)), {"m_model_state.csv", "no 'embedding' row for tp 1"});
}

TEST_CASE("cli hardening 7: bad samples name file and line") {
    temp_dir d;
    check_error(run_cli(split(batch(d, "a,100,10\nb,0,0\n"))), {"b.csv:3", "empty sample"});
    check_error(run_cli(split(batch(d, "a,100,10\n\nb,1073741824,1\n"))), {"b.csv:4", "exceeds 2^30"});
    // An encoder-decoder sample needs input tokens: the model decides, the message names the line.
    const auto r = run_cli({"split", "--model", "analytic:t5-11b", "--stages", "2", "--layers-per-stage", "4",
                            "--memory-mb", "80000", "--batch", batch(d, "a,100,10\nb,0,7\n")});
    check_error(r, {"b.csv:3", "input_tokens"});
}

TEST_CASE("cli hardening 7: whitespace-only lines are skipped like blank lines") {
    temp_dir d;
    const auto r = run_cli(split(batch(d, "a,100,10\n   \n\t\n \t \r\nb,300,20\n"), {"--json"}));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    std::size_t n = 0;
    for (const auto& mb : j["microbatches"]) n += mb.size();
    CHECK(n == 2);
}

TEST_CASE("cli hardening 7: NUL bytes and huge lines do not cut or flood messages") {
    temp_dir d;
    const std::string nul("a,1\0002,3\n", 8);
    auto r = run_cli(split(batch(d, nul)));
    check_error(r, {"b.csv:2", "input_tokens", "\\x00", "2'"});
    const std::string big = d / "big.csv";
    write(big, std::string(1 << 20, 'h') + ",x\n1,2\n");
    r = run_cli(split(big));
    check_error(r, {"big.csv:1", "input_tokens", "bytes)"});
    CHECK(r.err.size() < 2000);
}

TEST_CASE("cli hardening 7: --tp of an unprofiled degree names the profiled ones") {
    temp_dir d;
    small_profile(d);
    check_error(run_cli(cost(d, {"--tp", "3"})), {"--tp 3", "profiled: 1, 2"});
    check_error(run_cli({"split", "--profiles", d.path.string(), "--model", "m", "--tp", "3", "--stages", "2",
                         "--layers-per-stage", "2", "--memory-mb", "40000", "--batch", batch(d, "a,5,5\n")}),
                {"--tp 3", "profiled: 1, 2"});
}

TEST_CASE("cli hardening 7: --round-to beyond the profile talks about the rounding" * PIPEPLAN_NEEDS_DATA()) {
    temp_dir d;
    const std::string profiles = (*pipeplan::test::shared_data_dir() / "cost_models").string();
    const auto r = run_cli({"split", "--profiles", profiles, "--model", "gpt_6.7b", "--tp", "2", "--stages", "4",
                            "--layers-per-stage", "8", "--memory-mb", "40000", "--batch", batch(d, "a,100,10\n"),
                            "--round-to", "10000"});
    check_error(r, {"rounded up to multiples of 10000 tokens", "b.csv:2"});
    CHECK(!contains(r.err, "decoder"));
}

TEST_CASE("cli hardening 7: flags that do not apply, and values that would be changed, are errors") {
    temp_dir d;
    const std::string b = batch(d, "a,100,10\nb,30,2\n");
    check_error(run_cli(split(b, {"--method", "fixed", "--mbs", "1", "--order", "tour"})),
                {"--order does not apply", "--method fixed"});
    check_error(run_cli(split(b, {"--tokens-per-mb", "4096"})), {"--tokens-per-mb does not apply"});
    check_error(run_cli(split(b, {"--zero-stage", "3"})), {"--zero-stage does not apply", "--dp"});
    check_error(run_cli(split(b, {"--hidden-size", "4096"})), {"--hidden-size does not apply"});
    check_error(run_cli(split(b, {"--interpolation", "linear"})), {"--interpolation does not apply"});
    check_error(run_cli(split(b, {"--hidden-size", "-1", "--scenario-out", d / "s.json"})), {"--hidden-size"});
    CHECK(!fs::exists(d / "s.json"));
    check_error(run_cli(split(b, {"--dp", "0"})), {"--dp"});
    check_error(run_cli(simulate(scenario(d), {"--search-order", "--seed", "-1"})), {"--seed"});
    check_error(run_cli(simulate(scenario(d), {"--seed", "3"})), {"--seed does not apply", "--search-order"});
    check_error(run_cli(simulate(scenario(d), {"--chunks", "2"})), {"--chunks 2 does not apply", "1f1b"});
    small_profile(d);
    const auto r = run_cli({"cost", "--profiles", d.path.string(), "--model", "m", "--mbs", "1", "--seqlen", "20",
                            "--dec-seqlen", "8"});
    check_error(r, {"--dec-seqlen does not apply", "decoder-only"});
}

TEST_CASE("cli hardening 7: the zb-h1 memory error names zb-h1") {
    temp_dir d;
    const auto r = run_cli({"simulate", "--scenario", scenario(d), "--schedule", "zb-h1", "--memory-limit-mb", "2"});
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 3);  // a plan over a resource limit (pipeplan::limit_exceeded)
    CHECK(contains(r.err, "zb-h1 schedule: micro-batch 0 alone needs"));
    CHECK(!contains(r.err, "adaptive"));
}
