// runtime/stream_clock.hpp: clock changes in stream order on a fake stream, and its errors.
#include <doctest/doctest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hand_plans.hpp"
#include "pipeplan/runtime/cpu/thread_transport.hpp"
#include "pipeplan/runtime/executor.hpp"
#include "pipeplan/runtime/stream_clock.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace std::chrono_literals;
using plan::instr_kind;
using test::exchange;
using test::msg;
using test::op;

namespace {

/// A CPU stand-in for a CUDA stream: work is queued when enqueued and runs, in order, on run().
struct fake_stream {
    std::vector<std::function<void()>> queue;
    std::vector<std::string> log;  ///< what ran, in stream order
    void run() {
        for (auto& f : queue) f();
        queue.clear();
    }
};

/// cudaLaunchHostFunc's stand-in: queues fn(data) on the fake stream (or refuses, when told).
struct fake_launcher {
    bool refuse = false;
    void launch(void* stream, void (*fn)(void*), void* data) const {
        if (refuse) throw std::runtime_error("fake launch refused");
        static_cast<fake_stream*>(stream)->queue.push_back([fn, data] { fn(data); });
    }
};

/// A transport whose compute stream is a fake_stream.
class fake_stream_transport {
public:
    using request = cpu::thread_transport::request;
    explicit fake_stream_transport(cpu::thread_transport t) : t_(t) {}
    [[nodiscard]] std::size_t rank() const noexcept { return t_.rank(); }
    [[nodiscard]] std::size_t ranks() const noexcept { return t_.ranks(); }
    request start_send(std::size_t peer, std::uint64_t tag, std::span<const std::byte> out) { return t_.start_send(peer, tag, out); }
    request start_recv(std::size_t peer, std::uint64_t tag, std::span<std::byte> in) { return t_.start_recv(peer, tag, in); }
    bool wait(request& r, timeout_ms timeout) { return t_.wait(r, timeout); }
    void all_reduce(typed_buffer v, std::span<const std::size_t> g, timeout_ms timeout) { t_.all_reduce(v, g, timeout); }
    void abort(const std::string& why) { t_.abort(why); }
    void* compute_stream() { return &stream; }
    fake_stream stream;

private:
    cpu::thread_transport t_;
};

/// exchange() with a set_frequency before each compute op: rank r's forward at 1000 + r MHz,
/// its backward at 1500 + r MHz.
plan::execution_plan exchange_with_clocks() {
    plan::execution_plan p = exchange(true, true);
    for (std::size_t r = 0; r < 2; ++r) {
        std::vector<plan::instruction> out;
        for (const auto& x : p.programs[r].instructions) {
            if (plan::is_compute(x.kind))
                out.push_back(plan::make_set_frequency(std::uint32_t((x.kind == instr_kind::forward ? 1000 : 1500) + r), x));
            out.push_back(x);
        }
        p.programs[r].instructions = std::move(out);
    }
    return p;
}

}  // namespace

TEST_CASE("stream_clock: set_frequency takes effect in stream order, not when the executor enqueues it") {
    const plan::execution_plan p = exchange_with_clocks();
    cpu::thread_hub hub(2);
    std::vector<std::vector<std::string>> enqueue_time_log(2), stream_log(2);
    std::vector<std::vector<std::uint64_t>> applied(2);
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < 2; ++r)
        ts.emplace_back([&, r] {
            fake_stream_transport t(hub.endpoint(r));
            handler_registry reg;
            const auto compute = [&t](const plan::instruction& in, step_context& ctx) {
                const std::string name = in.kind == instr_kind::forward ? "F" : "B";
                static_cast<fake_stream*>(ctx.compute_stream())->queue.push_back([&t, name] { t.stream.log.push_back(name); });
            };
            reg.on(instr_kind::forward, compute).on(instr_kind::backward, compute);
            stream_clock clock(fake_launcher{}, [&t](std::uint64_t mhz) { t.stream.log.push_back(std::to_string(mhz)); });
            clock.register_on(reg);
            executor<fake_stream_transport> ex(t, reg, {10s, false});
            ex.run(plan::share_of(p, r));
            enqueue_time_log[r] = t.stream.log;  // nothing ran yet: the clock was not set at enqueue time
            t.stream.run();
            stream_log[r] = t.stream.log;
            clock.rethrow();
            applied[r] = clock.take_applied_mhz();
            CHECK(clock.take_applied_mhz().empty());
        });
    for (auto& t : ts) t.join();
    for (std::size_t r = 0; r < 2; ++r) {
        CHECK(enqueue_time_log[r].empty());
        CHECK(stream_log[r] == std::vector<std::string>{std::to_string(1000 + r), "F", std::to_string(1500 + r), "B"});
        CHECK(applied[r] == std::vector<std::uint64_t>{1000 + r, 1500 + r});
    }
}

TEST_CASE("stream_clock: a failing setter is reported after the stream ran; refused launches and no stream are errors") {
    fake_stream s;
    stream_clock clock(fake_launcher{}, [&](std::uint64_t mhz) {
        if (mhz == 1500) throw std::runtime_error("NVML: insufficient permissions");
        s.log.push_back(std::to_string(mhz));
    });
    clock.enqueue(1000, &s, "set_frequency 1000 MHz");
    clock.enqueue(1500, &s, "set_frequency 1500 MHz before micro-batch 0 stage 0");
    clock.enqueue(1200, &s, "set_frequency 1200 MHz");
    CHECK_NOTHROW(clock.rethrow());  // nothing ran yet
    s.run();
    CHECK(s.log == std::vector<std::string>{"1000", "1200"});  // the later change still ran
    CHECK_THROWS_WITH_AS(clock.rethrow(),
                         "stream_clock: set_frequency 1500 MHz before micro-batch 0 stage 0: NVML: insufficient permissions",
                         pipeplan::error);
    CHECK_NOTHROW(clock.rethrow());  // reported once
    CHECK(clock.take_applied_mhz() == std::vector<std::uint64_t>{1000, 1200});
    // A launch the device refuses: the error reaches the caller, nothing is queued (and, under
    // ASan, nothing leaks).
    stream_clock refusing(fake_launcher{true}, [](std::uint64_t) {});
    CHECK_THROWS_WITH_AS(refusing.enqueue(900, &s, "x"), "fake launch refused", std::runtime_error);
    CHECK(s.queue.empty());
    // Without a compute stream (a CPU transport) the handler names the instruction.
    CHECK_THROWS_WITH_AS(clock.enqueue(900, nullptr, "set_frequency 900 MHz"),
                         doctest::Contains("set_frequency 900 MHz: the transport has no compute stream"),
                         pipeplan::invalid_argument);
    CHECK_THROWS_AS(stream_clock(fake_launcher{}, clock_setter{}), pipeplan::invalid_argument);
}

