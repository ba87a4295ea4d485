// The executor on hand-written rank plans (fragments of iterations, so the plan tier's rules
// are off except where a test turns them on): dispatch, messages through the arena, the checks
// that reject a plan before anything runs, and the faults (stopped rank, throwing handler);
// a grouping transport's end_group and compute stream.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hand_plans.hpp"
#include "pipeplan/runtime/cpu/thread_transport.hpp"
#include "pipeplan/runtime/executor.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace std::chrono_literals;
using plan::instr_kind;

namespace {

plan::instruction make(instr_kind k, std::uint32_t mb, std::uint32_t stage, std::int32_t peer = plan::no_peer,
                       std::uint32_t in = plan::no_slot, std::uint32_t out = plan::no_slot, std::uint64_t bytes = 0) {
    plan::instruction i;
    i.kind = k;
    i.microbatch = mb;
    i.stage = stage;
    i.peer = peer;
    i.in = in;
    i.out = out;
    i.bytes = bytes;
    return i;
}

/// Two ranks, one micro-batch: rank 0 computes 2 doubles and sends them to rank 1.
std::vector<plan::rank_plan> two_rank_plans() {
    plan::plan_header h;
    h.devices = 2;
    h.predicted_peak_memory_mb = {0.0, 0.0};
    h.microbatches.resize(1);
    plan::rank_plan r0{h, {}}, r1{h, {}};
    r0.program.rank = 0;
    r0.program.arena_bytes = 64;
    r0.program.buffers = {plan::buffer{16, 16, plan::buffer_role::activation_out, 0, 0}};
    r0.program.instructions = {make(instr_kind::load_microbatch, 0, 0),
                               make(instr_kind::forward, 0, 0, plan::no_peer, plan::no_slot, 0),
                               make(instr_kind::send_activation_start, 0, 0, 1, 0, plan::no_slot, 16),
                               make(instr_kind::send_activation_wait, 0, 0, 1),
                               make(instr_kind::free, 0, 0, plan::no_peer, 0)};
    r1.program.rank = 1;
    r1.program.arena_bytes = 16;
    r1.program.buffers = {plan::buffer{0, 16, plan::buffer_role::activation_in, 0, 0}};
    r1.program.instructions = {make(instr_kind::recv_activation_start, 0, 0, 0, plan::no_slot, 0, 16),
                               make(instr_kind::recv_activation_wait, 0, 0, 0),
                               make(instr_kind::forward, 0, 1, plan::no_peer, 0, plan::no_slot)};
    return {r0, r1};
}

struct recorder {
    std::vector<double> received;
    int calls = 0;
    handler_registry registry(bool throw_in_forward = false) {
        handler_registry h;
        h.on(instr_kind::load_microbatch, [this](const plan::instruction&, step_context&) { ++calls; });
        h.on(instr_kind::forward, [this, throw_in_forward](const plan::instruction& in, step_context& ctx) {
            ++calls;
            if (throw_in_forward && ctx.rank() == 0) throw std::runtime_error("out of memory in forward");
            if (in.out != plan::no_slot) {
                const double v[2] = {3.5, double(in.microbatch) + 1};
                std::memcpy(ctx.buffer(in.out).data(), v, sizeof v);
            }
            if (in.in != plan::no_slot) {
                received.resize(2);
                std::memcpy(received.data(), ctx.buffer(in.in).data(), 16);
            }
        });
        return h;
    }
};

/// Runs each rank's plan on its own thread; returns each rank's error message ("" = ok).
std::vector<std::string> run_ranks(const std::vector<plan::rank_plan>& plans, std::vector<recorder>& rec,
                                   timeout_ms timeout, bool throw_in_forward = false, std::size_t skip_rank = 99) {
    cpu::thread_hub hub(plans.size());
    std::vector<std::string> err(plans.size());
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < plans.size(); ++r)
        ts.emplace_back([&, r] {
            if (r == skip_rank) return;  // a rank that stopped
            auto t = hub.endpoint(r);
            executor<cpu::thread_transport> ex(t, rec[r].registry(throw_in_forward), {timeout, false});
            try {
                ex.run(plans[r]);
            } catch (const pipeplan::error& e) {
                err[r] = std::string(typeid(e).name()) + ": " + e.what();
            }
        });
    for (auto& t : ts) t.join();
    return err;
}

}  // namespace

TEST_CASE("executor: runs both ranks' programs; the activation travels through the arenas") {
    std::vector<recorder> rec(2);
    const auto err = run_ranks(two_rank_plans(), rec, 10s);
    CHECK(err[0].empty());
    CHECK(err[1].empty());
    CHECK(rec[0].calls == 2);
    CHECK(rec[1].calls == 1);
    CHECK(rec[1].received == std::vector<double>{3.5, 1.0});
}

