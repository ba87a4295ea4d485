// pipeplan/runtime/executor.hpp — runs one rank's execution plan.
//
// The trainer registers a handler per instruction kind (as DynaPipe's register_handler) in a
// handler_registry; an executor owns the rank's arena (sized by the plan's buffer planner,
// grown, never shrunk), checks the rank's plan before running any instruction
// (check_before_run: the plan tier's rank rules, then what the executor itself relies on),
// then runs the program in order:
//   - message starts and waits go to the transport (start_send / start_recv / wait) on the
//     arena bytes of the instruction's buffer; a wait that exceeds the timeout throws
//     timeout_error naming the rank, the peer, the instruction and the micro-batch;
//   - every other kind (compute, load_microbatch, reduce_gradients, optimizer_step, user kinds)
//     calls its handler with the instruction and a step_context (the rank's arena buffers by
//     slot, the plan, and an all-reduce over the rank's data-parallel group); `free` calls its
//     handler when one is registered (trainers keeping per-buffer state release it there), and
//     so does `set_frequency` (a trainer that sets GPU clocks registers one; without it the
//     rank runs at its default clock) and `overlap_f_b` (without a handler the pair's two
//     compute instructions, which follow it, run in program order).
// Device backends: the arena's memory is a template parameter (arena_memory: the host arena, or
// runtime/cuda's device_arena); a transport with end_group() gets it after each group of
// consecutive message starts (stream_plan.hpp), and one with compute_stream() hands its stream
// to handlers through step_context.
// A handler that throws, or a message whose peer disagrees, aborts the transport (the other
// ranks end with aborted_error instead of waiting) and ends the step with step_error naming
// the instruction. A timeout does not abort: every rank that waits on a stopped rank fails with
// its own timeout_error.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <ranges>
#include <type_traits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/plan/fields.hpp"
#include "pipeplan/plan/messages.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/plan/send_rule.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/runtime/errors.hpp"
#include "pipeplan/runtime/stream_plan.hpp"
#include "pipeplan/runtime/transport.hpp"

namespace pipeplan::runtime {

/// A plan was rejected before anything ran; the message names rank, instruction and rule.
class rejected_plan_error : public error {
public:
    using error::error;
};

/// A step ended because an instruction failed on this rank.
class step_error : public error {
public:
    using error::error;
};

/// "instruction #i forward mb 3 stage 1 in 4 out 5" — how errors name an instruction
/// (plan::describe: the fields the instruction uses).
[[nodiscard]] inline std::string describe_instruction(const plan::instruction& in, std::size_t index) {
    return "instruction #" + std::to_string(index) + " " + plan::describe(in);
}

/// The bytes of one rank's buffers: one allocation, 64-byte aligned, grown, never shrunk.
class arena {
public:
    [[nodiscard]] std::span<std::byte> bytes() noexcept { return {data_.get(), size_}; }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    /// Makes the arena `size` bytes long (reallocating only when it grows past the capacity).
    void resize(std::size_t size) {
        if (size > capacity_) {
            data_.reset(static_cast<std::byte*>(::operator new[](size, std::align_val_t{64})));
            capacity_ = size;
        }
        size_ = size;
    }

private:
    struct deleter {
        void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
    };
    std::unique_ptr<std::byte[], deleter> data_;
    std::size_t size_ = 0, capacity_ = 0;
};

/// The memory an executor lays a rank's buffers out in: the host `arena` above, or the CUDA
/// device arena (runtime/cuda), whose bytes() is device memory.
template <class M>
concept arena_memory = requires(M& m, const M& cm, std::size_t n) {
    m.resize(n);
    { m.bytes() } -> std::same_as<std::span<std::byte>>;
    { cm.capacity() } -> std::convertible_to<std::size_t>;
};
static_assert(arena_memory<arena>);

/// A transport whose message starts are batched into groups (NCCL group calls; the stream
/// mapping of stream_plan.hpp): the executor calls end_group() after each group's last start.
template <class T>
concept grouping_transport = transport<T> && requires(T& t) { t.end_group(); };

/// A transport with reduce_scatter(in, out, group, timeout): `in` holds group-size chunks of
/// out.count elements; member k receives the sum of every member's chunk k (ZeRO ≥ 2).
template <class T>
concept scattering_transport = transport<T> && requires(T& t, typed_buffer b, std::span<const std::size_t> g, timeout_ms to) {
    t.reduce_scatter(b, b, g, to);
};

/// A transport with a compute stream (CUDA: a cudaStream_t) that handlers enqueue their work on.
template <class T>
concept streaming_transport = transport<T> && requires(T& t) {
    { t.compute_stream() } -> std::same_as<void*>;
};

/// What a handler sees of the running step.
class step_context {
public:
    using reduce_fn = void (*)(void* self, typed_buffer values);
    using scatter_fn = void (*)(void* self, typed_buffer in, typed_buffer out);

