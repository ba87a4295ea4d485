#include <doctest/doctest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/plan/export.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/plan_file.hpp"
#include "pipeplan/plan/result_json.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

namespace {

execution_plan sample_plan(const test::named_case& c) {
    lowering_options o;
    o.shapes.assign(c.sc.microbatches, tensor_shape{2, 512, 0, 4096});
    execution_plan p = lower(c.sc, c.sched, o);
    p.header.iteration = 42;
    p.header.predicted_makespan_ms = 1.0 / 3.0;
    p.header.predicted_peak_memory_mb.assign(p.programs.size(), 1234.5678901234567);
    for (std::size_t j = 0; j < p.header.microbatches.size(); ++j) p.header.microbatches[j].sample_ids = {std::uint32_t(2 * j), std::uint32_t(2 * j + 1)};
    return p;
}

/// The message of the input_error `f` throws ("no error" when it throws none).
template <class F>
std::string message(F&& f) {
    try {
        f();
    } catch (const input_error& e) {
        return std::string(e.what());
    }
    return std::string("no error");
}

}  // namespace

TEST_CASE("serialize: binary and JSON round trips are exact, for whole plans and rank files") {
    const auto sc = test::random_scenario(3, 4, 2);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        const execution_plan p = sample_plan(c);
        REQUIRE(validate(p).ok());
        CHECK(execution_plan_from_binary(to_binary(p)) == p);
        CHECK(execution_plan_from_json(to_json_text(p)) == p);
        for (std::size_t r = 0; r < p.programs.size(); ++r) {
            const rank_plan rp = share_of(p, r);
            CHECK(rank_plan_from_binary(to_binary(rp)) == rp);
            CHECK(rank_plan_from_json(to_json_text(rp)) == rp);
            CHECK(to_binary(rank_plan_from_binary(to_binary(rp))) == to_binary(rp));  // byte-identical
        }
    }
}

TEST_CASE("serialize: equal inputs give byte-identical files") {
    const auto sc = test::random_scenario(4, 6, 3);
    const auto a = test::all_schedules(sc), b = test::all_schedules(sc);
    for (std::size_t k = 0; k < a.size(); ++k) {
        CHECK(to_binary(sample_plan(a[k])) == to_binary(sample_plan(b[k])));
        CHECK(to_json_text(sample_plan(a[k])) == to_json_text(sample_plan(b[k])));
    }
}

TEST_CASE("serialize: truncated, corrupted, newer and foreign files give clear errors") {
    const auto sc = test::random_scenario(2, 3, 4);
    const auto c = test::all_schedules(sc)[1];
    const std::string bin = to_binary(share_of(sample_plan(c), 0));
    // every truncation is refused
    for (std::size_t n = 0; n < bin.size(); n += 1 + n / 8)
        CHECK(message([&] { (void)rank_plan_from_binary(bin.substr(0, n), "r.plan"); }).find("r.plan") == 0);
    CHECK(message([&] { (void)rank_plan_from_binary(bin.substr(0, bin.size() - 1), "r.plan"); }).find("truncated") != std::string::npos);
    // every single-byte corruption of the payload is refused by the checksum
    for (std::size_t i = 32; i < bin.size(); i += 7) {
        std::string bad = bin;
        bad[i] = static_cast<char>(bad[i] ^ 0x5A);
        CHECK(message([&] { (void)rank_plan_from_binary(bad, "r.plan"); }).find("checksum") != std::string::npos);
    }
    std::string newer = bin;
    newer[8] = 9;  // format version 9
    CHECK(message([&] { (void)rank_plan_from_binary(newer, "r.plan"); }).find("newer") != std::string::npos);
    std::string zero = bin;
    zero[8] = 0;  // format version 0
    CHECK(message([&] { (void)rank_plan_from_binary(zero, "r.plan"); }) ==
          "r.plan: column 'format_version': at byte 8: plan format version 0 does not exist");
    CHECK(message([&] { (void)rank_plan_from_binary("hello world, not a plan", "x"); }).find("magic") != std::string::npos);
    CHECK(message([&] { (void)rank_plan_from_binary(bin + "x", "r.plan"); }).find("after the payload") != std::string::npos);
    CHECK(message([&] { (void)rank_plan_from_binary(to_binary(sample_plan(c)), "all.plan"); }).find("one program") != std::string::npos);
    // JSON: bad syntax, wrong field, newer version
    const std::string js = to_json_text(share_of(sample_plan(c), 0));
    CHECK(message([&] { (void)rank_plan_from_json(js.substr(0, js.size() / 2), "r.json"); }).find("invalid JSON") != std::string::npos);
    auto j = nlohmann::json::parse(js);
    j["programs"][0]["instructions"][3]["kind"] = "fly";
    CHECK(message([&] { (void)rank_plan_from_json(j.dump(), "r.json"); }).find("programs[0].instructions[3].kind") != std::string::npos);
    j = nlohmann::json::parse(js);
    j["version"] = 99;
    CHECK(message([&] { (void)rank_plan_from_json(j.dump(), "r.json"); }).find("newer") != std::string::npos);
    j = nlohmann::json::parse(js);
    j["header"].erase("devices");
    CHECK(message([&] { (void)rank_plan_from_json(j.dump(), "r.json"); }).find("header.devices") != std::string::npos);
}