TEST_CASE("executor: a plan that breaks a rule is rejected before any handler runs") {
    using mutate = std::function<void(std::vector<plan::rank_plan>&)>;
    const std::vector<std::pair<const char*, mutate>> cases = {
        {"not in the buffer table", [](auto& p) { p[0].program.instructions[1].out = 7; }},
        {"outside the arena", [](auto& p) { p[0].program.buffers[0].offset_bytes = 60; }},
        {"do not fit buffer", [](auto& p) { p[0].program.instructions[2].bytes = 24; }},
        {"not another rank", [](auto& p) { p[0].program.instructions[2].peer = 0; }},
        {"not another rank", [](auto& p) { p[0].program.instructions[2].peer = 5; }},
        {"never waited for", [](auto& p) { p[0].program.instructions.erase(p[0].program.instructions.begin() + 3); }},
        {"was not started", [](auto& p) { p[0].program.instructions.erase(p[0].program.instructions.begin() + 2); }},
        {"no handler", [](auto& p) { p[0].program.instructions[1].kind = instr_kind::backward; }},
        {"unknown instruction kind", [](auto& p) { p[0].program.instructions[1].kind = instr_kind{77}; }},
        {"micro-batch table", [](auto& p) { p[0].program.instructions[1].microbatch = 3; }},
        {"format version", [](auto& p) { p[0].header.version = 99; }},
        {"rank 0 of 3", [](auto& p) { p[0].header.devices = 3; }},
    };
    for (const auto& [rule, mut] : cases) {
        CAPTURE(rule);
        auto plans = two_rank_plans();
        mut(plans);
        cpu::thread_hub hub(2);
        auto t = hub.endpoint(0);
        recorder rec;
        executor<cpu::thread_transport> ex(t, rec.registry(), {50ms, false});
        CHECK_THROWS_WITH_AS(ex.run(plans[0]), doctest::Contains(rule), rejected_plan_error);
        CHECK(rec.calls == 0);
    }
    // The plan of another rank is refused too.
    cpu::thread_hub hub(2);
    auto t = hub.endpoint(1);
    recorder rec;
    executor<cpu::thread_transport> ex(t, rec.registry(), {50ms, false});
    CHECK_THROWS_AS(ex.run(two_rank_plans()[0]), rejected_plan_error);
    // With the plan tier's rules on (the default), this fragment of an iteration (no backward,
    // no gradient reduction) is refused as a whole.
    auto t0 = hub.endpoint(0);
    executor<cpu::thread_transport> strict(t0, rec.registry(), {50ms});
    CHECK_THROWS_WITH_AS(strict.run(two_rank_plans()[0]), doctest::Contains("invalid plan"), rejected_plan_error);
    CHECK(rec.calls == 0);
}

TEST_CASE("executor: a rank that stopped makes its peer fail with a timeout naming rank, peer and micro-batch") {
    std::vector<recorder> rec(2);
    const auto start = std::chrono::steady_clock::now();
    const auto err = run_ranks(two_rank_plans(), rec, 100ms, false, 0);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    CHECK(err[1].find("timeout_error") != std::string::npos);
    CHECK(err[1].find("rank 1") != std::string::npos);
    CHECK(err[1].find("peer 0") != std::string::npos);
    CHECK(err[1].find("micro-batch 0") != std::string::npos);
    CHECK(err[1].find("recv_activation_wait") != std::string::npos);
}

TEST_CASE("executor: a throwing handler ends its rank's step with its error and aborts the others at once") {
    std::vector<recorder> rec(2);
    const auto start = std::chrono::steady_clock::now();
    const auto err = run_ranks(two_rank_plans(), rec, 20s, true);
    CHECK(std::chrono::steady_clock::now() - start < 10s);  // not the 20 s timeout
    CHECK(err[0].find("step_error") != std::string::npos);
    CHECK(err[0].find("out of memory in forward") != std::string::npos);
    CHECK(err[0].find("instruction #1 forward") != std::string::npos);
    CHECK(err[1].find("aborted_error") != std::string::npos);
    CHECK(err[1].find("out of memory in forward") != std::string::npos);
}