    step_context(const plan::rank_plan& plan, std::span<std::byte> arena, reduce_fn reduce, void* reducer,
                 void* stream = nullptr, scatter_fn scatter = nullptr)
        : plan_(&plan), arena_(arena), reduce_(reduce), scatter_(scatter), reducer_(reducer), stream_(stream) {}

    [[nodiscard]] const plan::rank_plan& plan() const noexcept { return *plan_; }
    [[nodiscard]] std::uint32_t rank() const noexcept { return plan_->program.rank; }
    /// The index of the instruction running now.
    [[nodiscard]] std::size_t index() const noexcept { return index_; }
    /// The arena bytes of buffer `slot` (empty for plan::no_slot).
    [[nodiscard]] std::span<std::byte> buffer(std::uint32_t slot) const noexcept {
        if (slot == plan::no_slot) return {};
        const auto& b = plan_->program.buffers[slot];
        return arena_.subspan(b.offset_bytes, b.size_bytes);
    }
    /// Sums `values` in place over the rank's data-parallel group (every replica's rank of this
    /// device).
    void all_reduce(typed_buffer values) const { reduce_(reducer_, values); }
    /// The same over a contiguous range of double (fp64) or float (fp32).
    template <std::ranges::contiguous_range R>
        requires has_dtype_v<std::remove_const_t<std::ranges::range_value_t<R>>> &&
                 (!std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>)
    void all_reduce(R&& values) const {
        reduce_(reducer_, typed_buffer::of(std::span(std::ranges::data(values), std::ranges::size(values))));
    }

    /// Reduce-scatter over the data-parallel group (ZeRO ≥ 2; reduce_gradients' mode
    /// reduce_scatter): `in` holds one chunk of out.count elements per member; this rank gets
    /// the sum of every member's chunk of its own position in the group. Throws
    /// invalid_argument when the transport has no reduce_scatter.
    void reduce_scatter(typed_buffer in, typed_buffer out) const {
        if (scatter_ == nullptr) throw invalid_argument("reduce_scatter: this transport has none");
        scatter_(reducer_, in, out);
    }

    /// The compute stream handlers enqueue on (a cudaStream_t on the CUDA transports; nullptr on
    /// the CPU). buffer() spans are device memory there: never dereference them on the host.
    [[nodiscard]] void* compute_stream() const noexcept { return stream_; }

    void set_index(std::size_t i) noexcept { index_ = i; }

private:
    const plan::rank_plan* plan_;
    std::span<std::byte> arena_;
    reduce_fn reduce_;
    scatter_fn scatter_;
    void* reducer_;
    void* stream_;
    std::size_t index_ = 0;
};

/// The trainer's handlers, one per instruction kind (built-in or user code 128..255).
class handler_registry {
public:
    using handler = std::function<void(const plan::instruction&, step_context&)>;