TEST_CASE("export: torch CSV follows PyTorch's action grammar") {
    // _Action.from_str: (\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)
    const std::regex action(R"((\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*))");
    // _Action.from_str's sub-action form: (<action>;<action>)OVERLAP_F_B
    const std::regex overlap(R"(\(([^;()]+);([^;()]+)\)OVERLAP_F_B)");
    const auto sc = test::random_scenario(3, 4, 5);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        const execution_plan p = sample_plan(c);
        for (bool comms : {false, true}) {
            const std::string csv = to_torch_csv(p, comms);
            std::istringstream in(csv);
            std::string row;
            std::size_t rank = 0, forwards = 0, backwards = 0, overlaps = 0;
            std::set<std::string> seen;
            while (std::getline(in, row)) {
                std::istringstream cells(row);
                std::string cell;
                while (std::getline(cells, cell, ',')) {
                    std::vector<std::string> parts{cell};
                    std::smatch pair;
                    if (std::regex_match(cell, pair, overlap)) parts = {pair[1], pair[2]};  // one action, two parts
                    for (const std::string& a : parts) {
                        std::smatch m;
                        REQUIRE_MESSAGE(std::regex_match(a, m, action), a);
                        const std::uint32_t stage = static_cast<std::uint32_t>(std::stoul(m[1]));
                        CHECK(p.header.device_of_stage(stage) == rank);  // every action on its stage's rank
                        const std::string t = m[2];
                        CHECK((t == "REDUCE_GRAD") == m[3].str().empty());
                        if (t == "F") ++forwards;
                        if (t == "B" || t == "I") ++backwards;
                        if (!comms) CHECK((t == "F" || t == "B" || t == "I" || t == "W"));
                        CHECK(seen.insert(a).second);  // no action twice
                    }
                    overlaps += parts.size() == 2;
                }
                ++rank;
            }
            CHECK(rank == p.header.devices);
            CHECK(forwards == c.sc.stages * c.sc.microbatches);   // one F per mb and stage (recompute folded)
            CHECK(backwards == c.sc.stages * c.sc.microbatches);
            std::size_t markers = 0;
            for (const auto& prog : p.programs)
                for (const auto& x : prog.instructions) markers += x.kind == instr_kind::overlap_f_b;
            CHECK(overlaps == markers);
        }
    }
    // golden: 1F1B on 2 stages, 2 micro-batches
    const auto sc2 = test::random_scenario(2, 2, 1);
    const execution_plan p = lower(sc2, schedule::one_f_one_b{}(sc2));
    CHECK(to_torch_csv(p, false) == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
    CHECK(to_torch_csv(p, true) ==
          "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0RECV_B1,0B0,0B1,0REDUCE_GRAD\n"
          "1RECV_F0,1RECV_F1,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD\n");
    // golden: the same with micro-batch 1's forward on stage 0 overlapped with micro-batch 0's
    // backward (PyTorch's sub-action form), whole backwards
    schedule::pipeline_schedule s2 = schedule::one_f_one_b{}(sc2);
    s2.orders[0] = {{schedule::op_kind::F, 0, 0}, {schedule::op_kind::F, 1, 0, true}, {schedule::op_kind::B, 0, 0},
                    {schedule::op_kind::B, 1, 0}};
    const execution_plan q = lower(sc2, s2);
    CHECK(validate(q).ok());
    CHECK(to_torch_csv(q, false) == "0F0,(0F1;0B0)OVERLAP_F_B,0B1\n1F0,1B0,1F1,1B1\n");
    CHECK(to_torch_csv(q, true).find(",(0F1;0B0)OVERLAP_F_B,") != std::string::npos);
    CHECK(execution_plan_from_binary(to_binary(q)) == q);
    CHECK(execution_plan_from_json(to_json_text(q)) == q);
}

