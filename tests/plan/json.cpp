// plan/json.hpp: every JSON plan error names file, line, column and field path.
#include <doctest/doctest.h>

#include <cstddef>
#include <regex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "core/error_of.hpp"
#include "pipeplan/core/json_document.hpp"
#include "pipeplan/plan/json.hpp"
#include "pipeplan/plan/lower.hpp"

using namespace pipeplan;
using namespace pipeplan::plan;

TEST_CASE("serialize: JSON plan errors give line, column and field path; deep nesting and 1e400 are located") {
    const auto sc = test::random_scenario(2, 3, 4);
    const std::string js = to_json_text(share_of(test::sample_plan(test::all_schedules(sc)[1]), 0));
    // The iteration number replaced by a string: the error points at that value.
    const std::size_t at = js.find("\"iteration\": ") + 13;
    std::string bad = js;
    bad.replace(at, bad.find_first_of(",\n", at) - at, "\"x\"");
    const auto pos = position_at(bad, at);
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_json(bad, "r.json"); }) ==
          "r.json:" + std::to_string(pos.line) + ":" + std::to_string(pos.column) +
              ": column 'header.iteration': expected an integer >= 0");
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_json(std::string(100000, '['), "d.json"); }) ==
          "d.json:1:65: JSON nested deeper than 64 levels");
    CHECK(test::error_of<input_error>([&] { (void)rank_plan_from_json("{\"format\": \"pipeplan-plan\",\n \"version\": 1e400}", "o.json"); })
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
    const std::string m = test::error_of<input_error>([&] { (void)rank_plan_from_json(text, "r.json"); });
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
    const nlohmann::json base = nlohmann::json::parse(to_json_text(share_of(test::sample_plan(test::all_schedules(sc)[1]), 0)));
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
    const nlohmann::json base = nlohmann::json::parse(to_json_text(share_of(test::sample_plan(test::all_schedules(sc)[0]), 0)));
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