    /// Registers (or replaces) the handler of `kind`. Message kinds belong to the executor.
    handler_registry& on(plan::instr_kind kind, handler h) {
        if (plan::is_message(kind) || plan::is_unknown(kind))
            throw invalid_argument("handler_registry: kind " + plan::kind_name(kind) +
                                   (plan::is_message(kind) ? " is run by the transport" : " is not a valid kind"));
        table_[static_cast<std::size_t>(kind)] = std::move(h);
        return *this;
    }
    [[nodiscard]] bool has(plan::instr_kind kind) const noexcept {
        return static_cast<bool>(table_[static_cast<std::size_t>(kind)]);
    }
    [[nodiscard]] const handler& operator[](plan::instr_kind kind) const noexcept {
        return table_[static_cast<std::size_t>(kind)];
    }

private:
    std::array<handler, 256> table_;
};

/// The ranks of `rank`'s data-parallel group (the same device in every replica), in replica order.
[[nodiscard]] inline std::vector<std::size_t> dp_group(const plan::plan_header& h, std::uint32_t rank) {
    std::vector<std::size_t> g;
    for (std::uint32_t r = 0; r < h.dp; ++r) g.push_back(std::size_t(r) * h.devices + h.device_of_rank(rank));
    return g;
}

/// The transport tag of a message: activation or gradient, producing stage and micro-batch, so
/// that a receive matched with the wrong send is detected.
[[nodiscard]] constexpr std::uint64_t message_tag(const plan::instruction& in) noexcept {
    const std::uint64_t grad = plan::is_activation_message(in.kind) ? 0 : 1;
    return (grad << 63) | (std::uint64_t(in.stage) << 32) | in.microbatch;
}

/// For each instruction of a checked program, the request slot of its message (start and wait
/// share one), and the number of slots.
struct request_map {
    std::vector<std::uint32_t> slot_of;  ///< [instruction]; unused for non-messages
    std::size_t slots = 0;
};

namespace detail {

[[noreturn]] inline void reject(const plan::rank_plan& p, std::size_t i, const std::string& rule) {
    std::string msg = "rank " + std::to_string(p.program.rank) + ": ";
    if (i < p.program.instructions.size()) msg += describe_instruction(p.program.instructions[i], i) + ": ";
    throw rejected_plan_error(msg + rule);
}

inline void check_buffers(const plan::rank_plan& p) {
    for (std::size_t s = 0; s < p.program.buffers.size(); ++s) {
        const auto& b = p.program.buffers[s];
        if (b.offset_bytes > p.program.arena_bytes || b.size_bytes > p.program.arena_bytes - b.offset_bytes)
            detail::reject(p, std::size_t(-1), "buffer " + std::to_string(s) + " [" + std::to_string(b.offset_bytes) + ", +" +
                                                   std::to_string(b.size_bytes) + ") lies outside the arena of " +
                                                   std::to_string(p.program.arena_bytes) + " bytes");
    }
}

/// Checks one instruction's own fields (slots, peer, micro-batch, message size).
inline void check_fields(const plan::rank_plan& p, std::size_t i, std::size_t ranks, const handler_registry& h) {
    const auto& in = p.program.instructions[i];
    if (plan::is_unknown(in.kind)) reject(p, i, "unknown instruction kind");
    for (std::uint32_t slot : {in.in, in.out, in.stash, in.work})
        if (slot != plan::no_slot && slot >= p.program.buffers.size())
            reject(p, i, "slot " + std::to_string(slot) + " is not in the buffer table (" +
                             std::to_string(p.program.buffers.size()) + " buffers)");
    const auto cat = plan::category(in.kind);
    if (cat == plan::kind_category::compute || cat == plan::kind_category::data)
        if (in.microbatch >= p.header.microbatches.size())
            reject(p, i, "micro-batch " + std::to_string(in.microbatch) + " is not in the micro-batch table");
    if (!plan::is_message(in.kind)) {
        if (cat != plan::kind_category::free && cat != plan::kind_category::clock && cat != plan::kind_category::overlap &&
            !h.has(in.kind))
            reject(p, i, "no handler is registered for this kind");
        return;
    }
    if (in.peer < 0 || std::size_t(in.peer) >= ranks || std::uint32_t(in.peer) == p.program.rank)
        reject(p, i, "peer " + std::to_string(in.peer) + " is not another rank of the " + std::to_string(ranks));
    if (plan::is_message_start(in.kind)) {
        const std::uint32_t slot = plan::category(in.kind) == plan::kind_category::send_start ? in.in : in.out;
        if (slot == plan::no_slot) reject(p, i, "a message start needs its buffer");
        if (in.bytes > p.program.buffers[slot].size_bytes)
            reject(p, i, std::to_string(in.bytes) + " bytes do not fit buffer " + std::to_string(slot) + " (" +
                             std::to_string(p.program.buffers[slot].size_bytes) + " bytes)");
    }
}

}  // namespace detail

/// The send rule transport T behaves as (plan/send_rule.hpp): T::sends when it declares one,
/// else grouped for a transport that groups starts (end_group), else buffered.
template <transport T>
[[nodiscard]] constexpr plan::send_rule send_rule_of() noexcept {
    if constexpr (requires { { T::sends } -> std::convertible_to<plan::send_rule>; }) return T::sends;
    else if constexpr (grouping_transport<T>) return plan::send_rule::grouped;
    else return plan::send_rule::buffered;
}

/// Checks what one rank needs to run its plan safely (the cross-rank rules are the plan tier's
/// validator's): format version and rank, a send rule that covers the transport's
/// (plan::covers: the plan was checked for deadlocks under it), every buffer inside the arena,
/// every slot, peer and micro-batch in range, message sizes within their buffers, a handler
/// for every non-message kind, and every message start waited for exactly once, after it
/// (plan::start_of_wait). Throws rejected_plan_error naming the rank, the instruction and the
/// rule; returns the request map.
[[nodiscard]] inline request_map check_rank_plan(const plan::rank_plan& p, std::size_t ranks, const handler_registry& handlers,
                                                 plan::send_rule transport_rule = plan::send_rule::buffered) {
    constexpr std::size_t whole = std::size_t(-1);
    if (p.header.version != plan::plan_format_version) detail::reject(p, whole, plan::version_problem(p.header.version));
    if (p.header.ranks() != ranks || p.program.rank >= ranks)
        detail::reject(p, whole, "the plan is for rank " + std::to_string(p.program.rank) + " of " +
                                     std::to_string(p.header.ranks()) + ", the transport has " + std::to_string(ranks));
    if (!plan::covers(p.header.sends, transport_rule))
        detail::reject(p, whole, "the plan was checked under send rule " + std::string(name_of(p.header.sends)) +
                                     ", this transport behaves as " + std::string(name_of(transport_rule)) +
                                     ": plan it for this transport (planner_options::sends)");
    detail::check_buffers(p);
    const auto& prog = p.program.instructions;
    std::size_t messages = 0;
    for (std::size_t i = 0; i < prog.size(); ++i) {
        detail::check_fields(p, i, ranks, handlers);
        messages += plan::is_message(prog[i].kind) ? 1 : 0;
    }
    request_map m;
    m.slot_of.assign(prog.size(), 0);
    if (messages == 0) return m;  // nothing to pair: a rank of one stage skips the pairing tables
    const plan::wait_pairing pairs = plan::start_of_wait(p.header, p.program);
    for (const auto& f : pairs.faults) {
        if (f.what == plan::pairing_fault::never_waited)
            detail::reject(p, whole, plan::kind_name(prog[f.index].kind) + " of micro-batch " + std::to_string(prog[f.index].microbatch) +
                                         ", stage " + std::to_string(prog[f.index].stage) + " is never waited for");
        detail::reject(p, f.index, f.what == plan::pairing_fault::started_again
                                       ? "starts a message that is still open (started, not yet waited for)"
                                       : "waits for a message that was not started (or was already waited for)");
    }
    for (std::size_t i = 0; i < prog.size(); ++i) {
        if (plan::is_message_start(prog[i].kind)) m.slot_of[i] = static_cast<std::uint32_t>(m.slots++);
        else if (plan::is_message_wait(prog[i].kind)) m.slot_of[i] = m.slot_of[pairs.start_of[i]];
    }
    return m;
}

struct executor_options {
    timeout_ms timeout{30000};  ///< longest wait for one message or collective
    bool validate = true;       ///< also run the plan tier's rank rules (plan::validate_rank)
    /// Fault injection (tests, `run-cpu --fail-at`): the rank fails just before this instruction
    /// index, as a rank whose op threw (the others end aborted); no_fault = never.
    std::size_t fail_before = no_fault;
    static constexpr std::size_t no_fault = static_cast<std::size_t>(-1);
};

/// Everything an executor checks before running a rank's plan: check_rank_plan (under the
/// transport's send rule), then the header rules (plan::validate_header: predictions,
/// micro-batch table, arena figures), with `full` all the plan tier's rank rules
/// (plan::validate_rank: buffer lifetimes, compute order, end of iteration). Throws
/// rejected_plan_error; returns the request map.
[[nodiscard]] inline request_map check_before_run(const plan::rank_plan& p, std::size_t ranks, const handler_registry& handlers,
                                                  bool full, plan::send_rule transport_rule = plan::send_rule::buffered) {
    request_map reqs = check_rank_plan(p, ranks, handlers, transport_rule);
    const plan::validation_report rep = full ? plan::validate_rank(p) : plan::validate_header(p);
    if (!rep.ok()) throw rejected_plan_error("rank " + std::to_string(p.program.rank) + ": invalid plan:\n" + rep.to_string());
    return reqs;
}

/// Runs rank plans on a transport, with the rank's buffers in memory M (see the file comment).
/// Reusable across iterations.
template <transport T, arena_memory M = arena>
class executor {
public:
    executor(T& t, handler_registry handlers, executor_options o = {}, M memory = M{})
        : t_(&t), handlers_(std::move(handlers)), o_(o), arena_(std::move(memory)) {}