TEST_CASE("export: Chrome trace has a track per rank and a flow per message") {
    const auto sc = test::random_scenario(3, 4, 6);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        const execution_plan p = sample_plan(c);
        const auto sim = schedule::simulate(c.sc, c.sched);
        std::ostringstream os;
        write_plan_trace(os, p, sim);
        const auto j = nlohmann::json::parse(os.str());
        std::size_t threads = 0, flows_s = 0, flows_f = 0, slices = 0, sends = 0;
        for (const auto& e : j["traceEvents"]) {
            const std::string ph = e["ph"];
            threads += e["name"] == "thread_name";
            flows_s += ph == "s";
            flows_f += ph == "f";
            slices += ph == "X";
        }
        for (const auto& prog : p.programs)
            for (const auto& x : prog.instructions) sends += category(x.kind) == kind_category::send_start;
        CHECK(threads == p.header.devices);
        CHECK(flows_s == sends);
        CHECK(flows_f == sends);
        std::size_t ops = 0;
        for (const auto& o : c.sched.orders) ops += o.size();
        CHECK(slices == ops);
    }
}

TEST_CASE("export with dp > 1: a trace process per replica with every rank, a torch CSV per replica") {
    const analytic_cost_model model = make_analytic_model("gpt-6.7b");
    planner_options o;
    o.config.stages = 3;
    o.config.layers_per_stage = 4;
    o.config.tp = 2;
    o.config.dp = 2;
    o.config.device_memory_mb = 40000;
    o.hidden_size = 4096;
    o.order_search_evaluations = 4;
    std::vector<batching::sample> batch;
    splitmix64 rng(21);
    for (int i = 0; i < 40; ++i)
        batch.push_back({.input_tokens = 32 + static_cast<int>(rng.below(900)), .target_tokens = 1 + static_cast<int>(rng.below(60))});
    const plan_result r = plan_iteration(model, batch, o);
    REQUIRE(r.plan.header.dp == 2);
    REQUIRE(r.simulations.size() == 2);
    std::ostringstream os;
    write_plan_trace(os, r.plan, r.simulations);
    const auto j = nlohmann::json::parse(os.str());
    std::set<std::pair<int, int>> tracks;  // (pid, tid) of the named tracks
    std::set<int> processes;
    std::size_t slices = 0, flows_s = 0, flows_f = 0;
    for (const auto& e : j["traceEvents"]) {
        if (e["name"] == "thread_name") tracks.insert({e["pid"].get<int>(), e["tid"].get<int>()});
        if (e["name"] == "process_name") processes.insert(e["pid"].get<int>());
        const std::string ph = e["ph"];
        slices += ph == "X";
        flows_s += ph == "s";
        flows_f += ph == "f";
        if (ph == "X") CHECK(e["tid"].get<int>() / 3 == e["pid"].get<int>());  // rank r = replica * S + device
    }
    CHECK(processes == std::set<int>{0, 1});
    CHECK(tracks.size() == 6);
    for (int rank = 0; rank < 6; ++rank) CHECK(tracks.count({rank / 3, rank}) == 1);
    std::size_t ops = 0, sends = 0;
    for (const auto& prog : r.plan.programs)
        for (const auto& x : prog.instructions) {
            ops += is_compute(x.kind);
            sends += category(x.kind) == kind_category::send_start;
        }
    CHECK(slices == ops);
    CHECK(flows_s == sends);
    CHECK(flows_f == sends);
    CHECK_THROWS_AS(write_plan_trace(os, r.plan, r.simulation), pipeplan::invalid_argument);  // one simulation, 2 replicas

    // torch CSV: each replica's rows number its own micro-batches 0..n_k - 1
    for (std::uint32_t k = 0; k < 2; ++k) {
        const std::string csv = to_torch_csv(r.plan, false, k);
        std::size_t n_k = 0;
        for (const auto& m : r.plan.header.microbatches) n_k += m.replica == k;
        std::set<std::string> forwards_of_stage0;
        std::istringstream in(csv);
        std::string row;
        std::getline(in, row);
        std::istringstream cells(row);
        std::string a;
        while (std::getline(cells, a, ','))
            if (a.rfind("0F", 0) == 0) forwards_of_stage0.insert(a);
        CHECK(forwards_of_stage0.size() == n_k);
        for (std::size_t m = 0; m < n_k; ++m) CHECK(forwards_of_stage0.count("0F" + std::to_string(m)) == 1);
    }
    CHECK_THROWS_AS((void)to_torch_csv(r.plan, false, 2), pipeplan::invalid_argument);
    CHECK(replica_file_name("out/plan.csv", 1, 2) == "out/plan_r1.csv");
    CHECK(replica_file_name("out/plan.csv", 0, 1) == "out/plan.csv");
    CHECK(replica_file_name("out.d/plan", 3, 4) == "out.d/plan_r3");
    CHECK(replica_file_name(".hidden", 0, 2) == ".hidden_r0");
}

