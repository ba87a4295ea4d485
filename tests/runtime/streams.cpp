// The device backends' host-side logic, tested on CPU: the stream/event mapping of a rank's
// program (every schedule's plans for a grouping transport pass the grouped deadlock check;
// streams, executor and validator pair waits alike), the executor's group hooks and send
// rule, stream-ordered clock changes (stream_clock on a fake stream), the CUDA model's matrix
// index maps, arena growth, and the bootstrap-id exchange
// through a plan store.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "pipeplan/core/random.hpp"
#include "pipeplan/plan/deadlock.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/runtime/arena_growth.hpp"
#include "pipeplan/runtime/bootstrap.hpp"
#include "pipeplan/runtime/cpu/plans.hpp"
#include "pipeplan/runtime/cpu/thread_transport.hpp"
#include "pipeplan/runtime/directory_store.hpp"
#include "pipeplan/runtime/executor.hpp"
#include "pipeplan/runtime/matrix_product.hpp"
#include "pipeplan/runtime/stream_clock.hpp"
#include "pipeplan/runtime/stream_plan.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;
using namespace std::chrono_literals;
using plan::instr_kind;

namespace {

plan::instruction msg(instr_kind k, std::uint32_t mb, std::int32_t peer, std::uint32_t slot = 0, std::uint64_t bytes = 8) {
    plan::instruction i;
    i.kind = k;
    i.mb = mb;
    i.peer = peer;
    const auto cat = plan::category(k);
    if (cat == plan::kind_category::send_start) i.in = slot;
    if (cat == plan::kind_category::recv_start) i.out = slot;
    if (plan::is_message_start(k)) i.bytes = bytes;
    return i;
}
plan::instruction op(instr_kind k, std::uint32_t mb = 0) {
    plan::instruction i;
    i.kind = k;
    i.mb = mb;
    return i;
}

/// Two ranks that each send one message to the other and receive one from it; `send_first`
/// per rank orders its starts, `together` puts the two starts back to back (one group) or
/// separates them by the send's wait (two groups).
plan::execution_plan exchange(bool together0, bool together1) {
    plan::execution_plan p;
    p.header.devices = 2;
    p.header.predicted_peak_memory_mb = {0.0, 0.0};
    p.header.microbatches.resize(1);
    for (int r = 0; r < 2; ++r) {
        plan::rank_program prog;
        prog.rank = std::uint32_t(r);
        prog.arena_bytes = 16;
        prog.buffers = {plan::buffer{0, 8, plan::buffer_role::activation_out, 0, 0},
                        plan::buffer{8, 8, plan::buffer_role::grad_in, 0, 0}};
        const bool together = r == 0 ? together0 : together1;
        const int peer = 1 - r;
        auto& in = prog.instructions;
        in.push_back(op(instr_kind::forward));
        in.push_back(msg(instr_kind::send_activation_start, 0, peer, 0));
        if (!together) in.push_back(msg(instr_kind::send_activation_wait, 0, peer));
        in.push_back(msg(instr_kind::recv_activation_start, 0, peer, 1));
        if (together) in.push_back(msg(instr_kind::send_activation_wait, 0, peer));
        in.push_back(msg(instr_kind::recv_activation_wait, 0, peer));
        in.push_back(op(instr_kind::backward));
        p.programs.push_back(prog);
    }
    return p;
}

}  // namespace

