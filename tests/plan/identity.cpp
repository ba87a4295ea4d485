// plan/identity.hpp, the validator's header rules (a mutation test over every header and
// micro-batch-table field), plan/directory.hpp (whole-plan directories, written on any
// number of threads) and plan/serialize.hpp's binary parts.
#include <doctest/doctest.h>

#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/plan/directory.hpp"
#include "pipeplan/plan/identity.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/validate.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;
namespace fs = std::filesystem;

namespace {

/// A planned, stamped plan: 2 stages x dp 2 of an analytic GPT, a seeded batch.
execution_plan identity_sample_plan(std::uint64_t seed = 5) {
    splitmix64 rng(seed);
    std::vector<batching::sample> batch(24);
    for (auto& s : batch) {
        s.input_tokens = 16 + static_cast<int>(rng.below(300));
        s.target_tokens = 1 + static_cast<int>(rng.below(60));
    }
    planner_options o;
    o.config.stages = 2;
    o.config.layers_per_stage = 16;
    o.config.dp = 2;
    o.config.device_memory_mb = 40000;
    o.hidden_size = 4096;
    o.config.tp = 2;
    o.schedule = schedule::schedule_name::one_f_one_b;  // one chunk per device: what format versions 1 and 2 hold
    static const analytic_cost_model model = make_analytic_model("gpt-6.7b");
    execution_plan p = plan_iteration(model, batch, o).plan;
    stamp_identity(p);
    return p;
}

/// The "header" violations of validate(p), one per line.
std::string header_violations(const execution_plan& p) {
    std::string s;
    for (const auto& v : validate(p, validate_options{std::size_t(1) << 20}).violations)  // every violation
        if (v.rule == "header") s += v.message + "\n";
    return s;
}

/// `payload` (of `programs` programs) in a frame of format version `format`, laid out as every
/// version's writer lays it out: magic, format, program count, payload size, FNV-1a, payload.
std::string framed(std::uint32_t format, std::size_t programs, const std::string& payload) {
    plan::detail::byte_writer f;
    f.out.append(binary_magic);
    f.uint(format);
    f.uint(static_cast<std::uint32_t>(programs));
    f.uint(static_cast<std::uint64_t>(payload.size()));
    f.uint(fnv1a64(payload));
    return f.out + payload;
}

/// `p` in the binary layout of format version `format` (1 or 2) with a header of plan version
/// `plan_version` (a version 2 file may carry a version 1 header), as those versions' writers wrote it.
std::string legacy_binary(const execution_plan& p, std::uint32_t format, std::uint32_t plan_version) {
    const plan_header& h = p.header;
    plan::detail::byte_writer w;
    w.uint(plan_version);
    w.uint(h.iteration);
    for (const std::uint32_t x : {h.devices, h.dp, h.chunks}) w.uint(x);
    w.uint(static_cast<std::uint8_t>(*find_name<schedule::placement_kind>(h.placement)));
    w.str(h.schedule);
    w.uint(static_cast<std::uint8_t>(h.type));
    w.uint(h.zero_stage);
    w.f64(h.predicted_makespan_ms);
    w.uint(static_cast<std::uint32_t>(h.predicted_peak_memory_mb.size()));
    for (const double x : h.predicted_peak_memory_mb) w.f64(x);
    w.uint(static_cast<std::uint32_t>(h.microbatches.size()));
    for (const microbatch_entry& m : h.microbatches) {
        w.uint(m.replica);
        w.uint(static_cast<std::uint32_t>(m.sample_ids.size()));
        for (const std::uint32_t id : m.sample_ids) w.uint(id);
        for (const std::uint32_t x : {m.shape.microbatch_size, m.shape.seqlen, m.shape.dec_seqlen, m.shape.hidden}) w.uint(x);
        if (format >= 2) {
            w.uint(static_cast<std::uint32_t>(m.row_sizes.size()));
            for (const std::uint32_t n : m.row_sizes) w.uint(n);
        }
    }
    if (plan_version >= 2) w.uint(h.plan_id);
    for (const rank_program& prog : p.programs) plan::detail::put(w, prog);
    return framed(format, p.programs.size(), w.out);
}

struct identity_temp_dir {
    fs::path path = fs::temp_directory_path() / ("pipeplan-plandir-" + std::to_string(::getpid()));
    identity_temp_dir() { fs::create_directories(path); }
    ~identity_temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

}  // namespace

TEST_CASE("plan identity: stamped plans validate; equal plans share it, any change of a field changes it") {
    const execution_plan p = identity_sample_plan();
    CHECK(p.header.plan_id != 0);
    CHECK(p.header.plan_id == plan_identity(p));
    CHECK(validate(p).ok());
    CHECK(identity_sample_plan().header.plan_id == p.header.plan_id);
    CHECK(identity_sample_plan(6).header.plan_id != p.header.plan_id);
    // A valid value in any field: the plan is another plan, and validate() says the id is stale.
    const std::vector<std::function<void(plan_header&)>> edits{
        [](plan_header& h) { h.iteration += 1; },
        [](plan_header& h) { h.schedule = "renamed"; },
        [](plan_header& h) { h.type = dtype::bf16; },
        [](plan_header& h) { h.predicted_makespan_ms *= 2; },
        [](plan_header& h) { h.predicted_peak_memory_mb[1] += 1; },
        [](plan_header& h) { h.device_memory_mb += 1; },
        [](plan_header& h) { h.model_state_mb[1] -= 1; },
        [](plan_header& h) { std::swap(h.microbatches[0].sample_ids, h.microbatches[1].sample_ids); },
        [](plan_header& h) { h.microbatches[0].shape.seqlen += 1; },
        [](plan_header& h) { h.placement = "interleaved"; },  // the label alone
        [](plan_header& h) { h.sends = send_rule::grouped; },
        [](plan_header& h) { std::reverse(h.stage_devices.begin(), h.stage_devices.end()); },
        [](plan_header& h) { h.microbatches[0].row_sizes = {std::uint32_t(h.microbatches[0].sample_ids.size())}; },
    };
    for (std::size_t k = 0; k < edits.size(); ++k) {
        CAPTURE(k);
        execution_plan q = p;
        edits[k](q.header);
        CHECK(header_violations(q).find("header.plan_id") != std::string::npos);
    }
    execution_plan q = p;
    q.programs[1].instructions.pop_back();
    CHECK(header_violations(q).find("header.plan_id") != std::string::npos);
    // The shape fields: any change is refused (by the structure rules first).
    const std::vector<std::function<void(plan_header&)>> shape_edits{
        [](plan_header& h) { h.devices += 1; },
        [](plan_header& h) { h.dp = 1; },
        [](plan_header& h) { h.chunks = 2; },
        [](plan_header& h) { h.zero_stage = 2; },
        [](plan_header& h) { h.microbatches.pop_back(); },
        [](plan_header& h) { h.microbatches[0].replica ^= 1; },
    };
    for (std::size_t k = 0; k < shape_edits.size(); ++k) {
        CAPTURE(k);
        execution_plan e = p;
        shape_edits[k](e.header);
        CHECK_FALSE(validate(e).ok());
    }
}

TEST_CASE("header rules: a mutation of every header and micro-batch-table field to a bad value names the field") {
    const execution_plan p = identity_sample_plan();
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    struct mutation {
        const char* field;
        std::function<void(execution_plan&)> apply;
    };
    const std::vector<mutation> mutations{
        {"header.version", [](execution_plan& q) { q.header.version = plan_format_version + 1; }},
        {"header.version", [](execution_plan& q) { q.header.version = 0; }},
        {"header.predicted_makespan_ms", [](execution_plan& q) { q.header.predicted_makespan_ms = -1; }},
        {"header.predicted_makespan_ms", [&](execution_plan& q) { q.header.predicted_makespan_ms = inf; }},
        {"header.predicted_makespan_ms", [&](execution_plan& q) { q.header.predicted_makespan_ms = nan; }},
        {"header.predicted_peak_memory_mb[2]", [](execution_plan& q) { q.header.predicted_peak_memory_mb[2] = -5; }},
        {"header.predicted_peak_memory_mb[0]", [&](execution_plan& q) { q.header.predicted_peak_memory_mb[0] = nan; }},
        {"header.predicted_peak_memory_mb", [](execution_plan& q) { q.header.predicted_peak_memory_mb.pop_back(); }},
        {"header.predicted_peak_memory_mb", [](execution_plan& q) { q.header.predicted_peak_memory_mb.clear(); }},
        {"header.zero_stage", [](execution_plan& q) { q.header.zero_stage = 4; }},
        {"header.device_memory_mb", [&](execution_plan& q) { q.header.device_memory_mb = nan; }},
        {"header.device_memory_mb", [](execution_plan& q) { q.header.device_memory_mb = -1; }},
        {"header.model_state_mb[1]", [](execution_plan& q) { q.header.model_state_mb[1] = -1; }},
        {"header.model_state_mb[0]", [&](execution_plan& q) { q.header.model_state_mb[0] = inf; }},
        {"header.model_state_mb", [](execution_plan& q) { q.header.model_state_mb.pop_back(); }},
        {"header.model_state_mb", [](execution_plan& q) { q.header.model_state_mb.clear(); }},
        {"header.microbatches[0].replica", [](execution_plan& q) { q.header.microbatches[0].replica = 2; }},
        {"header.microbatches[1].sample_ids",
         [](execution_plan& q) { q.header.microbatches[1].sample_ids.push_back(q.header.microbatches[0].sample_ids[0]); }},
        {"header.microbatches[0].sample_ids", [](execution_plan& q) { q.header.microbatches[0].sample_ids[0] = 4294967295u; }},
        {"header.microbatches[0].sample_ids", [](execution_plan& q) {
             auto& ids = q.header.microbatches[0].sample_ids;
             ids.push_back(ids[0]);  // a duplicate inside one micro-batch
         }},
        {"header.microbatches[1].sample_ids", [](execution_plan& q) {
             auto& a = q.header.microbatches[0].sample_ids;
             auto& b = q.header.microbatches[1].sample_ids;
             a.insert(a.end(), b.begin(), b.end());  // micro-batch 1 keeps its shape, loses its samples
             b.clear();
         }},
        {"arena_bytes", [](execution_plan& q) { q.programs[1].arena_bytes = std::uint64_t(1) << 63; }},
        {"live_peak_bytes", [](execution_plan& q) { q.programs[0].live_peak_bytes = 10 * q.programs[0].arena_bytes; }},
    };
    for (const auto& m : mutations) {
        CAPTURE(m.field);
        execution_plan q = p;
        m.apply(q);
        q.header.plan_id = plan_identity(q);  // restamped: only the field's own rule can fail
        CHECK(header_violations(q).find(std::string(m.field) + ":") != std::string::npos);
        // Each rank's share alone is refused too (what an executor checks before running).
        bool refused = false;
        for (const auto& prog : q.programs) refused = refused || !validate_rank(rank_plan{q.header, prog}).ok();
        CHECK(refused);
    }
}

TEST_CASE("plan directory: written whole, read back equal; a smaller plan leaves no stale rank files") {
    identity_temp_dir d;
    const fs::path dir = d.path / "plan";
    execution_plan p = identity_sample_plan();
    write_plan_directory(dir, p, false, {{"note", "kept"}});
    CHECK(read_plan_directory(dir) == p);
    CHECK(fs::exists(dir / "rank_3.plan"));
    execution_plan small = p;
    small.header.dp = 1;
    small.programs.resize(2);
    std::erase_if(small.header.microbatches, [](const auto& m) { return m.replica == 1; });
    small.header.predicted_peak_memory_mb.resize(2);
    write_plan_directory(dir, small, true);
    CHECK_FALSE(fs::exists(dir / "rank_3.plan"));
    CHECK_FALSE(fs::exists(dir / "rank_0.plan"));
    CHECK(read_plan_directory(dir) == small);
    for (const auto& e : fs::directory_iterator(d.path))  // no temporary left beside it
        CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

namespace {

/// The files of the plan directory `dir`, by name.
std::map<std::string, std::string> directory_bytes(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::directory_iterator(dir)) files[e.path().filename().string()] = read_file_bytes(e.path());
    return files;
}

}  // namespace

TEST_CASE("plan directory: written on 1, 2 or 5 threads, the same bytes; each rank file is to_binary of its share") {
    identity_temp_dir d;
    execution_plan p = identity_sample_plan();
    const std::uint64_t id = p.header.plan_id;
    p.header.plan_id = 0;  // (stamped again by each write)
    for (const bool json : {false, true}) {
        CAPTURE(json);
        std::map<std::string, std::string> first;
        for (const std::size_t threads : {1u, 2u, 5u}) {
            CAPTURE(threads);
            execution_plan q = p;
            write_plan_directory(d.path / "plan", q, json, {{"note", "kept"}}, threads);
            CHECK(q.header.plan_id == id);
            const auto files = directory_bytes(d.path / "plan");
            if (first.empty()) first = files;
            CHECK(files == first);
            REQUIRE(files.size() == q.programs.size() + 1);
            for (std::size_t k = 0; k < q.programs.size(); ++k)
                CHECK(files.at(rank_file_name(k, json)) == (json ? to_json_text(share_of(q, k)) : to_binary(share_of(q, k))));
        }
    }
}

namespace {

/// `p`'s whole-plan binary form written by the growing byte_writer field by field (the
/// reference for the sized writer and the parts).
std::string reference_binary(const execution_plan& p) {
    plan::detail::byte_writer w;
    plan::detail::put(w, p.header);
    for (const rank_program& prog : p.programs) plan::detail::put(w, prog);
    return framed(plan_format_version, p.programs.size(), w.out);
}

}  // namespace

TEST_CASE("binary parts: the same bytes as the whole frame and the rank frames on any thread count; sizes counted") {
    const execution_plan p = identity_sample_plan();
    const std::string whole = to_binary(p);
    CHECK(whole == reference_binary(p));
    for (const std::size_t threads : {1u, 3u}) {
        const binary_parts parts = binary_parts_of(p.header, p.programs, threads);
        std::vector<std::string_view> pieces{parts.header};
        for (const std::string& prog : parts.programs) pieces.push_back(prog);
        std::string joined = plan::detail::frame_head(p.programs.size(), pieces);
        for (const std::string_view piece : pieces) joined += piece;
        CHECK(joined == whole);
        for (std::size_t k = 0; k < p.programs.size(); ++k) {
            const std::string rank = to_binary(share_of(p, k));
            CHECK(rank == reference_binary(execution_plan{p.header, {p.programs[k]}}));
            CHECK(rank == plan::detail::frame_head(1, {parts.header, parts.programs[k]}) + parts.header + parts.programs[k]);
            CHECK(rank_binary_bytes(p, k) == rank.size());
        }
    }
    execution_plan unstamped = p;
    unstamped.header.plan_id = 0;
    for (const std::size_t threads : {1u, 2u, 6u}) {  // the checksum summed while the parts are made
        std::uint64_t checksum = 0;
        const binary_parts parts = binary_parts_of(unstamped.header, unstamped.programs, threads, &checksum);
        CHECK(checksum == fnv1a64(std::string_view(to_binary(unstamped)).substr(plan::detail::frame_head_bytes)));
        CHECK(plan_identity(parts, checksum) == p.header.plan_id);
    }
    CHECK(fnv1a64(std::string_view(whole).substr(40), fnv1a64(std::string_view(whole).substr(32, 8))) ==
          fnv1a64(std::string_view(whole).substr(32)));
}

TEST_CASE("plan directory: stale or planted files, other plans' rank files, and foreign directories are refused") {
    identity_temp_dir d;
    const fs::path dir = d.path / "plan";
    execution_plan p = identity_sample_plan(), other = identity_sample_plan(9);
    write_plan_directory(dir, p, false);
    const fs::path odir = d.path / "other";
    write_plan_directory(odir, other, false);
    fs::copy_file(odir / "rank_1.plan", dir / "rank_1.plan", fs::copy_options::overwrite_existing);
    CHECK_THROWS_WITH_AS((void)read_plan_directory(dir), doctest::Contains("belongs to another plan"), input_error);
    fs::copy_file(odir / "rank_1.plan", dir / "rank_9.plan");
    CHECK_THROWS_WITH_AS((void)read_plan_directory(dir), doctest::Contains("rank_9.plan"), input_error);
    const fs::path home = d.path / "home";
    fs::create_directories(home);
    { std::ofstream(home / "thesis.tex") << "x"; }
    CHECK_THROWS_WITH_AS(write_plan_directory(home, p, false), doctest::Contains("thesis.tex"), error);
    CHECK(fs::exists(home / "thesis.tex"));
}

TEST_CASE("plan directory: a second writer fails at once naming the directory; a killed writer's temporary is removed") {
    identity_temp_dir d;
    const fs::path dir = d.path / "plan";
    execution_plan p = identity_sample_plan();
    const int fd = ::open((d.path / ".plan.lock").c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX) == 0);  // another writer at work
    CHECK_THROWS_WITH_AS(write_plan_directory(dir, p, false), doctest::Contains("is being written by another process"), error);
    ::close(fd);
    fs::create_directories(d.path / ".plan.tmp.AbCdEf");  // what a writer killed mid-way leaves
    { std::ofstream(d.path / ".plan.tmp.AbCdEf" / "rank_0.plan") << "half"; }
    write_plan_directory(dir, p, false);
    CHECK_FALSE(fs::exists(d.path / ".plan.tmp.AbCdEf"));
    CHECK(read_plan_directory(dir) == p);
}

