// The Redis plan store against a real redis-server on a free loopback port: concurrent
// fetches, a planner dying mid-write, a server restart, a server that is down. Skipped, with a
// message, where redis-server is not installed; without hiredis the store must say it is
// unavailable.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "pipeplan/runtime/redis_store.hpp"
#include "pipeplan/runtime/store_spec.hpp"

extern char** environ;

using namespace pipeplan::runtime;
using namespace std::chrono_literals;

namespace {

const char* redis_binary() {
    for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"})
        if (::access(p, X_OK) == 0) return p;
    return nullptr;
}

/// A loopback port nobody listens on right now.
std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

int connect_to(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    ::close(fd);
    return -1;
}

/// A redis-server child process (no persistence) on `port`; stopped by the destructor.
struct redis_server {
    pid_t pid = -1;
    std::uint16_t port;
    std::vector<std::string> extra;  ///< more redis-server arguments (e.g. --requirepass)
    explicit redis_server(std::uint16_t p, std::vector<std::string> more = {}) : port(p), extra(std::move(more)) { start(); }
    ~redis_server() { stop(); }
    void start() {
        const std::string ps = std::to_string(port);
        std::vector<std::string> args{redis_binary(), "--port", ps, "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"};
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t quiet;  // the server's log would drown the test report
        posix_spawn_file_actions_init(&quiet);
        posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
        const int rc = ::posix_spawn(&pid, argv[0], &quiet, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&quiet);
        REQUIRE(rc == 0);
        for (int i = 0; i < 500; ++i) {  // up to 5 s for the server to listen
            const int fd = connect_to(port);
            if (fd >= 0) {
                ::close(fd);
                return;
            }
            std::this_thread::sleep_for(10ms);
        }
        FAIL("redis-server did not start on port " << port);
    }
    void stop() {
        if (pid <= 0) return;
        ::kill(pid, SIGTERM);
        int status = 0;
        ::waitpid(pid, &status, 0);
        pid = -1;
    }
};

bool can_run() {
    if (!redis_available()) return false;
    if (!redis_binary()) {
        MESSAGE("redis-server is not installed: Redis store tests skipped (apt-get install redis-server)");
        return false;
    }
    return true;
}

}  // namespace

TEST_CASE("redis store: without hiredis it says it is unavailable") {
    if (redis_available()) return;
    redis_store s("127.0.0.1", 1);
    CHECK_THROWS_WITH_AS(s.put({"j", 0, 0}, "x"), doctest::Contains("unavailable"), pipeplan::error);
}

TEST_CASE("redis store: round trip and many ranks fetching concurrently") {
    if (!can_run()) return;
    redis_server server(free_port());
    constexpr std::uint32_t ranks = 8;
    std::atomic<int> ok{0};
    std::vector<std::thread> readers;
    for (std::uint32_t r = 0; r < ranks; ++r)
        readers.emplace_back([&, r] {
            redis_store mine("127.0.0.1", server.port);  // one connection per rank
            for (std::uint64_t it = 0; it < 4; ++it)
                if (mine.get({"job", it, r}, 10s) == std::string(5000 + r, char('a' + it))) ++ok;
        });
    redis_store planner("127.0.0.1", server.port);
    for (std::uint64_t it = 0; it < 4; ++it)
        for (std::uint32_t r = 0; r < ranks; ++r) planner.put({"job", it, r}, std::string(5000 + r, char('a' + it)));
    for (auto& t : readers) t.join();
    CHECK(ok == int(ranks) * 4);
    CHECK(planner.describe() == "redis://127.0.0.1:" + std::to_string(server.port));
}

