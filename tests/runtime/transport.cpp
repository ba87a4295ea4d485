// The thread transport: in-order matching, tag and size checks, timeouts, abort, all-reduce.
#include <doctest/doctest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "pipeplan/runtime/cpu/thread_transport.hpp"

using namespace pipeplan::runtime;
using namespace pipeplan::runtime::cpu;
using namespace std::chrono_literals;

namespace {
std::span<std::byte> bytes_of(std::vector<double>& v) { return std::as_writable_bytes(std::span(v)); }
}  // namespace

TEST_CASE("thread transport: the k-th receive matches the k-th send, whatever the wait order") {
    thread_hub hub(2);
    auto a = hub.endpoint(0), b = hub.endpoint(1);
    std::vector<double> x{1, 2, 3}, y{4, 5, 6}, rx(3), ry(3);
    auto r1 = b.start_recv(0, 7, bytes_of(rx));
    auto r2 = b.start_recv(0, 8, bytes_of(ry));
    CHECK_FALSE(b.wait(r2, 1ms));  // nothing sent yet: a timeout is a false, not a throw
    std::thread t([&] {
        auto s1 = a.start_send(1, 7, bytes_of(x));
        auto s2 = a.start_send(1, 8, bytes_of(y));
        CHECK(a.wait(s1, 1s));
        CHECK(a.wait(s2, 1s));
    });
    CHECK(b.wait(r2, 5s));
    CHECK(b.wait(r1, 5s));
    t.join();
    CHECK(rx == x);
    CHECK(ry == y);
}

TEST_CASE("thread transport: a mismatched tag or size is a protocol error") {
    thread_hub hub(2);
    auto a = hub.endpoint(0), b = hub.endpoint(1);
    std::vector<double> x{1, 2}, r(2), r3(3);
    (void)a.start_send(1, 1, bytes_of(x));
    auto q = b.start_recv(0, 2, bytes_of(r));
    CHECK_THROWS_AS((void)b.wait(q, 1s), protocol_error);
    (void)a.start_send(1, 1, bytes_of(x));
    auto q2 = b.start_recv(0, 1, bytes_of(r3));
    CHECK_THROWS_WITH_AS((void)b.wait(q2, 1s), doctest::Contains("16 bytes"), protocol_error);
    CHECK_THROWS_AS((void)a.start_send(0, 1, bytes_of(x)), pipeplan::invalid_argument);  // to itself
    CHECK_THROWS_AS((void)a.start_send(5, 1, bytes_of(x)), pipeplan::invalid_argument);
}

TEST_CASE("thread transport: abort wakes a pending wait on another rank") {
    thread_hub hub(3);
    auto b = hub.endpoint(1);
    std::vector<double> r(1);
    auto q = b.start_recv(0, 1, bytes_of(r));
    std::thread t([&] {
        std::this_thread::sleep_for(20ms);
        hub.endpoint(2).abort("rank 2 failed: boom");
    });
    CHECK_THROWS_WITH_AS((void)b.wait(q, 10s), doctest::Contains("boom"), aborted_error);
    t.join();
    CHECK(hub.aborted());
}

TEST_CASE("thread transport: all-reduce gives every member identical sums, repeatedly, per group") {
    constexpr std::size_t n = 4;
    thread_hub hub(n);
    std::vector<std::vector<double>> got(n);
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < n; ++r)
        ts.emplace_back([&, r] {
            auto t = hub.endpoint(r);
            const std::vector<std::size_t> group = r % 2 == 0 ? std::vector<std::size_t>{0, 2} : std::vector<std::size_t>{1, 3};
            for (int round = 0; round < 50; ++round) {
                std::vector<double> v{0.1 * double(r + 1), 1e16, double(round)};
                t.all_reduce(typed_buffer::of(std::span(v)), group, 10s);
                if (round == 49) got[r] = v;
            }
        });
    for (auto& t : ts) t.join();
    CHECK(got[0] == got[2]);
    CHECK(got[1] == got[3]);
    CHECK(got[0][0] == doctest::Approx(0.1 + 0.3));
    CHECK(got[1][0] == doctest::Approx(0.2 + 0.4));
    CHECK(got[0][2] == 98.0);
}

