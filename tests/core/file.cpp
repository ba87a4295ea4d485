// core/file.hpp: atomic output files (permissions, symlinks, special files) and input files
// whose errors name what is wrong.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error_of.hpp"
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
    pipeplan::write_file_atomically(f, {"a", "", "bc", std::string(70000, 'd')});  // pieces, in order
    CHECK(slurp(f) == "abc" + std::string(70000, 'd'));
    REQUIRE(::stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
    pipeplan::write_file_atomically(f, "two");

    fs::create_symlink("out.txt", d.path / "link.txt");
    pipeplan::write_output_file(d.path / "link.txt", "three");
    CHECK(fs::is_symlink(d.path / "link.txt"));
    CHECK(slurp(f) == "three");

    CHECK(pipeplan::test::error_of([&] { pipeplan::write_file_atomically("/dev/null", "x"); }).find("not a regular file") !=
          std::string::npos);
    CHECK(pipeplan::test::error_of([&] { pipeplan::write_output_file(d.path, "x"); }).find("is a directory") != std::string::npos);
    CHECK(pipeplan::test::error_of([&] { pipeplan::write_output_file("/dev/full", "x"); }).find("No space left") != std::string::npos);
    CHECK_NOTHROW(pipeplan::write_output_file("/dev/null", "x"));
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(d.path)) ++entries;
    CHECK(entries == 2);  // out.txt and link.txt: no temporary file left
}

TEST_CASE("file: input files name what is wrong") {
    temp_dir d;
    auto e = pipeplan::test::error_of([&] { (void)pipeplan::read_text_file(d.path); });
    CHECK(e.find("is a directory") != std::string::npos);
    e = pipeplan::test::error_of([&] { (void)pipeplan::read_text_file(d.path / "missing.csv"); });
    CHECK(e.find("missing.csv: cannot open file: No such file or directory") != std::string::npos);
    std::ofstream(d.path / "x.csv", std::ios::binary) << std::string("a\0b", 3);
    CHECK(pipeplan::read_text_file(d.path / "x.csv") == std::string("a\0b", 3));
}
