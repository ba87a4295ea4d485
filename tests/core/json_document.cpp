// core/json_document.hpp: one linear SAX pass that builds the value and knows where each value
// starts.
#include <doctest/doctest.h>

#include <string>

#include "pipeplan/core/json_document.hpp"

using pipeplan::input_error;
using pipeplan::json_document;
using pipeplan::position_at;

namespace {

/// The message of the input_error `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const input_error& e) {
        return e.what();
    }
    return "";
}

/// The line and column of the first `token` in `text`, as "L:C".
std::string place_of(const std::string& text, const std::string& token) {
    const auto p = position_at(text, text.find(token));
    return std::to_string(p.line) + ":" + std::to_string(p.column);
}

}  // namespace

TEST_CASE("json_document: the value equals nlohmann's parse; every value knows where it starts") {
    const std::string text = "{\"a\": [1, 2.5, \"x\", true, null, {\"b\": [[], {}]}],\n"
                             " \"c\" :\t-7 ,\r\n  \"d\": {\"e\": \"\\\"q\\\"\", \"f\": [ 1e3 ,\n 4 ]}}";
    const json_document doc(text, "t.json");
    CHECK(doc.root() == nlohmann::json::parse(text));
    const auto at = [&](const nlohmann::json& v) {
        const auto p = doc.where(v);
        return std::to_string(p.line) + ":" + std::to_string(p.column);
    };
    const auto& j = doc.root();
    CHECK(at(j) == "1:1");
    CHECK(at(j["a"]) == place_of(text, "[1,"));
    CHECK(at(j["a"][1]) == place_of(text, "2.5"));
    CHECK(at(j["a"][2]) == place_of(text, "\"x\""));
    CHECK(at(j["a"][3]) == place_of(text, "true"));
    CHECK(at(j["a"][4]) == place_of(text, "null"));
    CHECK(at(j["a"][5]["b"]) == place_of(text, "[[]"));
    CHECK(at(j["a"][5]["b"][1]) == place_of(text, "{}]"));
    CHECK(at(j["c"]) == "2:8");
    CHECK(at(j["d"]["e"]) == place_of(text, "\"\\\"q"));
    CHECK(at(j["d"]["f"][0]) == place_of(text, "1e3"));
    CHECK(at(j["d"]["f"][1]) == "4:2");
    // A value that is not part of the document has no place.
    const nlohmann::json other = 3;
    CHECK(doc.where(other).line == 0);
    // fail(): file, line, column, field path, reason.
    CHECK(error_of([&] { doc.fail(j["d"]["f"][1], "d.f[1]", "too small"); }) == "t.json:4:2: column 'd.f[1]': too small");
}

TEST_CASE("json_document: a key given twice in one object is an error (fuzz finding)") {
    // Found by fuzz/fuzz_plan_json: the second value replaced the first while the locations of
    // the first's elements were still noted (a use after free under ASan).
    CHECK(error_of([] { json_document d("{\"k\": [[1], 2],\n \"k\": [3]}", "d.json"); }) ==
          "d.json:2:2: invalid JSON: duplicate key 'k' in an object");
    CHECK(error_of([] { json_document d("[{\"a\": 1, \"b\": {\"a\": 2}, \"a\": {}}]", "e.json"); }) ==
          "e.json:1:26: invalid JSON: duplicate key 'a' in an object");
    // The same key in different objects is fine.
    CHECK(json_document("[{\"a\": 1}, {\"a\": [2]}]", "ok.json").root()[1]["a"][0] == 2);
}

TEST_CASE("json_document: invalid JSON, overflowing numbers and deep nesting are located errors") {
    CHECK(error_of([] { json_document d("{\"a\": [1, 2,\n  ]}", "s.json"); }).rfind("s.json:2:3: invalid JSON: parse error", 0) ==
          0);
    CHECK(error_of([] { json_document d("{\"a\":\n  [1e400]}", "s.json"); }).rfind("s.json:2:", 0) == 0);
    CHECK(error_of([] { json_document d("{\"a\":\n  [1e400]}", "s.json"); }).find("number overflow parsing '1e400'") !=
          std::string::npos);
    CHECK(error_of([] { json_document d("", "e.json"); }).rfind("e.json:1:1: invalid JSON", 0) == 0);
    // 64 levels are fine, the 65th bracket is the error (at its place), whatever follows it.
    const std::string ok = std::string(64, '[') + std::string(64, ']');
    CHECK(json_document(ok, "ok.json").root().is_array());
    const std::string deep = "\n" + std::string(1000000, '[');
    CHECK(error_of([&] { json_document d(deep, "deep.json"); }) == "deep.json:2:65: JSON nested deeper than 64 levels");
    CHECK(error_of([] { json_document d("[[1]]", "cap.json", 1); }) == "cap.json:1:2: JSON nested deeper than 1 levels");
}