TEST_CASE("stream plan: groups are maximal runs of starts; waits wait once per group; compute events counted") {
    plan::rank_program prog;
    prog.rank = 0;
    prog.instructions = {op(instr_kind::forward),                          // 0 compute item 0
                         msg(instr_kind::send_activation_start, 0, 1),     // 1 group 0
                         msg(instr_kind::recv_grad_start, 1, 1),           // 2 group 0
                         op(instr_kind::forward, 1),                       // 3 compute item 1
                         msg(instr_kind::send_activation_wait, 0, 1),      // 4 waits on group 0: item 2
                         msg(instr_kind::recv_grad_wait, 1, 1),            // 5 group 0 already waited on
                         msg(instr_kind::send_activation_start, 1, 1),     // 6 group 1
                         msg(instr_kind::send_activation_wait, 1, 1),      // 7 item 3
                         op(instr_kind::backward, 1)};                     // 8 item 4
    const stream_plan sp = make_stream_plan(prog);
    REQUIRE(sp.groups.size() == 2);
    CHECK(sp.groups[0].first == 1);
    CHECK(sp.groups[0].last == 2);
    CHECK(sp.groups[0].compute_before == 1);
    CHECK(sp.groups[1].first == 6);
    CHECK(sp.groups[1].last == 6);
    CHECK(sp.groups[1].compute_before == 3);
    CHECK(sp.compute_items == 5);
    CHECK(sp.events() == 4);
    CHECK(sp.group_of == std::vector<std::uint32_t>{no_group, 0, 0, no_group, 0, 0, 1, 1, no_group});
    CHECK(sp.compute_waits == std::vector<std::uint8_t>{0, 0, 0, 0, 1, 0, 0, 1, 0});
    for (std::size_t i = 0; i < prog.instructions.size(); ++i) CHECK(sp.ends_group(i) == (i == 2 || i == 6));
    prog.instructions.push_back(msg(instr_kind::recv_grad_wait, 7, 1));
    CHECK_THROWS_WITH_AS((void)make_stream_plan(prog), doctest::Contains("#9 waits for a message that was not started"),
                         pipeplan::invalid_argument);
}

