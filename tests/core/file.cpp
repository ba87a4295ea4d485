// core/file.hpp (output files, input files), core/error.hpp (printable messages) and the CSV
// reader's hardening: BOM, whitespace-only lines, NUL bytes, compact storage.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/core/csv.hpp"
#include "pipeplan/core/error.hpp"
#include "pipeplan/core/file.hpp"

namespace fs = std::filesystem;

namespace {

struct temp_dir {
    fs::path path = fs::temp_directory_path() / ("pipeplan_core_file_" + std::to_string(::getpid()));
    temp_dir() { fs::create_directories(path); }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string what_of(auto&& f) {
    try {
        f();
    } catch (const pipeplan::error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("file: atomic replace keeps permissions, follows symlinks, refuses special files") {
    temp_dir d;
    const fs::path f = d.path / "out.txt";
    pipeplan::write_file_atomically(f, "one");
    CHECK(slurp(f) == "one");
    const ::mode_t mask = ::umask(0);
    ::umask(mask);
    struct stat st {};
    REQUIRE(::stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == (0666 & ~mask));
    ::chmod(f.c_str(), 0640);
    pipeplan::write_file_atomically(f, "two");
    REQUIRE(::stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
    CHECK(slurp(f) == "two");

    fs::create_symlink("out.txt", d.path / "link.txt");
    pipeplan::write_output_file(d.path / "link.txt", "three");
    CHECK(fs::is_symlink(d.path / "link.txt"));
    CHECK(slurp(f) == "three");

    CHECK(what_of([&] { pipeplan::write_file_atomically("/dev/null", "x"); }).find("not a regular file") !=
          std::string::npos);
    CHECK(what_of([&] { pipeplan::write_output_file(d.path, "x"); }).find("is a directory") != std::string::npos);
    CHECK(what_of([&] { pipeplan::write_output_file("/dev/full", "x"); }).find("No space left") != std::string::npos);
    CHECK_NOTHROW(pipeplan::write_output_file("/dev/null", "x"));
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(d.path)) ++entries;
    CHECK(entries == 2);  // out.txt and link.txt: no temporary file left
}

TEST_CASE("file: input files name what is wrong") {
    temp_dir d;
    auto e = what_of([&] { (void)pipeplan::read_text_file(d.path); });
    CHECK(e.find("is a directory") != std::string::npos);
    e = what_of([&] { (void)pipeplan::read_text_file(d.path / "missing.csv"); });
    CHECK(e.find("missing.csv: cannot open file: No such file or directory") != std::string::npos);
    std::ofstream(d.path / "x.csv", std::ios::binary) << std::string("a\0b", 3);
    CHECK(pipeplan::read_text_file(d.path / "x.csv") == std::string("a\0b", 3));
}

TEST_CASE("error: messages stay printable and bounded") {
    CHECK(pipeplan::printable(std::string("a\0b\x1f", 4)) == "a\\x00b\\x1f");
    CHECK(pipeplan::printable(std::string(100, 'x'), 10) == std::string(10, 'x') + "... (100 bytes)");
    const pipeplan::error e(std::string("line one\nhas \0 NUL", 18));
    CHECK(std::string(e.what()) == "line one\nhas \\x00 NUL");
    const pipeplan::error big(std::string(10000, 'y'));
    CHECK(std::string(big.what()).size() < 4200);
}

TEST_CASE("csv: BOM, whitespace-only lines, NUL bytes, long headers") {
    using pipeplan::csv_table;
    auto t = csv_table::parse("\xEF\xBB\xBF" "a,b\n1,2\n   \n\t \r\n3,4\n", "t.csv");
    REQUIRE(t.header().size() == 2);
    CHECK(t.header()[0] == "a");
    REQUIRE(t.rows() == 2);
    CHECK(t.line_of(1) == 5);
    CHECK(t.integer(1, 1) == 4);

    const auto nul = what_of([] {
        const auto u = csv_table::parse(std::string("a\n1\0002\n", 6), "n.csv");
        (void)u.integer(0, 0);
    });
    CHECK(nul == "n.csv:2: column 'a': expected an integer, found '1\\x002'");
    const auto wide = what_of([] { (void)csv_table::parse(std::string(1 << 20, 'h') + "\n1\n", "w.csv").column("a"); });
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
