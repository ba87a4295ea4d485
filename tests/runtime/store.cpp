// Sealed store records and the directory plan store.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
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
    const plan_key key{"job", 3, 1};
    const std::string rec = seal(payload, key);
    CHECK(rec.size() == payload.size() + store_header_bytes + key.str().size());
    CHECK(unseal(rec, "x", key) == payload);
    CHECK(unseal(seal("", key), "x", key).empty());
    CHECK_THROWS_WITH_AS((void)unseal(rec.substr(0, rec.size() - 1), "where", key), doctest::Contains("torn"), pipeplan::input_error);
    for (std::size_t i = 8; i < rec.size(); ++i) {
        if (i >= rec.size() - payload.size() - store_mac_bytes && i < rec.size() - payload.size()) continue;  // unsigned: no MAC
        std::string bad = rec;
        bad[i] = static_cast<char>(bad[i] ^ 0x10);
        CHECK_THROWS_AS((void)unseal(bad, "where", key), pipeplan::input_error);
    }
    CHECK_THROWS_WITH_AS((void)unseal("hello world, not a record", "f.plan", key), doctest::Contains("f.plan"), pipeplan::input_error);
}

TEST_CASE("sealed records: a record read under another key is refused, naming both keys") {
    const std::string rec = seal("plan", {"job", 0, 1});
    for (const plan_key& other : {plan_key{"job", 0, 0}, plan_key{"job", 5, 1}, plan_key{"other", 0, 1}})
        CHECK_THROWS_WITH_AS((void)unseal(rec, "where", other), doctest::Contains(("stored under key 'job/0/1', not '" + other.str()).c_str()),
                             pipeplan::input_error);
}

TEST_CASE("signed records: HMAC-SHA-256 with the shared key; unsigned, foreign-key and altered records are refused") {
    const store_secret k{"0123456789abcdef-shared"}, other{"another key of 16+ bytes"};
    const plan_key key{"job", 2, 0};
    const std::string rec = seal("the plan", key, k);
    CHECK(unseal(rec, "r", key, k) == "the plan");
    CHECK(unseal(rec, "r", key) == "the plan");  // a reader without the key checks the rest
    CHECK_THROWS_WITH_AS((void)unseal(seal("the plan", key), "r", key, k), doctest::Contains("not signed"), pipeplan::input_error);
    CHECK_THROWS_WITH_AS((void)unseal(seal("planted", key, other), "r", key, k), doctest::Contains("bad signature"),
                         pipeplan::input_error);
    // Whoever can write the store but lacks the key: changes the payload and fixes the checksum.
    std::string forged = rec;
    forged.replace(forged.size() - 8, 8, "evil pln");
    const std::uint64_t sum = pipeplan::plan::fnv1a64(std::string_view(forged).substr(forged.size() - 8));
    for (int i = 0; i < 8; ++i) forged[16 + std::size_t(i)] = static_cast<char>((sum >> (8 * i)) & 0xff);
    CHECK_THROWS_WITH_AS((void)unseal(forged, "r", key, k), doctest::Contains("bad signature"), pipeplan::input_error);
    CHECK(unseal(forged, "r", key) == "evil pln");  // which is why a reader of an open store sets the key too
}

