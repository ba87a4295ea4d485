// pipeplan/plan/instruction.hpp — the instruction IR of execution plans.
//
// An execution plan gives every rank (one pipeline device of one data-parallel replica) a flat
// program: a vector of `instruction`s, run strictly in order by an executor that calls the
// trainer's handler for each kind. Instructions are small trivially-copyable records; every
// field is a fixed-width integer so that the binary format (plan/serialize.hpp) stores them
// field by field, little-endian.
//
// Semantics (what an executor must implement, and what plan/validate.hpp checks)
// ------------------------------------------------------------------------------
// Buffers. Each rank owns one arena of `rank_program::arena_bytes` bytes. `rank_program::
// buffers[slot]` gives every buffer the rank uses an offset and a size inside that arena. An
// instruction names buffers by slot (index into that table) in four slot fields:
//   in     the buffer it reads   (forward: its input activation; backward: the gradient of its
//          output; send_*_start: the buffer sent; free: the buffer released),
//   out    the buffer it writes  (forward: its output activation, sent to the next stage;
//          backward: the gradient of its input; recv_*_start: the buffer received into),
//   stash  the activations a forward (or recompute) stores for the backward; backward and
//          backward_weight read it; a checkpointed forward stores nothing: its *input* buffer
//          stays live as the checkpoint until recompute/backward reads it again,
//   work   scratch memory the op may use while it runs (dead once it returns).
// `no_slot` marks an unused field. A buffer is live from the instruction that first writes it
// (a compute op's out/stash/work, or a recv_*_start) up to and including its `free`; the work
// buffer of an op lives only during that op and needs no `free`. Reading a buffer before it is
// written or after its free, and two live buffers overlapping in the arena, are errors.
//
// Communication. Each message is split in two: `*_start` posts a non-blocking send or receive
// of the `bytes` bytes of buffer `in` (send) or `out` (receive) to / from rank `peer`, and the
// matching `*_wait` blocks until that transfer has completed:
//   send_*_wait  returns when the data left the buffer (the buffer may then be freed or reused);
//                in the deadlock model it needs the peer to have posted the matching receive;
//   recv_*_wait  returns when the data is in the buffer (it may then be read); it needs the
//                peer to have posted the matching send.
// Messages between two ranks are matched in order: on every pair of ranks {a, b}, the sequence
// of message starts between them (both directions together) is the same in a's program and in
// b's program, and the k-th start on one side matches the k-th on the other (a send with a
// receive of equal kind, micro-batch, stage, shape, dtype and bytes). With that rule, ranks can
// post the pair's operations in program order on any transport (NCCL included) without
// deadlock; plan/lower.hpp documents how lowering builds such orders.
//   send_activation / recv_activation: the output activation of (mb, stage) travels from the
//       rank of `stage` to the rank of `stage + 1`; `stage` is the *producing* virtual stage.
//   send_grad / recv_grad: the gradient of the input of (mb, stage) travels from the rank of
//       `stage` to the rank of `stage - 1`; `stage` is the producing (later) virtual stage.
//
// Compute. forward(mb, stage, mode) runs the stage's forward on the micro-batch: mode
// `store` keeps the activations in `stash`; mode `checkpoint` runs without storing (no-grad)
// and the input buffer stays as the checkpoint. recompute(mb, stage) re-runs a checkpointed
// forward from its input and fills `stash`. backward(mb, stage, mode) computes the gradients:
// mode `whole` both input and weight gradients; mode `input_only` only the input gradient
// (PyTorch's "I"), the weight gradient then comes from backward_weight(mb, stage) ("W").
// A backward of a checkpointed forward with no recompute before it recomputes inline.
// Stage 0's forward reads the micro-batch that load_microbatch(mb) brought in (sample ids and
// shape in the plan's micro-batch table; the trainer's data handler owns that memory); the last
// stage's backward starts from the loss (no gradient buffer in).
//
// End of iteration. reduce_gradients (mode `all_reduce`, or `reduce_scatter` under ZeRO >= 2)
// reduces the rank's gradients over its data-parallel group (the ranks holding the same
// pipeline device in every replica) after its last backward / backward_weight; then
// optimizer_step applies the update.
//
// Clock. set_frequency(mb, stage) sets the rank's GPU clock to `clock_mhz` whole MHz (plan files
// keep it in the `bytes` field, see fields.hpp; make_set_frequency() builds one), for the compute op
// that follows it, which it must immediately precede and name (same mb and stage; shape and
// dtype as that op's); the clock holds until the next set_frequency. A rank without one runs
// at the device's default clock. plan/frequency.hpp inserts them from an energy frontier
// point (Perseus's per-computation frequencies), only where the clock changes. Executors call
// the trainer's handler for it when one is registered and skip it otherwise (the plan stays
// correct at any clock; only its time and energy change).
//
// Overlap. overlap_f_b(mb, stage) (PyTorch's OVERLAP_F_B) makes the two compute instructions
// after it one overlapped forward/backward op: its first part is the forward of (mb, stage)
// that follows it (only a set_frequency may stand between), its second the next compute
// instruction after that forward, a backward of another micro-batch on this rank; the message
// instructions the lowering orders between the two parts stay there. Running the parts in
// program order is always correct (executors without a handler for it do that); a trainer's
// handler may run them together (e.g. on two streams) once the instructions between them ran.
//
// Kinds are an open set: codes 0..127 are pipeplan's (the table in this file is the one place
// that names them; new built-in kinds get new codes, existing codes never change), codes
// 128..255 are free for users. Validation treats a user kind as an opaque no-op that touches
// no buffer and sends no message; serialization keeps it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "pipeplan/core/names.hpp"

