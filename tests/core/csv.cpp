#include <doctest/doctest.h>

#include <string>

#include "pipeplan/core/csv.hpp"

using pipeplan::csv_table;
using pipeplan::input_error;

namespace {
std::string message_of(const std::string& text) {
    try {
        auto t = csv_table::parse(text, "t.csv");
        for (std::size_t r = 0; r < t.rows(); ++r) (void)t.non_negative(r, t.column("x"));
    } catch (const input_error& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("csv: quoting, CRLF, blank lines and line numbers") {
    auto t = csv_table::parse("a,b,x\r\n\"p, q\",\"say \"\"hi\"\"\",1.5\r\n\r\nz,w,2\n", "mem");
    REQUIRE(t.rows() == 2);
    CHECK(t.cell(0, 0) == "p, q");
    CHECK(t.cell(0, 1) == "say \"hi\"");
    CHECK(t.number(0, 2) == doctest::Approx(1.5));
    CHECK(t.line_of(1) == 4);
    CHECK(t.integer(1, 2) == 2);
    CHECK(t.find_column("nope") == csv_table::npos);
}

TEST_CASE("csv: errors name file, line and column") {
    CHECK(message_of("a,x\n1,2\n3,abc\n") == "t.csv:3: column 'x': expected a number, found 'abc'");
    CHECK(message_of("a,x\n1,-2\n") == "t.csv:2: column 'x': expected a non-negative number, found '-2'");
    CHECK(message_of("a,y\n1,2\n").find("column 'x': missing required column (header is: a,y)") !=
          std::string::npos);
    CHECK(message_of("a,x\n1,2,3\n") == "t.csv:2: expected 2 fields (as in the header), found 3");
    CHECK(message_of("a,x\n\"1,2\n") == "t.csv:2: unterminated quoted field");
    CHECK(message_of("") == "t.csv: file is empty (no header line)");
    CHECK(message_of("a,a\n") == "t.csv:1: column 'a': duplicate column name in header");
    CHECK(message_of("a,x\n1,nan\n").find("expected a number") != std::string::npos);
    try {
        (void)csv_table::read("/nonexistent/file.csv");
        FAIL("expected an exception");
    } catch (const input_error& e) {
        CHECK(e.file() == "/nonexistent/file.csv");
        CHECK(std::string(e.what()).find("cannot open") != std::string::npos);
    }
    auto t = csv_table::parse("n\n7\n", "i.csv");
    CHECK_THROWS_WITH((void)t.integer(0, 0, 0, 5), "i.csv:2: column 'n': value 7 is outside [0, 5]");
}