TEST_CASE("redis store: a planner that dies mid-write leaves no torn plan") {
    if (!can_run()) return;
    redis_server server(free_port());
    const plan_key key{"job", 7, 1};
    const std::string k = redis_store::key_of(key), value = seal(std::string(4000, 'p'), key);
    // Half of a SET command, then the connection drops (the planner crashed).
    const int fd = connect_to(server.port);
    REQUIRE(fd >= 0);
    const std::string cmd = "*3\r\n$3\r\nSET\r\n$" + std::to_string(k.size()) + "\r\n" + k + "\r\n$" +
                            std::to_string(value.size()) + "\r\n" + value.substr(0, value.size() / 2);
    REQUIRE(::write(fd, cmd.data(), cmd.size()) == static_cast<ssize_t>(cmd.size()));
    ::close(fd);
    redis_store s("127.0.0.1", server.port);
    CHECK_THROWS_WITH_AS((void)s.get(key, 200ms), doctest::Contains("job/7/1"), timeout_error);
    s.put(key, std::string(4000, 'p'));
    CHECK(s.get(key, 1s) == std::string(4000, 'p'));
}

TEST_CASE("redis store: a fetch waits through a server restart") {
    if (!can_run()) return;
    redis_server server(free_port());
    redis_store s("127.0.0.1", server.port);
    s.put({"job", 0, 0}, "before");
    CHECK(s.get({"job", 0, 0}, 1s) == "before");
    server.stop();
    std::string got;
    std::thread reader([&] {
        redis_store r("127.0.0.1", server.port);
        got = r.get({"job", 1, 0}, 20s);
    });
    std::this_thread::sleep_for(300ms);
    server.start();
    redis_store planner("127.0.0.1", server.port);
    planner.put({"job", 1, 0}, "after the restart");
    reader.join();
    CHECK(got == "after the restart");
}

TEST_CASE("redis store: a store that is down ends in a clear timeout") {
    if (!can_run()) return;
    const std::uint16_t port = free_port();
    redis_store s("127.0.0.1", port);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS((void)s.get({"job", 0, 0}, 300ms), doctest::Contains("cannot connect"), timeout_error);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    CHECK_THROWS_WITH_AS(s.put({"job", 0, 0}, "x"), doctest::Contains(std::to_string(port).c_str()), pipeplan::error);
}

namespace {

/// Runs one command on a fresh connection (the test's own client, as redis-cli would).
std::string redis_admin(std::uint16_t port, const std::vector<std::string>& argv) {
#if defined(PIPEPLAN_HAVE_HIREDIS)
    redisContext* c = redisConnect("127.0.0.1", port);
    REQUIRE(c != nullptr);
    REQUIRE(c->err == 0);
    std::vector<const char*> a;
    std::vector<std::size_t> n;
    for (const auto& x : argv) {
        a.push_back(x.data());
        n.push_back(x.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, int(a.size()), a.data(), n.data()));
    std::string out = r && r->str ? std::string(r->str, r->len) : r ? std::to_string(r->integer) : std::string("no reply");
    if (r) freeReplyObject(r);
    redisFree(c);
    return out;
#else
    (void)port;
    (void)argv;
    return {};
#endif
}

/// A loopback listener that accepts connections (the kernel's backlog) and never answers.
struct silent_server {
    int fd = -1;
    std::uint16_t port = 0;
    silent_server() {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd, 16) == 0);
        socklen_t len = sizeof a;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        port = ntohs(a.sin_port);
    }
    ~silent_server() { ::close(fd); }
};

}  // namespace

TEST_CASE("redis store: AUTH from the URL; the password is in no message") {
    if (!can_run()) return;
    const std::string password = "s3cret-Passw0rd";
    redis_server server(free_port(), {"--requirepass", password});
    const std::string base = "127.0.0.1:" + std::to_string(server.port);
    any_store good = open_store("redis://:" + password + "@" + base, store_secret{});
    good.put({"job", 0, 0}, "plan");
    CHECK(good.get({"job", 0, 0}, 1s) == "plan");
    CHECK(good.describe().find(password) == std::string::npos);
    any_store user = open_store("redis://default:" + password + "@" + base, store_secret{});
    CHECK(user.get({"job", 0, 0}, 1s) == "plan");
    CHECK(user.describe() == "redis://default@" + base);
    any_store none = open_store("redis://" + base, store_secret{});
    CHECK_THROWS_WITH_AS((void)none.get({"job", 0, 0}, 1s), doctest::Contains("needs a password"), pipeplan::error);
    any_store wrong = open_store("redis://:not-the-" + password + "@" + base, store_secret{});
    try {
        (void)wrong.get({"job", 0, 0}, 1s);
        FAIL("a wrong password was accepted");
    } catch (const pipeplan::error& e) {
        CHECK(std::string(e.what()).find("authentication refused") != std::string::npos);
        CHECK(std::string(e.what()).find(password) == std::string::npos);
    }
    try {
        (void)parse_store_spec("redis://:" + password + "@" + base + "x");
        FAIL("a bad port was accepted");
    } catch (const pipeplan::invalid_argument& e) {
        CHECK(std::string(e.what()).find(password) == std::string::npos);
        CHECK(std::string(e.what()).find("redis://:***@") != std::string::npos);
    }
}