TEST_CASE("binary plans: a bad format version is named at its own byte (8); version 1 files still read") {
    execution_plan p = identity_sample_plan();
    std::string bytes = to_binary(p);
    bytes[8] = 9;
    CHECK_THROWS_WITH_AS((void)execution_plan_from_binary(bytes, "v.plan"), doctest::Contains("at byte 8:"), input_error);
    bytes[8] = 0;
    CHECK_THROWS_WITH_AS((void)execution_plan_from_binary(bytes, "v.plan"), doctest::Contains("at byte 8:"), input_error);
}

TEST_CASE("plans of versions 1 and 2 still read: their placement's stage map, send rule buffered, their identity kept") {
    execution_plan p = identity_sample_plan();
    p.header.microbatches[0].row_sizes = {};  // unpacked: what version 1 can say
    for (const auto& [format, version] : {std::pair{1u, 1u}, std::pair{2u, 1u}, std::pair{2u, 2u}}) {
        CAPTURE(format);
        CAPTURE(version);
        execution_plan want = p;
        want.header.version = version;
        want.header.device_memory_mb = 0;  // recorded from version 4 on
        want.header.model_state_mb.clear();
        if (version < 2) want.header.plan_id = 0;
        const execution_plan back = execution_plan_from_binary(legacy_binary(want, format, version), "old.plan");
        CHECK(back == want);
        CHECK(back.header.sends == send_rule::buffered);
        CHECK(back.header.stage_devices == std::vector<std::uint32_t>{0, 1});
        CHECK(validate(back).ok());  // a version 2 identity hashed its own layout: not recomputed
        // written again, it is a current plan that reads back equal but for its version
        execution_plan again = execution_plan_from_binary(to_binary(back), "new.plan");
        CHECK(again.header.version == plan_format_version);
        again.header.version = version;
        CHECK(again == back);
        // the JSON of that version: no stage map or send rule, row_sizes only where packed
        nlohmann::json j = nlohmann::json::parse(to_json_text(back));
        j["version"] = version;
        j["header"]["version"] = version;
        for (const char* key : {"stage_devices", "send_rule", "device_memory_mb", "model_state_mb"}) j["header"].erase(key);
        for (auto& m : j["header"]["microbatches"]) m.erase("row_sizes");
        if (version < 2) j["header"].erase("plan_id");
        CHECK(execution_plan_from_json(j.dump(), "old.json") == want);
    }
    // a version 2 file whose placement code is no placement is refused, naming the field
    std::string bad = legacy_binary(p, 2, 2);
    const std::size_t placement_byte = 32 + 4 + 8 + 3 * 4;
    bad[placement_byte] = 7;
    const std::string payload = bad.substr(32);
    const std::uint64_t sum = fnv1a64(payload);
    for (std::size_t i = 0; i < 8; ++i) bad[24 + i] = static_cast<char>((sum >> (8 * i)) & 0xFF);
    CHECK_THROWS_WITH_AS((void)execution_plan_from_binary(bad, "old.plan"), doctest::Contains("header.placement"), input_error);
    // a frame of the current version must carry a header of that version
    execution_plan mixed = p;
    std::string cur = to_binary(mixed);
    cur[32] = 2;
    const std::uint64_t sum3 = fnv1a64(std::string_view(cur).substr(32));
    for (std::size_t i = 0; i < 8; ++i) cur[24 + i] = static_cast<char>((sum3 >> (8 * i)) & 0xFF);
    CHECK_THROWS_WITH_AS((void)execution_plan_from_binary(cur, "mixed.plan"), doctest::Contains("header.version"), input_error);
}