namespace pipeplan::plan {

/// What an instruction does (see the file comment). The numeric codes are part of the binary
/// format and never change.
enum class instr_kind : std::uint8_t {
    forward = 0,
    recompute = 1,
    backward = 2,
    backward_weight = 3,
    send_activation_start = 4,
    send_activation_wait = 5,
    recv_activation_start = 6,
    recv_activation_wait = 7,
    send_grad_start = 8,
    send_grad_wait = 9,
    recv_grad_start = 10,
    recv_grad_wait = 11,
    load_microbatch = 12,
    free = 13,
    reduce_gradients = 14,
    optimizer_step = 15,
    set_frequency = 16,
    overlap_f_b = 17,
};

/// First code of the range left to users' own kinds.
inline constexpr std::uint8_t first_user_kind = 128;

/// forward's mode.
enum class forward_mode : std::uint8_t { store = 0, checkpoint = 1 };
/// backward's mode.
enum class backward_mode : std::uint8_t { whole = 0, input_only = 1 };
/// reduce_gradients' mode.
enum class reduce_mode : std::uint8_t { all_reduce = 0, reduce_scatter = 1 };

[[nodiscard]] constexpr auto enum_names(forward_mode) noexcept {
    return name_table<forward_mode, 2>{"forward mode", {{{forward_mode::store, "store"}, {forward_mode::checkpoint, "checkpoint"}}}};
}
[[nodiscard]] constexpr auto enum_names(backward_mode) noexcept {
    return name_table<backward_mode, 2>{"backward mode",
                                        {{{backward_mode::whole, "whole"}, {backward_mode::input_only, "input_only"}}}};
}
[[nodiscard]] constexpr auto enum_names(reduce_mode) noexcept {
    return name_table<reduce_mode, 2>{"reduce mode",
                                      {{{reduce_mode::all_reduce, "all_reduce"}, {reduce_mode::reduce_scatter, "reduce_scatter"}}}};
}

/// Element type of a message (fp64: the CPU backend's double-precision model; codes are stable,
/// new types are appended).
enum class dtype : std::uint8_t { fp32 = 0, fp16 = 1, bf16 = 2, fp8 = 3, fp64 = 4 };

[[nodiscard]] constexpr auto enum_names(dtype) noexcept {
    return name_table<dtype, 5>{"dtype",
                                {{{dtype::fp32, "fp32"}, {dtype::fp16, "fp16"}, {dtype::bf16, "bf16"}, {dtype::fp8, "fp8"},
                                  {dtype::fp64, "fp64"}}}};
}

[[nodiscard]] constexpr std::size_t dtype_bytes(dtype t) noexcept {
    switch (t) {
        case dtype::fp32: return 4;
        case dtype::fp16: return 2;
        case dtype::bf16: return 2;
        case dtype::fp8: return 1;
        case dtype::fp64: return 8;
    }
    return 0;
}
[[nodiscard]] constexpr std::string_view to_string(dtype t) noexcept { return name_of(t); }
[[nodiscard]] constexpr std::optional<dtype> parse_dtype(std::string_view s) noexcept { return find_name<dtype>(s); }
/// "fp32|fp16|bf16|fp8|fp64": the accepted names, for error messages.
[[nodiscard]] inline std::string dtype_choices() { return name_list<dtype>("|"); }

/// Shape of a micro-batch's activation tensor: [microbatch_size, seqlen (+ dec_seqlen), hidden].
/// dec_seqlen is 0 for decoder-only models.
struct tensor_shape {
    std::uint32_t microbatch_size = 0;
    std::uint32_t seqlen = 0;
    std::uint32_t dec_seqlen = 0;
    std::uint32_t hidden = 0;