TEST_CASE("serialize: a schedule name either format cannot carry is refused by both readers") {
    // Every plan one format reads can be written in the other: a name that is not UTF-8 could
    // not be written as JSON (nlohmann throws type_error 316 from dump()).
    const auto sc = test::random_scenario(2, 3, 4);
    const auto c = test::all_schedules(sc)[1];
    for (const std::string& name : {std::string("a\x9b"), std::string("x\ny"), std::string(65, 'a'), std::string("sp ace")}) {
        CAPTURE(name);
        execution_plan p = sample_plan(c);
        p.header.schedule = name;
        const std::string e = message([&] { (void)execution_plan_from_binary(to_binary(p), "r.plan"); });
        CHECK(e.find("r.plan: column 'header.schedule': at byte ") == 0);
        CHECK(e.find("expected at most 64 characters of [A-Za-z0-9_.+-]") != std::string::npos);
        auto j = nlohmann::json::parse(to_json_text(sample_plan(c)));
        j["header"]["schedule"] = name;
        const std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
        CHECK(message([&] { (void)execution_plan_from_json(text, "r.json"); }).find("column 'header.schedule'") !=
              std::string::npos);
    }
    // Users' own names of the allowed characters read in both formats.
    execution_plan p = sample_plan(c);
    p.header.schedule = "my-sched_2.0+w";
    CHECK(execution_plan_from_binary(to_binary(p), "r.plan") == p);
    CHECK(execution_plan_from_json(to_json_text(p), "r.json") == p);
}

TEST_CASE("serialize: JSON plan errors give line, column and field path; deep nesting and 1e400 are located") {
    const auto sc = test::random_scenario(2, 3, 4);
    const std::string js = to_json_text(share_of(sample_plan(test::all_schedules(sc)[1]), 0));
    // The iteration number replaced by a string: the error points at that value.
    const std::size_t at = js.find("\"iteration\": ") + 13;
    std::string bad = js;
    bad.replace(at, bad.find_first_of(",\n", at) - at, "\"x\"");
    const auto pos = position_at(bad, at);
    CHECK(message([&] { (void)rank_plan_from_json(bad, "r.json"); }) ==
          "r.json:" + std::to_string(pos.line) + ":" + std::to_string(pos.column) +
              ": column 'header.iteration': expected an integer >= 0");
    CHECK(message([&] { (void)rank_plan_from_json(std::string(100000, '['), "d.json"); }) ==
          "d.json:1:65: JSON nested deeper than 64 levels");
    CHECK(message([&] { (void)rank_plan_from_json("{\"format\": \"pipeplan-plan\",\n \"version\": 1e400}", "o.json"); })
              .find("o.json:2:") == 0);
}