TEST_CASE("executor: reduce_gradients handlers all-reduce (and reduce-scatter) over the data-parallel group") {
    plan::plan_header h;
    h.devices = 2;
    h.dp = 2;
    h.predicted_peak_memory_mb.assign(4, 0.0);
    std::vector<double> result(4, 0);
    std::vector<float> scattered(4, 0);
    cpu::thread_hub hub(4);
    std::vector<std::thread> ts;
    for (std::uint32_t r = 0; r < 4; ++r)
        ts.emplace_back([&, r] {
            plan::rank_plan p{h, {}};
            p.program.rank = r;
            p.program.instructions = {make(instr_kind::reduce_gradients, 0, 0)};
            handler_registry reg;
            reg.on(instr_kind::reduce_gradients, [&](const plan::instruction&, step_context& ctx) {
                std::vector<double> v{double(ctx.rank() + 1)};
                ctx.all_reduce(v);
                result[ctx.rank()] = v[0];
                std::vector<float> in{float(ctx.rank() + 1), float(10 * (ctx.rank() + 1))}, out(1);
                ctx.reduce_scatter(runtime::typed_buffer::of(std::span(in)), runtime::typed_buffer::of(std::span(out)));
                scattered[ctx.rank()] = out[0];
            });
            auto t = hub.endpoint(r);
            executor<cpu::thread_transport> ex(t, reg, {10s, false});
            ex.run(p);
        });
    for (auto& t : ts) t.join();
    CHECK(result == std::vector<double>{1 + 3, 2 + 4, 1 + 3, 2 + 4});  // ranks {0,2} and {1,3}
    CHECK(scattered == std::vector<float>{1 + 3, 2 + 4, 10 + 30, 20 + 40});  // chunk = position in the group
}

namespace {

/// A thread transport that batches starts like the CUDA transports and logs the calls.
class grouping_probe {
public:
    using request = cpu::thread_transport::request;
    explicit grouping_probe(cpu::thread_transport t) : t_(t) {}
    [[nodiscard]] std::size_t rank() const noexcept { return t_.rank(); }
    [[nodiscard]] std::size_t ranks() const noexcept { return t_.ranks(); }
    request start_send(std::size_t peer, std::uint64_t tag, std::span<const std::byte> out) {
        log += 'S';
        return t_.start_send(peer, tag, out);
    }
    request start_recv(std::size_t peer, std::uint64_t tag, std::span<std::byte> in) {
        log += 'R';
        return t_.start_recv(peer, tag, in);
    }
    bool wait(request& r, timeout_ms timeout) {
        log += 'W';
        return t_.wait(r, timeout);
    }
    void all_reduce(typed_buffer v, std::span<const std::size_t> g, timeout_ms timeout) { t_.all_reduce(v, g, timeout); }
    void abort(const std::string& why) { t_.abort(why); }
    void end_group() { log += '|'; }
    void* compute_stream() { return &log; }

    std::string log;

private:
    cpu::thread_transport t_;
};

}  // namespace

TEST_CASE("executor: a grouping transport gets end_group after each group's last start; handlers see its stream") {
    static_assert(grouping_transport<grouping_probe> && streaming_transport<grouping_probe>);
    static_assert(send_rule_of<grouping_probe>() == plan::send_rule::grouped);
    plan::execution_plan p = test::exchange(true, true);
    p.header.sends = plan::send_rule::grouped;
    cpu::thread_hub hub(2);
    std::vector<std::string> logs(2);
    std::vector<int> stream_ok(2, 0);
    std::vector<std::thread> ts;
    for (std::size_t r = 0; r < 2; ++r)
        ts.emplace_back([&, r] {
            grouping_probe t(hub.endpoint(r));
            handler_registry reg;
            const auto compute = [&, r](const plan::instruction&, step_context& ctx) {
                stream_ok[r] += ctx.compute_stream() == &t.log;
                t.log += 'C';
            };
            reg.on(instr_kind::forward, compute).on(instr_kind::backward, compute);
            executor<grouping_probe> ex(t, reg, {10s, false});
            ex.run(plan::share_of(p, r));
            logs[r] = t.log;
        });
    for (auto& t : ts) t.join();
    for (std::size_t r = 0; r < 2; ++r) {
        CHECK(logs[r] == "CSR|WWC");
        CHECK(stream_ok[r] == 2);
    }
    // A plan checked only under the buffered rule is refused by a grouping transport.
    p.header.sends = plan::send_rule::buffered;
    handler_registry reg;
    const auto noop = [](const plan::instruction&, step_context&) {};
    reg.on(instr_kind::forward, noop).on(instr_kind::backward, noop);
    CHECK_THROWS_WITH_AS((void)check_rank_plan(plan::share_of(p, 0), 2, reg, send_rule_of<grouping_probe>()),
                         doctest::Contains("checked under send rule buffered, this transport behaves as grouped"),
                         rejected_plan_error);
    CHECK_NOTHROW((void)check_rank_plan(plan::share_of(p, 0), 2, reg, plan::send_rule::buffered));
}