/// `p` in the binary layout of format 3: the current layout without the fields of version 4.
std::string version3_binary(const execution_plan& p) {
    plan::detail::byte_writer w;
    for_each_field<plan_header>([&](const auto& f) {
        if (f.text == field_text::version) w.uint(std::uint32_t{3});
        else if (f.since <= 3) plan::detail::put(w, p.header.*f.member);
    });
    for (const rank_program& prog : p.programs) plan::detail::put(w, prog);
    return framed(3, p.programs.size(), w.out);
}

TEST_CASE("memory rule: a rank whose arena + model state exceeds the recorded device memory is named with its figures") {
    const execution_plan p = identity_sample_plan();
    REQUIRE(p.header.device_memory_mb == 40000);
    REQUIRE(p.header.model_state_mb.size() == p.header.ranks());
    for (const auto& prog : p.programs) CHECK(rank_memory_mb(p.header, prog) <= p.header.device_memory_mb);
    execution_plan q = p;
    // rank 2 one byte over the limit: 40000 MB - its model state, + 1 byte of arena
    const double state_mb = q.header.model_state_mb[2];
    q.programs[2].arena_bytes = static_cast<std::uint64_t>(std::ceil((40000.0 - state_mb) * 1e6)) + 1;
    q.programs[2].live_peak_bytes = std::min(q.programs[2].live_peak_bytes, q.programs[2].arena_bytes);
    q.header.plan_id = plan_identity(q);
    const validation_report rep = validate(q);
    REQUIRE(rep.violations.size() >= 1);
    const auto it = std::find_if(rep.violations.begin(), rep.violations.end(), [](const violation& v) { return v.rule == "memory"; });
    REQUIRE(it != rep.violations.end());
    CHECK(it->rank == 2);
    CHECK(it->message.find("model state " + plan::detail::mb_text(state_mb) + " MB") != std::string::npos);
    CHECK(it->message.find("device memory of 40000.0 MB") != std::string::npos);
    CHECK_FALSE(validate_rank(rank_plan{q.header, q.programs[2]}).ok());
    CHECK_FALSE(validate_header(rank_plan{q.header, q.programs[2]}).ok());  // what executors check
    CHECK(validate_rank(rank_plan{q.header, q.programs[1]}).ok());
    // exactly at the limit fits
    q.programs[2].arena_bytes = static_cast<std::uint64_t>(std::floor((40000.0 - state_mb) * 1e6)) - 1;
    q.header.plan_id = plan_identity(q);
    CHECK(validate_rank(rank_plan{q.header, q.programs[2]}).ok());
    // no device memory recorded (a plan built by hand): not checked
    q.programs[2].arena_bytes = std::uint64_t(1) << 40;
    q.header.device_memory_mb = 0;
    q.header.model_state_mb.clear();
    q.header.plan_id = plan_identity(q);
    CHECK(validate(q).ok());
}

