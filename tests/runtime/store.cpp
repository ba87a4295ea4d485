// Sealed store records and the directory plan store.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "pipeplan/runtime/directory_store.hpp"

using namespace pipeplan::runtime;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
struct temp_dir {
    fs::path path;
    temp_dir() {
        path = fs::temp_directory_path() / ("pipeplan-store-" + std::to_string(::getpid()) + "-" +
                                            std::to_string(reinterpret_cast<std::uintptr_t>(this)));
        fs::remove_all(path);
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};
}  // namespace

TEST_CASE("sealed records: round trip; truncation, corruption and foreign bytes are rejected") {
    const std::string payload("plan \0 bytes", 12);
    const std::string rec = seal(payload);
    CHECK(rec.size() == payload.size() + store_header_bytes);
    CHECK(unseal(rec, "x") == payload);
    CHECK(unseal(seal(""), "x").empty());
    CHECK_THROWS_WITH_AS((void)unseal(rec.substr(0, rec.size() - 1), "where"), doctest::Contains("torn"), pipeplan::input_error);
    for (std::size_t i = store_header_bytes; i < rec.size(); ++i) {
        std::string bad = rec;
        bad[i] = static_cast<char>(bad[i] ^ 0x10);
        CHECK_THROWS_AS((void)unseal(bad, "where"), pipeplan::input_error);
    }
    CHECK_THROWS_WITH_AS((void)unseal("hello world, not a record", "f.plan"), doctest::Contains("f.plan"), pipeplan::input_error);
}

TEST_CASE("directory store: put/get per job, iteration and rank; bad job names; timeout names the key") {
    temp_dir d;
    directory_store s(d.path);
    s.put({"job1", 3, 0}, "zero");
    s.put({"job1", 3, 1}, "one");
    s.put({"job2", 3, 0}, "other job");
    CHECK(s.get({"job1", 3, 0}, 0ms) == "zero");
    CHECK(s.get({"job1", 3, 1}, 0ms) == "one");
    CHECK(s.get({"job2", 3, 0}, 0ms) == "other job");
    s.put({"job1", 3, 1}, "replaced");
    CHECK(s.get({"job1", 3, 1}, 0ms) == "replaced");
    CHECK_THROWS_WITH_AS((void)s.get({"job1", 4, 0}, 30ms), doctest::Contains("job1/4/0"), timeout_error);
    CHECK_THROWS_AS(s.put({"../evil", 0, 0}, "x"), pipeplan::invalid_argument);
    CHECK_THROWS_AS(s.put({"", 0, 0}, "x"), pipeplan::invalid_argument);
    s.remove({"job1", 3, 0});
    CHECK_THROWS_AS((void)s.get({"job1", 3, 0}, 0ms), timeout_error);
}

TEST_CASE("directory store: a corrupted plan file is rejected, naming the file") {
    temp_dir d;
    directory_store s(d.path);
    s.put({"j", 0, 2}, "payload payload");
    const auto path = s.path_of({"j", 0, 2});
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(30);
        f.put('X');
    }
    CHECK_THROWS_WITH_AS((void)s.get({"j", 0, 2}, 0ms), doctest::Contains(path.string().c_str()), pipeplan::input_error);
}

TEST_CASE("directory store: many ranks fetch concurrently while the planner writes; a crashed write is never read") {
    temp_dir d;
    directory_store s(d.path);
    // A planner that crashed mid-write leaves only its temporary file: readers keep waiting.
    fs::create_directories(s.path_of({"j", 0, 0}).parent_path());
    { std::ofstream(s.path_of({"j", 0, 0}).string() + ".tmp.999999") << "PPSTORE1 half"; }
    CHECK_THROWS_AS((void)s.get({"j", 0, 0}, 20ms), timeout_error);

    constexpr std::uint32_t ranks = 8;
    std::atomic<int> ok{0};
    std::vector<std::thread> readers;
    for (std::uint32_t r = 0; r < ranks; ++r)
        readers.emplace_back([&, r] {
            for (std::uint64_t it = 1; it <= 5; ++it)
                if (s.get({"j", it, r}, 10s) == std::string(1000 + r, char('a' + it))) ++ok;
        });
    for (std::uint64_t it = 1; it <= 5; ++it)
        for (std::uint32_t r = 0; r < ranks; ++r) s.put({"j", it, r}, std::string(1000 + r, char('a' + it)));
    for (auto& t : readers) t.join();
    CHECK(ok == int(ranks) * 5);
}