    friend constexpr bool operator==(const tensor_shape&, const tensor_shape&) noexcept = default;
};

/// What a slot field holds when unused.
inline constexpr std::uint32_t no_slot = 0xFFFFFFFFu;
/// What `peer` holds when the instruction talks to nobody.
inline constexpr std::int32_t no_peer = -1;

/// One instruction (see the file comment for every field's meaning per kind).
struct instruction {
    instr_kind kind = instr_kind::forward;
    std::uint8_t mode = 0;              ///< forward_mode / backward_mode / reduce_mode; else 0
    dtype type = dtype::fp16;           ///< element type of messages
    std::uint8_t reserved = 0;          ///< 0 (kept for alignment and future flags)
    std::uint32_t microbatch = 0;       ///< micro-batch (index into the plan's micro-batch table)
    std::uint32_t stage = 0;            ///< virtual stage (for messages: the producing stage)
    std::int32_t peer = no_peer;        ///< peer rank of a message
    std::uint32_t in = no_slot;         ///< buffer read
    std::uint32_t out = no_slot;        ///< buffer written
    std::uint32_t stash = no_slot;      ///< stored activations (written by forward/recompute)
    std::uint32_t work = no_slot;       ///< scratch buffer while the op runs
    tensor_shape shape;                 ///< message / micro-batch shape
    std::uint64_t bytes = 0;            ///< message size in bytes; else 0
    std::uint64_t clock_mhz = 0;        ///< set_frequency: the GPU clock it sets (MHz); else 0