    [[nodiscard]] const M& memory() const noexcept { return arena_; }
    [[nodiscard]] handler_registry& handlers() noexcept { return handlers_; }

    /// Checks the plan, then runs it (see the file comment for the errors it throws).
    void run(const plan::rank_plan& p) {
        if (p.program.rank != t_->rank())
            throw rejected_plan_error("rank " + std::to_string(t_->rank()) + ": was given the plan of rank " +
                                      std::to_string(p.program.rank));
        const request_map reqs = check_before_run(p, t_->ranks(), handlers_, o_.validate, send_rule_of<T>());
        arena_.resize(p.program.arena_bytes);
        requests_.assign(reqs.slots, typename T::request{});
        group_ = dp_group(p.header, p.program.rank);
        void* stream = nullptr;
        if constexpr (streaming_transport<T>) stream = t_->compute_stream();
        step_context::scatter_fn scatter = nullptr;
        if constexpr (scattering_transport<T>) scatter = &executor::scatter;
        step_context ctx(p, arena_.bytes().first(static_cast<std::size_t>(p.program.arena_bytes)), &executor::reduce,
                         this, stream, scatter);
        const auto& prog = p.program.instructions;
        stream_plan streams;
        if constexpr (grouping_transport<T>) streams = make_stream_plan(p.program);
        std::size_t i = 0;
        try {
            for (; i < prog.size(); ++i) {
                if (i == o_.fail_before) throw error("fault injected before this instruction");
                dispatch(prog[i], i, reqs.slot_of[i], ctx);
                if constexpr (grouping_transport<T>)
                    if (streams.ends_group(i)) t_->end_group();
            }
        } catch (const timeout_error&) {
            throw;  // no abort: the others fail on their own timeouts
        } catch (const aborted_error& e) {
            throw aborted_error("rank " + std::to_string(t_->rank()) + ": " + describe_instruction(prog[i], i) +
                                ": step aborted: " + e.what());
        } catch (const std::exception& e) {
            const std::string why = "rank " + std::to_string(t_->rank()) + ": " + describe_instruction(prog[i], i) +
                                    " failed: " + e.what();
            t_->abort(why);
            throw step_error(why);
        }
    }

private:
    void dispatch(const plan::instruction& in, std::size_t i, std::uint32_t req, step_context& ctx) {
        switch (plan::category(in.kind)) {
            case plan::kind_category::send_start:
                requests_[req] = t_->start_send(std::size_t(in.peer), message_tag(in),
                                                ctx.buffer(in.in).first(static_cast<std::size_t>(in.bytes)));
                return;
            case plan::kind_category::recv_start:
                requests_[req] = t_->start_recv(std::size_t(in.peer), message_tag(in),
                                                ctx.buffer(in.out).first(static_cast<std::size_t>(in.bytes)));
                return;
            case plan::kind_category::send_wait:
            case plan::kind_category::recv_wait:
                if (!t_->wait(requests_[req], o_.timeout))
                    throw timeout_error("rank " + std::to_string(t_->rank()) + ": " + describe_instruction(in, i) +
                                        " timed out after " + std::to_string(o_.timeout.count()) +
                                        " ms waiting for peer " + std::to_string(in.peer) + " (micro-batch " +
                                        std::to_string(in.microbatch) + ")");
                return;
            case plan::kind_category::free:
            case plan::kind_category::clock:
            case plan::kind_category::overlap:  // without a handler: the two parts run in order
                if (!handlers_.has(in.kind)) return;
                [[fallthrough]];
            default:
                ctx.set_index(i);
                handlers_[in.kind](in, ctx);
        }
    }

    static void reduce(void* self, typed_buffer values) {
        auto* e = static_cast<executor*>(self);
        e->t_->all_reduce(values, e->group_, e->o_.timeout);
    }
    static void scatter(void* self, typed_buffer in, typed_buffer out) {
        if constexpr (scattering_transport<T>) {
            auto* e = static_cast<executor*>(self);
            e->t_->reduce_scatter(in, out, e->group_, e->o_.timeout);
        }
    }

    T* t_;
    handler_registry handlers_;
    executor_options o_;
    M arena_;
    std::vector<typename T::request> requests_;
    std::vector<std::size_t> group_;
};

}  // namespace pipeplan::runtime