TEST_CASE("store keys: a key file shorter than 16 bytes is refused without printing it") {
    temp_dir d;
    fs::create_directories(d.path);
    const auto path = (d.path / "key").string();
    std::ofstream(path) << "short\n";
    CHECK_THROWS_WITH_AS((void)store_secret_from_file(path), doctest::Contains("at least 16"), pipeplan::invalid_argument);
    try {
        (void)store_secret_from_file(path);
    } catch (const pipeplan::error& e) {
        CHECK(std::string(e.what()).find("short") == std::string::npos);
    }
    std::ofstream(path) << "a-long-enough-shared-secret\n";
    CHECK(store_secret_from_file(path).key == "a-long-enough-shared-secret");
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

TEST_CASE("directory store: a FIFO, a symlink or a directory at a key is an error at once, never read or followed") {
    temp_dir d;
    directory_store s(d.path);
    const auto t0 = std::chrono::steady_clock::now();
    const plan_key fifo{"job", 0, 0}, link{"job", 0, 1}, dir{"job", 0, 2};
    fs::create_directories(s.path_of(fifo).parent_path());
    REQUIRE(::mkfifo(s.path_of(fifo).c_str(), 0600) == 0);
    CHECK_THROWS_WITH_AS((void)s.get(fifo, 500ms), doctest::Contains("is a FIFO, expected a regular file"), pipeplan::input_error);
    fs::create_symlink("/dev/zero", s.path_of(link));
    CHECK_THROWS_WITH_AS((void)s.get(link, 500ms), doctest::Contains("is a symbolic link"), pipeplan::input_error);
    fs::create_directories(s.path_of(dir));
    CHECK_THROWS_WITH_AS((void)s.get(dir, 500ms), doctest::Contains("is a directory"), pipeplan::input_error);
    CHECK(std::chrono::steady_clock::now() - t0 < 400ms);  // no wait, no blocking open
}

TEST_CASE("directory store: a planted symlink at a key is not written through") {
    temp_dir d;
    directory_store s(d.path);
    const plan_key key{"job", 1, 0};
    fs::create_directories(d.path);
    const fs::path victim = d.path / "victim.txt";
    std::ofstream(victim) << "precious";
    fs::create_directories(s.path_of(key).parent_path());
    fs::create_symlink(victim, s.path_of(key));
    CHECK_THROWS_WITH_AS(s.put(key, "plan"), doctest::Contains("symbolic link"), pipeplan::error);
    std::ifstream in(victim);
    std::string text;
    in >> text;
    CHECK(text == "precious");
}

TEST_CASE("directory store: copied records are refused; signed stores refuse records written without the key") {
    temp_dir d;
    directory_store s(d.path);
    s.put({"job", 0, 1}, "rank one");
    s.put({"job", 0, 0}, "rank zero");
    fs::create_directories(s.path_of({"job", 5, 0}).parent_path());
    fs::copy_file(s.path_of({"job", 0, 1}), s.path_of({"job", 0, 0}), fs::copy_options::overwrite_existing);
    fs::copy_file(s.path_of({"job", 0, 1}), s.path_of({"job", 5, 1}));
    CHECK_THROWS_WITH_AS((void)s.get({"job", 0, 0}, 100ms), doctest::Contains("stored under key 'job/0/1'"), pipeplan::input_error);
    CHECK_THROWS_WITH_AS((void)s.get({"job", 5, 1}, 100ms), doctest::Contains("stored under key 'job/0/1'"), pipeplan::input_error);
    directory_store signer(d.path, store_secret{"shared-secret-of-the-job"});
    CHECK_THROWS_WITH_AS((void)signer.get({"job", 0, 1}, 100ms), doctest::Contains("not signed"), pipeplan::input_error);
    signer.put({"job", 0, 1}, "signed");
    CHECK(signer.get({"job", 0, 1}, 100ms) == "signed");
}

TEST_CASE("directory store: one writer per job; the lock is released with its object") {
    temp_dir d;
    directory_store a(d.path), b(d.path);
    {
        const writer_lock held = a.lock_writer("job");
        CHECK_THROWS_WITH_AS((void)b.lock_writer("job"), doctest::Contains("job 'job' is being written by another planner"),
                             pipeplan::error);
        const writer_lock other = b.lock_writer("other-job");  // other jobs are free
    }
    const writer_lock now = b.lock_writer("job");
}

TEST_CASE("fetch_rank_plan: the plan's iteration and rank must be the key's") {
    temp_dir d;
    directory_store s(d.path);
    pipeplan::plan::rank_plan rp;
    rp.header.iteration = 4;
    rp.program.rank = 1;
    rp.program.instructions.resize(1);  // the reader wants 36 bytes per program
    const std::string bytes = pipeplan::plan::to_binary(rp);
    s.put({"job", 4, 1}, bytes);
    CHECK(fetch_rank_plan(s, {"job", 4, 1}, 100ms) == rp);
    s.put({"job", 5, 1}, bytes);  // a writer that mislabels: the envelope's key is right, the plan is not
    CHECK_THROWS_WITH_AS((void)fetch_rank_plan(s, {"job", 5, 1}, 100ms), doctest::Contains("iteration 4, the key for 5"),
                         pipeplan::input_error);
    s.put({"job", 4, 0}, bytes);
    CHECK_THROWS_WITH_AS((void)fetch_rank_plan(s, {"job", 4, 0}, 100ms), doctest::Contains("the plan is rank 1's, the key rank 0's"), pipeplan::input_error);
}