TEST_CASE("plans of version 3 still read: no device memory or model state, the memory rule not checked") {
    const execution_plan p = identity_sample_plan();
    execution_plan want = p;
    want.header.version = 3;
    want.header.device_memory_mb = 0;
    want.header.model_state_mb.clear();
    const execution_plan back = execution_plan_from_binary(version3_binary(want), "v3.plan");
    CHECK(back == want);
    CHECK_FALSE(records_memory(back.header));
    CHECK(validate(back).ok());  // its identity hashed the version 3 layout: not recomputed
    nlohmann::json j = nlohmann::json::parse(to_json_text(back));
    j["version"] = 3;
    j["header"]["version"] = 3;
    for (const char* key : {"device_memory_mb", "model_state_mb"}) j["header"].erase(key);
    CHECK(execution_plan_from_json(j.dump(), "v3.json") == want);
    // a version 4 file must hold the new fields
    nlohmann::json k = nlohmann::json::parse(to_json_text(p));
    k["header"].erase("device_memory_mb");
    CHECK_THROWS_WITH_AS((void)execution_plan_from_json(k.dump(), "v4.json"), doctest::Contains("device_memory_mb"), input_error);
}

TEST_CASE("binary and JSON round trips keep the device memory and model states bit for bit") {
    execution_plan p = identity_sample_plan();
    p.header.device_memory_mb = 36000.125;
    p.header.model_state_mb = {5101.4, 0.1 + 0.2, 1e-300, 7.0};
    stamp_identity(p);
    CHECK(execution_plan_from_binary(to_binary(p), "r.plan") == p);
    CHECK(execution_plan_from_json(to_json_text(p), "r.json") == p);
    CHECK(validate(p).ok());
}
