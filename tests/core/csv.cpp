#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "pipeplan/core/csv.hpp"
#include "core/error_of.hpp"
#include "pipeplan/core/error.hpp"

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

TEST_CASE("csv: BOM, whitespace-only lines, NUL bytes, long headers") {
    using pipeplan::csv_table;
    auto t = csv_table::parse("\xEF\xBB\xBF" "a,b\n1,2\n   \n\t \r\n3,4\n", "t.csv");
    REQUIRE(t.header().size() == 2);
    CHECK(t.header()[0] == "a");
    REQUIRE(t.rows() == 2);
    CHECK(t.line_of(1) == 5);
    CHECK(t.integer(1, 1) == 4);

    const auto nul = pipeplan::test::error_of([] {
        const auto u = csv_table::parse(std::string("a\n1\0002\n", 6), "n.csv");
        (void)u.integer(0, 0);
    });
    CHECK(nul == "n.csv:2: column 'a': expected an integer, found '1\\x002'");
    const auto wide = pipeplan::test::error_of([] { (void)csv_table::parse(std::string(1 << 20, 'h') + "\n1\n", "w.csv").column("a"); });
    CHECK(wide.find("w.csv:1: column 'a': missing required column") == 0);
    CHECK(wide.find("(1048576 bytes)") != std::string::npos);
    CHECK(wide.size() < 400);
}

TEST_CASE("csv: cells round-trip through the compact storage (seeded random tables)") {
    using pipeplan::csv_table;
    std::mt19937 rng(13);
    for (int round = 0; round < 50; ++round) {
        const std::size_t cols = 1 + rng() % 6, rows = rng() % 40;
        std::vector<std::string> cells;
        std::string text;
        for (std::size_t c = 0; c < cols; ++c) text += (c ? "," : "") + ("c" + std::to_string(c));
        text += "\n";
        for (std::size_t r = 0; r < rows; ++r) {
            for (std::size_t c = 0; c < cols; ++c) {
                std::string v;
                for (std::size_t k = rng() % 12; k > 0; --k) v += static_cast<char>('a' + rng() % 26);
                if (cols == 1 && v.empty()) v = "e";  // a lone empty cell would be a blank line
                const bool quote = rng() % 4 == 0;
                text += (c ? "," : "") + (quote ? "\"" + v + "\"\"x\"" : v);
                cells.push_back(quote ? v + "\"x" : v);
            }
            text += "\n";
        }
        const auto t = csv_table::parse(text, "r.csv");
        REQUIRE(t.rows() == rows);
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < cols; ++c) CHECK(t.cell(r, c) == cells[r * cols + c]);
    }
}
