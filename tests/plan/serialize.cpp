// plan/serialize.hpp and both readers: exact round trips, byte-identical files, and the errors
// of truncated, corrupted, newer and foreign files and of names a format cannot carry.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "core/error_of.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/schedule/registry.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

TEST_CASE("serialize: binary and JSON round trips are exact, for whole plans and rank files") {
    const auto sc = test::random_scenario(3, 4, 2);
    for (const auto& c : test::all_schedules(sc)) {
        CAPTURE(c.name);
        const execution_plan p = test::sample_plan(c);
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
        CHECK(to_binary(test::sample_plan(a[k])) == to_binary(test::sample_plan(b[k])));
        CHECK(to_json_text(test::sample_plan(a[k])) == to_json_text(test::sample_plan(b[k])));
    }
}

TEST_CASE("serialize: truncated, corrupted, newer and foreign files give clear errors") {
    const auto sc = test::random_scenario(2, 3, 4);
    const auto c = test::all_schedules(sc)[1];
    const std::string bin = to_binary(share_of(test::sample_plan(c), 0));
    // every truncation is refused
    for (std::size_t n = 0; n < bin.size(); n += 1 + n / 8)
        CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_binary(bin.substr(0, n), "r.plan"); }).find("r.plan") == 0);
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_binary(bin.substr(0, bin.size() - 1), "r.plan"); }).find("truncated") != std::string::npos);
    // every single-byte corruption of the payload is refused by the checksum
    for (std::size_t i = 32; i < bin.size(); i += 7) {
        std::string bad = bin;
        bad[i] = static_cast<char>(bad[i] ^ 0x5A);
        CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_binary(bad, "r.plan"); }).find("checksum") != std::string::npos);
    }
    std::string newer = bin;
    newer[8] = 9;  // format version 9
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_binary(newer, "r.plan"); }).find("newer") != std::string::npos);
    std::string zero = bin;
    zero[8] = 0;  // format version 0
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_binary(zero, "r.plan"); }) ==
          "r.plan: column 'format_version': at byte 8: plan format version 0 does not exist");
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_binary("hello world, not a plan", "x"); }).find("magic") != std::string::npos);
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_binary(bin + "x", "r.plan"); }).find("after the payload") != std::string::npos);
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_binary(to_binary(test::sample_plan(c)), "all.plan"); }).find("one program") != std::string::npos);
    // JSON: bad syntax, wrong field, newer version
    const std::string js = to_json_text(share_of(test::sample_plan(c), 0));
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_json(js.substr(0, js.size() / 2), "r.json"); }).find("invalid JSON") != std::string::npos);
    auto j = nlohmann::json::parse(js);
    j["programs"][0]["instructions"][3]["kind"] = "fly";
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_json(j.dump(), "r.json"); }).find("programs[0].instructions[3].kind") != std::string::npos);
    j = nlohmann::json::parse(js);
    j["version"] = 99;
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_json(j.dump(), "r.json"); }).find("newer") != std::string::npos);
    j = nlohmann::json::parse(js);
    j["header"].erase("devices");
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_json(j.dump(), "r.json"); }).find("header.devices") != std::string::npos);
}

TEST_CASE("serialize: a schedule name either format cannot carry is refused by both readers") {
    // Every plan one format reads can be written in the other: a name that is not UTF-8 could
    // not be written as JSON (nlohmann throws type_error 316 from dump()).
    const auto sc = test::random_scenario(2, 3, 4);
    const auto c = test::all_schedules(sc)[1];
    for (const std::string& name : {std::string("a\x9b"), std::string("x\ny"), std::string(65, 'a'), std::string("sp ace")}) {
        CAPTURE(name);
        execution_plan p = test::sample_plan(c);
        p.header.schedule = name;
        const std::string e = test::error_of<input_error>([&] { (void)execution_plan_from_binary(to_binary(p), "r.plan"); });
        CHECK(e.find("r.plan: column 'header.schedule': at byte ") == 0);
        CHECK(e.find("expected at most 64 characters of [A-Za-z0-9_.+-]") != std::string::npos);
        auto j = nlohmann::json::parse(to_json_text(test::sample_plan(c)));
        j["header"]["schedule"] = name;
        const std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
        CHECK(test::error_of<input_error>([&] { (void)execution_plan_from_json(text, "r.json"); }).find("column 'header.schedule'") !=
              std::string::npos);
    }
    // Users' own names of the allowed characters read in both formats.
    execution_plan p = test::sample_plan(c);
    p.header.schedule = "my-sched_2.0+w";
    CHECK(execution_plan_from_binary(to_binary(p), "r.plan") == p);
    CHECK(execution_plan_from_json(to_json_text(p), "r.json") == p);
}

TEST_CASE("serialize: a name the schedule registry accepts is one both plan formats carry, and no other") {
    // The registry and the plan readers check names with one rule (core/names.hpp); a copy in
    // either that drifted would fail here on some character or length.
    const auto sc = test::random_scenario(2, 3, 4);
    const auto c = test::all_schedules(sc)[1];
    std::vector<std::string> names = {std::string(64, 'x'), std::string(65, 'x'), "a b", "1f1b"};
    for (int ch = 1; ch < 256; ++ch) names.push_back(std::string("s") + static_cast<char>(ch));
    schedule::schedule_registry registry;
    for (const std::string& name : names) {
        CAPTURE(name);
        schedule::schedule_traits row;
        row.name = name;
        row.factory = [](const schedule::named_schedule_options&) -> schedule::any_generator { return schedule::gpipe{}; };
        bool registered = true;
        try {
            (void)registry.add(row);
        } catch (const invalid_argument& e) {
            registered = std::string(e.what()).find("is registered already") != std::string::npos;
        }
        execution_plan p = test::sample_plan(c);
        p.header.schedule = name;
        bool binary = true, json = true;
        try {
            (void)execution_plan_from_binary(to_binary(p));
        } catch (const input_error&) {
            binary = false;
        }
        auto j = nlohmann::json::parse(to_json_text(test::sample_plan(c)));
        j["header"]["schedule"] = name;
        try {
            (void)execution_plan_from_json(j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
        } catch (const input_error&) {
            json = false;
        }
        CHECK(registered == binary);
        CHECK(registered == json);
    }
}