TEST_CASE("redis store: rediss:// says TLS is not built in") {
    CHECK_THROWS_WITH_AS((void)parse_store_spec("rediss://:pw@127.0.0.1:6380"), doctest::Contains("TLS is not built in"),
                         pipeplan::invalid_argument);
}

TEST_CASE("redis store: a server that accepts but never answers costs the caller's timeout, not more") {
    if (!redis_available()) return;
    silent_server silent;
    for (const auto timeout : {0ms, 100ms, 400ms}) {
        redis_store s("127.0.0.1", silent.port);  // I/O timeout 2 s: the caller's is shorter
        const auto t0 = std::chrono::steady_clock::now();
        CHECK_THROWS_AS((void)s.get({"job", 0, 0}, timeout), timeout_error);
        const auto took = std::chrono::steady_clock::now() - t0;
        CHECK(took < timeout + 300ms);
    }
    redis_store w("127.0.0.1", silent.port, 200ms);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(w.put({"job", 0, 0}, "plan"), pipeplan::error);
    CHECK(std::chrono::steady_clock::now() - t0 < 1s);
}

TEST_CASE("redis store: writes reconnect after the server dropped the connection") {
    if (!can_run()) return;
    redis_server server(free_port());
    redis_store s("127.0.0.1", server.port);
    s.put({"job", 0, 0}, "first");
    CHECK(redis_admin(server.port, {"CLIENT", "KILL", "TYPE", "normal"}) != "0");  // kills s's connection
    s.put({"job", 0, 1}, "second");
    CHECK(s.get({"job", 0, 1}, 1s) == "second");
}

TEST_CASE("redis store: records under another key, unsigned or forged records are refused") {
    if (!can_run()) return;
    redis_server server(free_port());
    redis_store s("127.0.0.1", server.port);
    s.put({"job", 1, 3}, "rank three");
    const std::string v = redis_admin(server.port, {"GET", redis_store::key_of({"job", 1, 3})});
    redis_admin(server.port, {"SET", redis_store::key_of({"job", 1, 0}), v});
    CHECK_THROWS_WITH_AS((void)s.get({"job", 1, 0}, 1s), doctest::Contains("stored under key 'job/1/3'"), pipeplan::input_error);
    redis_store signer("127.0.0.1", server.port);
    signer.set_secret(store_secret{"a shared secret of the job"});
    CHECK_THROWS_WITH_AS((void)signer.get({"job", 1, 3}, 1s), doctest::Contains("not signed"), pipeplan::input_error);
    signer.put({"job", 1, 3}, "signed");
    CHECK(signer.get({"job", 1, 3}, 1s) == "signed");
}

TEST_CASE("redis store: one writer per job, with a lease") {
    if (!can_run()) return;
    redis_server server(free_port());
    redis_store a("127.0.0.1", server.port), b("127.0.0.1", server.port);
    b.set_writer_lease(200ms);
    {
        writer_lock held = a.lock_writer("job");
        CHECK_THROWS_WITH_AS((void)b.lock_writer("job"), doctest::Contains("job 'job' is being written by another planner"),
                             pipeplan::error);
        a.put({"job", 0, 0}, "mine");
    }
    writer_lock mine = b.lock_writer("job");  // released: free again
    std::this_thread::sleep_for(400ms);        // b's lease runs out without a write
    writer_lock taken = a.lock_writer("job");
    CHECK_THROWS_WITH_AS(b.put({"job", 0, 1}, "late"), doctest::Contains("lost the writer lease of job 'job'"), pipeplan::error);
}