TEST_CASE("thread transport: an all-reduce whose peer never comes times out") {
    thread_hub hub(2);
    std::vector<double> v{1};
    const std::vector<std::size_t> group{0, 1};
    CHECK_THROWS_WITH_AS(hub.endpoint(0).all_reduce(typed_buffer::of(std::span(v)), group, 20ms),
                         doctest::Contains("timed out"), timeout_error);
}

TEST_CASE("thread transport: all-reduce is typed: fp32 sums in float, fp16 is refused, mixed dtypes abort") {
    thread_hub hub(2);
    const std::vector<std::size_t> group{0, 1};
    std::vector<float> f0{1.5f, 1e8f, -2.f}, f1{0.25f, 1.f, 2.f};
    std::thread other([&] { hub.endpoint(1).all_reduce(typed_buffer::of(std::span(f1)), group, 10s); });
    hub.endpoint(0).all_reduce(typed_buffer::of(std::span(f0)), group, 10s);
    other.join();
    CHECK(f0 == f1);
    CHECK(f0[0] == 1.75f);
    CHECK(f0[1] == 1e8f + 1.f);  // summed in float: the 1 is lost, as a GPU's fp32 sum loses it
    CHECK(f0[2] == 0.f);
    std::vector<std::uint16_t> half(3);
    CHECK_THROWS_WITH_AS(hub.endpoint(0).all_reduce({half.data(), half.size(), pipeplan::plan::dtype::fp16}, group, 1s),
                         doctest::Contains("fp16"), pipeplan::invalid_argument);
    std::vector<double> d{1.0, 2.0, 3.0};
    std::string err0, err1;
    std::thread mixed([&] {
        try {
            hub.endpoint(1).all_reduce(typed_buffer::of(std::span(f1)), group, 10s);
        } catch (const std::exception& e) {
            err1 = e.what();
        }
    });
    try {
        hub.endpoint(0).all_reduce(typed_buffer::of(std::span(d)), group, 10s);
    } catch (const std::exception& e) {
        err0 = e.what();
    }
    mixed.join();
    const std::string err = err0 + err1;  // both fail: one with the protocol error, one aborted by it
    CHECK(err.find("fp64") != std::string::npos);
    CHECK(err.find("fp32") != std::string::npos);
}

TEST_CASE("thread transport: reduce-scatter hands member k the group-order sum of chunk k") {
    constexpr std::size_t n = 3, chunk = 4;
    thread_hub hub(n);
    std::vector<std::vector<double>> in(n, std::vector<double>(n * chunk)), out(n, std::vector<double>(chunk));
    for (std::size_t r = 0; r < n; ++r)
        for (std::size_t i = 0; i < n * chunk; ++i) in[r][i] = 0.1 * double(r + 1) + double(i);
    const std::vector<std::size_t> group{2, 0, 1};  // member positions differ from rank numbers
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < n; ++r)
        ts.emplace_back([&, r] {
            hub.endpoint(r).reduce_scatter(typed_buffer::of(std::span(in[r])), typed_buffer::of(std::span(out[r])), group,
                                           10s);
        });
    for (auto& t : ts) t.join();
    for (std::size_t pos = 0; pos < n; ++pos) {
        const std::size_t r = group[pos];
        for (std::size_t i = 0; i < chunk; ++i) {
            const std::size_t j = pos * chunk + i;
            CHECK(out[r][i] == (in[2][j] + in[0][j]) + in[1][j]);  // group order
        }
    }
    std::vector<double> small(2);
    CHECK_THROWS_AS(hub.endpoint(0).reduce_scatter(typed_buffer::of(std::span(in[0])), typed_buffer::of(std::span(small)),
                                                   group, 1s),
                    pipeplan::invalid_argument);
}