TEST_CASE("stream plan: every schedule's plans for a grouping transport run under the grouped rule; one pairing of waits") {
    cpu::model_config c;
    c.vocab = 16;
    c.hidden = 4;
    c.ffn = 4;
    c.blocks = 16;
    int plans = 0;
    for (std::size_t dp : {1, 2})
        for (std::size_t devices : {2, 4, 8})
            for (auto name : {schedule::schedule_name::gpipe, schedule::schedule_name::one_f_one_b,
                              schedule::schedule_name::interleaved, schedule::schedule_name::adaptive,
                              schedule::schedule_name::zb_h1, schedule::schedule_name::merak_early,
                              schedule::schedule_name::merak_last, schedule::schedule_name::merak_critical}) {
                CAPTURE(dp);
                CAPTURE(devices);
                CAPTURE(schedule::to_string(name));
                splitmix64 rng(devices * 10 + dp);
                const std::size_t mbs = 2 * devices + 3;
                std::vector<std::size_t> lengths;
                cpu::replica_split split(dp);
                for (std::size_t k = 0; k < dp; ++k)
                    for (std::size_t m = 0; m < mbs; ++m) {
                        std::vector<std::uint32_t> ids;
                        for (std::size_t s = 0, n = 1 + rng.below(3); s < n; ++s) {
                            ids.push_back(static_cast<std::uint32_t>(lengths.size()));
                            lengths.push_back(1 + rng.below(12));
                        }
                        split[k].push_back(ids);
                    }
                cpu::tiny_plan_options o;
                o.schedule = name;
                o.devices = devices;
                o.sends = plan::send_rule::grouped;  // validated under it by plan_tiny
                const plan::execution_plan p = cpu::plan_tiny(c, split, lengths, o);
                REQUIRE(p.header.sends == plan::send_rule::grouped);
                // Messages are typed as the model's doubles; a store-mode forward's stash holds the
                // input of every block of its virtual stage (what the CUDA model keeps there).
                const auto layouts = cpu::split_layers(c.blocks, p.header.virtual_stages());
                for (const auto& prog : p.programs)
                    for (const auto& in : prog.instructions) {
                        if (plan::is_message(in.kind)) REQUIRE(in.type == plan::dtype::fp64);
                        if (in.kind != instr_kind::forward || in.stash == plan::no_slot) continue;
                        const auto& mb = p.header.microbatches[in.mb].shape;
                        const std::size_t tensor_bytes = 8 * c.hidden * mb.microbatch_size * mb.seqlen;
                        const auto& l = layouts[in.stage];
                        REQUIRE(prog.buffers[in.stash].size_bytes >= (l.end_block - l.first_block) * tensor_bytes);
                        if (in.out != plan::no_slot) REQUIRE(prog.buffers[in.out].size_bytes >= tensor_bytes);
                    }
                if (plans == 0) {  // fp64 survives the binary format (dtype code 4)
                    const plan::execution_plan back = plan::execution_plan_from_binary(plan::to_binary(p));
                    CHECK(back.header.type == plan::dtype::fp64);
                    CHECK(back.programs == p.programs);
                }
                CHECK(plan::find_deadlock(p).empty());
                // One pairing of waits with starts: the stream mapping puts a wait in its start's
                // group, the executor gives it its start's request, both as start_of_wait says.
                handler_registry any;
                for (const auto& k : plan::builtin_kinds)
                    if (!plan::is_message(k.kind)) any.on(k.kind, [](const plan::instruction&, step_context&) {});
                for (const auto& prog : p.programs) {
                    const stream_plan sp = make_stream_plan(prog);
                    const request_map req = check_rank_plan(plan::rank_plan{p.header, prog}, p.programs.size(), any,
                                                            plan::send_rule::grouped);
                    const auto start = plan::start_of_wait(p.header, prog).start_of;
                    const auto groups = plan::start_groups(prog.instructions);
                    for (std::size_t i = 0; i < prog.instructions.size(); ++i) {
                        if (plan::is_message_start(prog.instructions[i].kind))
                            CHECK(sp.groups[sp.group_of[i]].first == groups[i]);
                        if (!plan::is_message_wait(prog.instructions[i].kind)) continue;
                        REQUIRE(start[i] != plan::no_instruction);
                        CHECK(sp.group_of[i] == sp.group_of[start[i]]);
                        CHECK(req.slot_of[i] == req.slot_of[start[i]]);
                    }
                }
                ++plans;
            }
    CHECK(plans == 48);
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
    plan::execution_plan p = exchange(true, true);
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

TEST_CASE("arena growth: fits reuse the arena, growth rounds up with headroom, few regrowths, bad settings refused") {
    const arena_growth g;  // 2 MiB granularity, 1.25 headroom
    CHECK(g.capacity_for(0, 0) == 0);
    CHECK(g.capacity_for(0, 1) == g.granularity_bytes);
    CHECK(g.capacity_for(4 << 20, 3 << 20) == (4 << 20));  // fits: unchanged, never shrinks
    CHECK(g.capacity_for(4 << 20, 4 << 20) == (4 << 20));
    CHECK(g.capacity_for(4 << 20, (4 << 20) + 1) == (6 << 20));  // 5 MiB + headroom → 6 MiB
    splitmix64 rng(5);
    std::size_t cap = 0, regrowths = 0;
    double needed = 1e6;
    for (int it = 0; it < 2000; ++it) {
        needed *= 1.0 + 0.002 * double(rng.below(10));  // plans growing slowly and noisily
        const auto n = static_cast<std::size_t>(needed);
        const std::size_t next = g.capacity_for(cap, n);
        CHECK(next >= n);
        CHECK(next >= cap);
        CHECK(next % g.granularity_bytes == 0);
        regrowths += next != cap;
        cap = next;
    }
    const double bound = std::log(needed / 1e6) / std::log(1.25) + 2;
    CHECK(double(regrowths) <= bound);
    CHECK(regrowths >= 2);
    const arena_growth no_granularity{0, 1.25}, shrinking{64, 0.5};
    CHECK_THROWS_AS((void)no_granularity.capacity_for(0, 1), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)shrinking.capacity_for(0, 1), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)g.capacity_for(0, std::size_t(-1) / 2), pipeplan::invalid_argument);
}