namespace {

/// The byte offset of 1-based (line, column) in `text`.
std::size_t offset_of(std::string_view text, std::size_t line, std::size_t column) {
    std::size_t off = 0;
    for (std::size_t l = 1; l < line; ++l) off = text.find('\n', off) + 1;
    return off + column - 1;
}

/// Reads `text` as a rank file and checks the error: "r.json:L:C: column 'field': reason", with
/// L:C the start of `token` (the offending value as written). Returns the reason.
std::string located_error(const std::string& text, const std::string& field, const std::string& token) {
    const std::string m = message([&] { (void)rank_plan_from_json(text, "r.json"); });
    static const std::regex form(R"(^r\.json:(\d+):(\d+): column '([^']*)': (.*)$)");
    std::smatch g;
    REQUIRE_MESSAGE(std::regex_match(m, g, form), m);
    CHECK(g[3].str() == field);
    const std::size_t off = offset_of(text, std::stoul(g[1].str()), std::stoul(g[2].str()));
    REQUIRE(off < text.size());
    CHECK_MESSAGE(std::string_view(text).substr(off).starts_with(token), m, " points at: ", text.substr(off, 40));
    return g[4].str();
}

}  // namespace

TEST_CASE("serialize: every JSON plan error names file, line, column and field (unknown names included)") {
    const auto sc = test::random_scenario(2, 3, 4);
    const nlohmann::json base = nlohmann::json::parse(to_json_text(share_of(sample_plan(test::all_schedules(sc)[1]), 0)));
    const auto text_of = [](const nlohmann::json& j) { return j.dump(1); };
    auto j = base;
    j["header"]["placement"] = "two words";
    CHECK(located_error(text_of(j), "header.placement", "\"two words\"").starts_with("expected at most 64 characters"));
    j = base;
    j["header"]["send_rule"] = "eager";
    CHECK(located_error(text_of(j), "header.send_rule", "\"eager\"") == "unknown send rule 'eager' (buffered|blocking|grouped)");
    j = base;
    j["header"]["stage_devices"] = {0, 0, 1};
    CHECK(located_error(text_of(j), "header.stage_devices", "[").starts_with("stage_devices has 3 entries, devices x chunks is 2"));
    j = base;
    j["header"]["version"] = 1;
    CHECK(located_error(text_of(j), "header.version", "1").starts_with("plan format version 1 is older than this library's (" + std::to_string(plan_format_version) + ")"));
    j = base;
    j["header"]["dtype"] = "fp7";
    CHECK(located_error(text_of(j), "header.dtype", "\"fp7\"") == "unknown dtype 'fp7' (" + dtype_choices() + ")");
    j = base;
    j["programs"][0]["instructions"][3]["kind"] = "fly";
    CHECK(located_error(text_of(j), "programs[0].instructions[3].kind", "\"fly\"").starts_with("unknown instruction kind 'fly'"));
    j = base;
    j["programs"][0]["instructions"][2]["dtype"] = "int4";
    CHECK(located_error(text_of(j), "programs[0].instructions[2].dtype", "\"int4\"").starts_with("unknown dtype 'int4'"));
    j = base;
    j["programs"][0]["buffers"][1]["role"] = "scratch";
    CHECK(located_error(text_of(j), "programs[0].buffers[1].role", "\"scratch\"") ==
          "unknown buffer role 'scratch' (activation_in|activation_out|stash|grad_in|grad_out|workspace)");
    j = base;
    j["header"]["dp"] = 0;
    CHECK(located_error(text_of(j), "header.dp", "0") == "must be >= 1");
    j = base;
    j["header"]["schedule"] = "two words";
    CHECK(located_error(text_of(j), "header.schedule", "\"two words\"").starts_with("expected at most 64 characters"));
    j = base;
    j["header"]["predicted_peak_memory_mb"][0] = "big";
    CHECK(located_error(text_of(j), "header.predicted_peak_memory_mb", "\"big\"") == "expected numbers");
    j = base;
    j["header"]["microbatches"][1]["sample_ids"][1] = -3;
    CHECK(located_error(text_of(j), "header.microbatches[1].sample_ids", "-3") == "expected integers >= 0");
    j = base;
    j["version"] = 99;
    CHECK(located_error(text_of(j), "version", "99").find("newer") != std::string::npos);
    j = base;
    j["format"] = 7;
    CHECK(located_error(text_of(j), "format", "7").starts_with("not a pipeplan plan"));
    j = base;
    j.erase("format");
    CHECK(located_error(text_of(j), "format", "{").starts_with("not a pipeplan plan"));
    CHECK(located_error("[1, 2]", "format", "[1, 2]").starts_with("not a pipeplan plan"));
    j = base;
    j["programs"].push_back(j["programs"][0]);
    CHECK(located_error(text_of(j), "programs", "[") == "a rank file holds one program, this one 2");
    j = base;
    j["header"].erase("chunks");
    CHECK(located_error(text_of(j), "header.chunks", "{") == "missing");
    j = base;
    j["programs"][0]["instructions"][0]["peer"] = 1e10;
    CHECK(located_error(text_of(j), "programs[0].instructions[0].peer", "1").starts_with("expected an integer"));
}