    friend constexpr bool operator==(const instruction&, const instruction&) noexcept = default;
};
static_assert(std::is_trivially_copyable_v<instruction>);
static_assert(std::is_standard_layout_v<instruction>);

/// Category of a kind: what the validator and the exporters do with it.
enum class kind_category : std::uint8_t {
    compute, send_start, send_wait, recv_start, recv_wait, data, free, end, user, clock,
    overlap  ///< overlap_f_b: joins the two compute instructions after it (the file comment)
};

/// The one table of built-in kinds: code, name (as JSON and plan-show spell it), category.
struct kind_info {
    instr_kind kind;
    std::string_view name;
    kind_category category;
};
inline constexpr std::array<kind_info, 18> builtin_kinds = {{
    {instr_kind::forward, "forward", kind_category::compute},
    {instr_kind::recompute, "recompute", kind_category::compute},
    {instr_kind::backward, "backward", kind_category::compute},
    {instr_kind::backward_weight, "backward_weight", kind_category::compute},
    {instr_kind::send_activation_start, "send_activation_start", kind_category::send_start},
    {instr_kind::send_activation_wait, "send_activation_wait", kind_category::send_wait},
    {instr_kind::recv_activation_start, "recv_activation_start", kind_category::recv_start},
    {instr_kind::recv_activation_wait, "recv_activation_wait", kind_category::recv_wait},
    {instr_kind::send_grad_start, "send_grad_start", kind_category::send_start},
    {instr_kind::send_grad_wait, "send_grad_wait", kind_category::send_wait},
    {instr_kind::recv_grad_start, "recv_grad_start", kind_category::recv_start},
    {instr_kind::recv_grad_wait, "recv_grad_wait", kind_category::recv_wait},
    {instr_kind::load_microbatch, "load_microbatch", kind_category::data},
    {instr_kind::free, "free", kind_category::free},
    {instr_kind::reduce_gradients, "reduce_gradients", kind_category::end},
    {instr_kind::optimizer_step, "optimizer_step", kind_category::end},
    {instr_kind::set_frequency, "set_frequency", kind_category::clock},
    {instr_kind::overlap_f_b, "overlap_f_b", kind_category::overlap},
}};

/// True for the codes of the built-in table.
[[nodiscard]] constexpr bool is_builtin(instr_kind k) noexcept {
    return static_cast<std::size_t>(k) < builtin_kinds.size();
}
/// True for codes that are neither built in nor in the user range (invalid in a plan).
[[nodiscard]] constexpr bool is_unknown(instr_kind k) noexcept {
    return !is_builtin(k) && static_cast<std::uint8_t>(k) < first_user_kind;
}
namespace detail {
/// builtin_kinds' categories by code (user and unknown codes: user): one load per lookup.
inline constexpr std::array<kind_category, 256> category_by_code = [] {
    std::array<kind_category, 256> t{};
    t.fill(kind_category::user);
    for (const kind_info& k : builtin_kinds) t[static_cast<std::size_t>(k.kind)] = k.category;
    return t;
}();
}  // namespace detail
[[nodiscard]] constexpr kind_category category(instr_kind k) noexcept {
    return detail::category_by_code[static_cast<std::uint8_t>(k)];
}
/// Name of a kind; user kinds are "user<code>".
[[nodiscard]] inline std::string kind_name(instr_kind k) {
    if (is_builtin(k)) return std::string(builtin_kinds[static_cast<std::size_t>(k)].name);
    return (is_unknown(k) ? "unknown<" : "user<") + std::to_string(static_cast<unsigned>(k)) + ">";
}
/// Parses a kind name (built-in names and "user<code>"); nullopt otherwise.
[[nodiscard]] inline std::optional<instr_kind> parse_kind(std::string_view s) {
    for (const auto& k : builtin_kinds)
        if (k.name == s) return k.kind;
    if (s.size() > 6 && s.substr(0, 5) == "user<" && s.back() == '>') {
        unsigned v = 0;
        for (char c : s.substr(5, s.size() - 6)) {
            if (c < '0' || c > '9' || v > 255) return std::nullopt;
            v = v * 10 + static_cast<unsigned>(c - '0');
        }
        if (v >= first_user_kind && v <= 255) return static_cast<instr_kind>(v);
    }
    return std::nullopt;
}

[[nodiscard]] constexpr bool is_compute(instr_kind k) noexcept { return category(k) == kind_category::compute; }
[[nodiscard]] constexpr bool is_message_start(instr_kind k) noexcept {
    const kind_category c = category(k);
    return c == kind_category::send_start || c == kind_category::recv_start;
}
[[nodiscard]] constexpr bool is_message_wait(instr_kind k) noexcept {
    const kind_category c = category(k);
    return c == kind_category::send_wait || c == kind_category::recv_wait;
}
[[nodiscard]] constexpr bool is_message(instr_kind k) noexcept {
    const kind_category c = category(k);
    return c == kind_category::send_start || c == kind_category::send_wait || c == kind_category::recv_start ||
           c == kind_category::recv_wait;
}
/// True for activation messages (false for gradient messages and non-messages).
[[nodiscard]] constexpr bool is_activation_message(instr_kind k) noexcept {
    return k == instr_kind::send_activation_start || k == instr_kind::send_activation_wait ||
           k == instr_kind::recv_activation_start || k == instr_kind::recv_activation_wait;
}
/// The clock a set_frequency asks for (MHz).
[[nodiscard]] constexpr std::uint64_t frequency_mhz(const instruction& x) noexcept { return x.clock_mhz; }
/// A set_frequency of `mhz` for compute op `op` (which must follow it immediately).
[[nodiscard]] constexpr instruction make_set_frequency(std::uint32_t mhz, const instruction& op) noexcept {
    instruction x;
    x.kind = instr_kind::set_frequency;
    x.type = op.type;
    x.microbatch = op.microbatch;
    x.stage = op.stage;
    x.shape = op.shape;
    x.clock_mhz = mhz;
    return x;
}

/// The name of `x`'s mode: forward "store" / "checkpoint", backward "whole" / "input_only",
/// reduce_gradients "all_reduce" / "reduce_scatter"; "" for the kinds without a mode; "?" for a
/// code outside its kind's table.
[[nodiscard]] constexpr std::string_view mode_name(const instruction& x) noexcept {
    switch (x.kind) {
        case instr_kind::forward: return name_of(static_cast<forward_mode>(x.mode));
        case instr_kind::backward: return name_of(static_cast<backward_mode>(x.mode));
        case instr_kind::reduce_gradients: return name_of(static_cast<reduce_mode>(x.mode));
        default: return "";
    }
}

/// The wait that completes a start (identity for non-starts).
[[nodiscard]] constexpr instr_kind wait_of(instr_kind start) noexcept {
    return is_message_start(start) ? static_cast<instr_kind>(static_cast<std::uint8_t>(start) + 1) : start;
}
/// The receive start that matches a send start, and vice versa.
[[nodiscard]] constexpr instr_kind matching_start(instr_kind start) noexcept {
    switch (start) {
        case instr_kind::send_activation_start: return instr_kind::recv_activation_start;
        case instr_kind::recv_activation_start: return instr_kind::send_activation_start;
        case instr_kind::send_grad_start: return instr_kind::recv_grad_start;
        case instr_kind::recv_grad_start: return instr_kind::send_grad_start;
        default: return start;
    }
}

}  // namespace pipeplan::plan