TEST_CASE("bootstrap: the communicator id goes through a plan store under <job>.bootstrap/epoch, with a timeout") {
    CHECK(bootstrap_key("job-1", 3).str() == "job-1.bootstrap/3/0");
    CHECK_THROWS_AS((void)bootstrap_key("bad/name", 0), pipeplan::invalid_argument);
    CHECK_THROWS_WITH_AS((void)bootstrap_key(std::string(120, 'j'), 0), doctest::Contains("too long"),
                         pipeplan::invalid_argument);
    const auto dir = std::filesystem::temp_directory_path() / ("pipeplan_bootstrap_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    directory_store store(dir);
    std::vector<std::byte> id(128), got(128), small(64);
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = std::byte(i * 7 + 1);
    std::thread rank0([&] {
        std::this_thread::sleep_for(30ms);  // the fetcher is already waiting
        publish_bootstrap_id(store, "job", 1, id);
    });
    fetch_bootstrap_id(store, "job", 1, got, 10s);
    rank0.join();
    CHECK(got == id);
    CHECK_THROWS_WITH_AS(fetch_bootstrap_id(store, "job", 1, small, 1s), doctest::Contains("expected 64"),
                         pipeplan::input_error);
    CHECK_THROWS_WITH_AS(fetch_bootstrap_id(store, "job", 2, got, 20ms), doctest::Contains("job.bootstrap/2/0"),
                         timeout_error);
    CHECK_THROWS_AS(publish_bootstrap_id(store, "job", 1, std::span<const std::byte>{}), pipeplan::invalid_argument);
    std::filesystem::remove_all(dir);
}

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

TEST_CASE("matrix maps of the CUDA model: forward, weight and input gradient equal the textbook products") {
    // The kernel template of runtime/cuda/src/kernels.cu runs product_element() per thread; here
    // the same maps run on the host against products written with explicit (row, column)
    // indexing and transposes. Same products in the same order: equal to the bit.
    splitmix64 rng(11);
    const auto random = [&](std::size_t n) {
        std::vector<double> v(n);
        for (auto& x : v) x = 2.0 * static_cast<double>(rng() >> 11) * 0x1.0p-53 - 1.0;
        return v;
    };
    for (const std::size_t h : {1u, 3u, 8u})
        for (const std::size_t cols : {1u, 5u, 13u}) {
            CAPTURE(h);
            CAPTURE(cols);
            const auto at = [](std::size_t rows, std::size_t r, std::size_t c) { return r + rows * c; };  // column-major
            const std::vector<double> w = random(h * h), x = random(h * cols), delta = random(h * cols);
            // forward: y(i, c) = tanh(Σ_k W(i, k) x(k, c))
            std::vector<double> y(h * cols, -7.0), y_want(h * cols);
            matrix::product_on_host(matrix::forward_map{h, cols}, w.data(), x.data(), y.data());
            for (std::size_t i = 0; i < h; ++i)
                for (std::size_t c = 0; c < cols; ++c) {
                    double z = 0;
                    for (std::size_t k = 0; k < h; ++k) z += w[at(h, i, k)] * x[at(h, k, c)];
                    y_want[at(h, i, c)] = std::tanh(z);
                }
            CHECK(y == y_want);
            // weight gradient: dW(i, j) += Σ_c δ(i, c) x(j, c), accumulated onto what is there
            std::vector<double> dw = random(h * h), dw_want = dw;
            matrix::product_on_host(matrix::weight_grad_map{h, cols}, delta.data(), x.data(), dw.data());
            for (std::size_t i = 0; i < h; ++i)
                for (std::size_t j = 0; j < h; ++j) {
                    double s = 0;
                    for (std::size_t c = 0; c < cols; ++c) s += delta[at(h, i, c)] * x[at(h, j, c)];
                    dw_want[at(h, i, j)] += s;
                }
            CHECK(dw == dw_want);
            // input gradient: dx(j, c) = Σ_i W(i, j) δ(i, c), overwriting what is there
            std::vector<double> dx(h * cols, 5.0), dx_want(h * cols);
            matrix::product_on_host(matrix::input_grad_map{h, cols}, w.data(), delta.data(), dx.data());
            for (std::size_t j = 0; j < h; ++j)
                for (std::size_t c = 0; c < cols; ++c) {
                    double s = 0;
                    for (std::size_t i = 0; i < h; ++i) s += w[at(h, i, j)] * delta[at(h, i, c)];
                    dx_want[at(h, j, c)] = s;
                }
            CHECK(dx == dx_want);
            CHECK(matrix::elements(matrix::weight_grad_map{h, cols}) == h * h);
        }
}