TEST_CASE("serialize: no JSON plan error lacks a line, whatever single value is replaced or removed") {
    // Property: every leaf replaced by values of the wrong type or range, and every object
    // member removed, is either read or refused with an input_error that has a line.
    const auto sc = test::random_scenario(2, 3, 2);
    const nlohmann::json base = nlohmann::json::parse(to_json_text(share_of(sample_plan(test::all_schedules(sc)[0]), 0)));
    const nlohmann::json flat = base.flatten();
    // A wrong type, a negative number and a container: every field kind fails at least one.
    const std::vector<nlohmann::json> bad = {"zz", -1, nlohmann::json::object()};
    std::size_t refused = 0, tried = 0;
    const auto check = [&](const nlohmann::json& j) {
        ++tried;
        try {
            (void)rank_plan_from_json(j.dump(1), "r.json");
        } catch (const input_error& e) {
            ++refused;
            CHECK_MESSAGE(e.line() > 0, e.what());
            CHECK_MESSAGE(e.char_column() > 0, e.what());
        }
    };
    for (const auto& [pointer, value] : flat.items()) {
        const nlohmann::json::json_pointer ptr(pointer);
        for (const auto& b : bad) {
            if (b == value) continue;
            nlohmann::json j = base;
            j[ptr] = b;
            check(j);
        }
        nlohmann::json j = base;
        auto& parent = j[ptr.parent_pointer()];
        if (parent.is_object()) parent.erase(ptr.back());
        else parent.erase(std::stoul(ptr.back()));
        check(j);
    }
    CHECK(tried > 500);
    CHECK(refused > tried / 2);
}

TEST_CASE("plan files: the format is told by the first bytes; both read to the same plan") {
    const auto sc = test::random_scenario(3, 5, 4);
    const execution_plan p = lower(sc, schedule::one_f_one_b{}(sc));
    const std::string bin = to_binary(p), js = to_json_text(p);
    CHECK(sniff_plan_format(bin) == plan_format::binary);
    CHECK(sniff_plan_format(js) == plan_format::json);
    CHECK(sniff_plan_format("") == plan_format::json);
    CHECK(execution_plan_from_bytes(bin) == p);
    CHECK(execution_plan_from_bytes(js) == p);
    const rank_plan r1 = share_of(p, 1);
    CHECK(rank_plan_from_bytes(to_binary(r1)) == r1);
    CHECK(rank_plan_from_bytes(to_json_text(r1)) == r1);
    CHECK_THROWS_AS((void)execution_plan_from_bytes(bin.substr(0, 12), "cut.plan"), pipeplan::error);
}

TEST_CASE("plan_result_json: the summary's keys and the chosen candidate's figures") {
    planner_options o;
    o.config.stages = 2;
    o.config.layers_per_stage = 4;
    o.config.device_memory_mb = 40000;
    o.hidden_size = 1024;
    o.order_search_evaluations = 4;
    std::vector<batching::sample> batch;
    for (int i = 0; i < 24; ++i) batch.push_back({64 + 37 * (i % 7), 8 + i % 5});
    const plan_result r = plan_iteration(make_analytic_model("gpt-6.7b"), batch, o);
    const nlohmann::json j = plan_result_json(r);
    for (const char* k : {"schedule", "microbatches", "makespan_ms", "lower_bound_ms", "peak_memory_mb", "arena_mb",
                          "live_peak_mb", "plan_bytes", "planning_ms", "candidates"})
        CHECK(j.contains(k));
    CHECK(j["schedule"] == r.plan.header.schedule);
    CHECK(j["candidates"].size() == r.candidates.size());
    CHECK(j["candidates"][r.chosen]["makespan_ms"].get<double>() == r.makespan_ms);
    CHECK(j["plan_bytes"][0].get<std::size_t>() == to_binary(share_of(r.plan, 0)).size());
}
