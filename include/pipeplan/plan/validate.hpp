// pipeplan/plan/validate.hpp — checking an execution plan against the IR's semantics.
//
// validate(plan) reports every violation (up to a cap) as rank, instruction index, rule and
// message. Rules:
//   structure  known kinds; slots, micro-batches, stages and peers in range; compute ops on a
//              stage of their rank; shapes as in the micro-batch table, dtype as the plan's; messages to the rank holding the adjacent stage of the
//              same replica; buffers inside the arena
//   pairing    every *_start has exactly one later *_wait of the same message (same buffer,
//              bytes, shape, dtype), and no wait comes without its start
//   match      on every pair of ranks, the k-th message start on one side matches the k-th on
//              the other: send vs receive of the same kind, micro-batch, stage, shape, dtype and
//              bytes (same count on both sides)
//   deadlock   the programs, run under the header's send rule (deadlock.hpp: buffered, blocking
//              or grouped starts; reduce_gradients needs every rank of its data-parallel group
//              there), always finish
//   buffer     a buffer is written before it is read (a received buffer only after its wait),
//              holds the data the reader needs (activation or gradient of the right
//              micro-batch and stage), is written once, never touched after its free, not
//              freed while a send of it is in flight, freed exactly once (workspaces: used by
//              one op, never freed); no two live buffers overlap in the arena
//   compute    on each of its stages a rank runs, for each micro-batch of its replica, exactly
//              one forward and one backward after it, one backward_weight after an input_only
//              backward (none otherwise), at most one recompute, only of a checkpointed forward,
//              between them; stage 0 and the last stage load the micro-batch first
//   clock      a set_frequency immediately precedes a compute op of the same micro-batch and
//              stage, with a clock > 0 MHz (within validate_options' range when one is given)
//              and no bytes; no other kind carries a clock_mhz (files hold both in one field)
//   overlap    an overlap_f_b is followed by the forward of its micro-batch and stage (only a
//              set_frequency between), and the next compute instruction after that forward is
//              a backward of another micro-batch
//   reduce     reduce_gradients exactly once, after the rank's last backward(_weight), in the
//              mode the ZeRO stage asks for; then optimizer_step exactly once; nothing after
//   memory     where the header records the device memory the plan was made for (format 4
//              on): every rank's arena plus its model state fits it (rank_memory_mb(), plan.hpp)
//   header     the header's values make sense (each violation names its field): a known plan
//              version, a finite makespan >= 0, one finite peak >= 0 per rank, ZeRO stage 0..3,
//              replicas < dp; a device memory finite and >= 0 MB, and model states (when
//              listed) one finite value >= 0 MB per rank; a table that names samples names each sample 0..N-1 exactly once
//              and at least one per micro-batch; arena_bytes >= live_peak_bytes and <=
//              max_arena_bytes; for a whole plan of the current version, a stamped plan_id
//              equals plan_identity() (a version 1 or 2 file's identity hashed its own layout)
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/plan/deadlock.hpp"
#include "pipeplan/plan/fields.hpp"
#include "pipeplan/plan/identity.hpp"
#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/plan/messages.hpp"
#include "pipeplan/plan/plan.hpp"

namespace pipeplan::plan {

/// One broken rule.
struct violation {
    static constexpr std::uint32_t whole_program = 0xFFFFFFFFu;
    std::uint32_t rank = 0;
    std::uint32_t index = whole_program;  ///< instruction index, or whole_program
    std::string rule;  ///< structure, pairing, match, deadlock, buffer, compute, clock, overlap, reduce, memory, header
    std::string message;

    [[nodiscard]] std::string to_string() const {
        std::string s = "rank " + std::to_string(rank);
        if (index != whole_program) s += ", instruction " + std::to_string(index);
        return s + ": " + rule + ": " + message;
    }
};

struct validation_report {
    std::vector<violation> violations;
    bool truncated = false;  ///< more violations than max_violations
    [[nodiscard]] bool ok() const noexcept { return violations.empty(); }
    /// All violations, one per line.
    [[nodiscard]] std::string to_string() const {
        std::string s;
        for (const auto& v : violations) s += v.to_string() + "\n";
        if (truncated) s += "(more violations left out)\n";
        return s;
    }
};

struct validate_options {
    std::size_t max_violations = 64;
    /// When max > 0: set_frequency clocks must lie in [min, max] MHz (e.g. the range of the
    /// energy profile the plan was made for); otherwise any clock > 0.
    std::uint64_t min_frequency_mhz = 0, max_frequency_mhz = 0;
};

/// Thrown by validate_or_throw().
class plan_error : public error {
public:
    explicit plan_error(validation_report r) : error("invalid plan:\n" + r.to_string()), report_(std::move(r)) {}
    [[nodiscard]] const validation_report& report() const noexcept { return report_; }

private:
    validation_report report_;
};

/// Arenas above this size are refused: 1 PiB (2^50 bytes), more memory than any device has.
inline constexpr std::uint64_t max_arena_bytes = std::uint64_t(1) << 50;

namespace detail {

/// Collects violations up to the cap.
struct reporter {
    validation_report& out;
    std::size_t cap;
    std::size_t seen = 0;  ///< violations found, reported or not
    void operator()(std::uint32_t rank, std::uint32_t index, const char* rule, std::string msg) {
        ++seen;
        if (out.violations.size() >= cap) {
            out.truncated = true;
            return;
        }
        out.violations.push_back({rank, index, rule, std::move(msg)});
    }
};

using plan::describe;

/// What a buffer holds: activation / gradient / stash of (mb, stage).
struct content {
    enum tag_t : std::uint8_t { none, activation, gradient, stash, scratch } tag = none;
    std::uint32_t microbatch = 0, stage = 0;
    friend bool operator==(const content&, const content&) = default;
};

[[nodiscard]] inline std::string describe(const content& c) {
    static const char* names[] = {"nothing", "activation", "gradient", "stash", "scratch"};
    if (c.tag == content::none || c.tag == content::scratch) return names[c.tag];
    return std::string(names[c.tag]) + " of mb " + std::to_string(c.microbatch) + " stage " + std::to_string(c.stage);
}

/// The header's placement tabulated once per validation (a sound placement: placement_problem()).
struct placement_tables {
    /// [stage] the chunk of each stage on its device (its rank among the device's stages, lowest
    /// first); empty when the header has no map (one chunk: every chunk 0)
    std::vector<std::uint32_t> stage_chunk;
    /// the stages of device d, lowest first: held[first[d] .. first[d] + chunks) (empty without a map)
    std::vector<std::uint32_t> first, held;
    explicit placement_tables(const plan_header& h) : stage_chunk(h.stage_devices.size()) {
        if (h.stage_devices.empty()) return;
        first.assign(h.devices, 0);
        for (std::uint32_t v = 0; v < stage_chunk.size(); ++v) stage_chunk[v] = first[h.stage_devices[v]]++;
        std::uint32_t at = 0;
        for (std::uint32_t& f : first) at += std::exchange(f, at);
        held.resize(h.stage_devices.size());
        std::vector<std::uint32_t> fill(first);
        for (std::uint32_t v = 0; v < stage_chunk.size(); ++v) held[fill[h.stage_devices[v]]++] = v;
    }
};

/// Per-rank facts the checks share.
struct rank_view {
    const plan_header& h;
    const rank_program& p;
    const placement_tables& t;
    std::uint32_t rank, device, replica;
    rank_view(const plan_header& hh, const rank_program& pp, const placement_tables& tt)
        : h(hh), p(pp), t(tt), rank(pp.rank), device(hh.device_of_rank(pp.rank)), replica(hh.replica_of_rank(pp.rank)) {}
    [[nodiscard]] std::uint32_t device_of(std::uint32_t stage) const { return h.device_of_stage(stage); }
    [[nodiscard]] std::uint32_t chunk_of(std::uint32_t stage) const { return t.stage_chunk.empty() ? 0 : t.stage_chunk[stage]; }
    /// The stages of this rank's device, lowest first (one per chunk).
    [[nodiscard]] std::span<const std::uint32_t> held() const {
        if (t.held.empty()) return {&device, 1};
        return {t.held.data() + t.first[device], h.chunks};
    }
    [[nodiscard]] bool holds(std::uint32_t stage) const { return stage < h.virtual_stages() && device_of(stage) == device; }
    [[nodiscard]] std::uint32_t rank_of_stage(std::uint32_t stage) const { return replica * h.devices + device_of(stage); }
    /// Index of the compute unit (held stage, micro-batch j) among the rank's chunks x M units.
    [[nodiscard]] std::size_t unit_of(std::uint32_t stage, std::uint32_t j) const {
        return chunk_of(stage) * h.microbatches.size() + j;
    }
};

/// structure: ranges, devices and peers of one instruction.
inline void check_structure(const rank_view& rv, std::uint32_t i, reporter& rep) {
    const instruction& ins = rv.p.instructions[i];
    auto bad = [&](std::string m) { rep(rv.rank, i, "structure", describe(ins) + ": " + m); };
    if (is_unknown(ins.kind)) return bad("unknown instruction kind " + std::to_string(static_cast<unsigned>(ins.kind)));
    if (!is_builtin(ins.kind)) return;
    for (std::uint32_t s : {ins.in, ins.out, ins.stash, ins.work})
        if (s != no_slot && s >= rv.p.buffers.size())
            bad("slot " + std::to_string(s) + " out of range (" + std::to_string(rv.p.buffers.size()) + " buffers)");
    const bool local = is_compute(ins.kind) || ins.kind == instr_kind::load_microbatch || ins.kind == instr_kind::set_frequency ||
                       ins.kind == instr_kind::overlap_f_b;
    if (!local && !is_message(ins.kind)) return;
    if (ins.microbatch >= rv.h.microbatches.size())
        return bad("micro-batch out of range (the table has " + std::to_string(rv.h.microbatches.size()) + ")");
    if (rv.h.microbatches[ins.microbatch].replica != rv.replica) bad("micro-batch of replica " + std::to_string(rv.h.microbatches[ins.microbatch].replica));
    if (!(ins.shape == rv.h.microbatches[ins.microbatch].shape)) bad("shape differs from the micro-batch table's");
    if (ins.type != rv.h.type) bad("dtype differs from the plan's");
    if (ins.stage >= rv.h.virtual_stages()) return bad("stage out of range (" + std::to_string(rv.h.virtual_stages()) + " stages)");
    const std::uint32_t V = rv.h.virtual_stages();
    if (local) {
        if (!rv.holds(ins.stage)) bad("stage runs on device " + std::to_string(rv.device_of(ins.stage)));
        return;
    }
    const bool act = is_activation_message(ins.kind);
    const bool send = category(ins.kind) == kind_category::send_start || category(ins.kind) == kind_category::send_wait;
    if ((act && ins.stage + 1 >= V) || (!act && ins.stage == 0)) return bad("no adjacent stage to exchange with");
    const std::uint32_t other = act ? ins.stage + 1 : ins.stage - 1;
    const std::uint32_t mine = send ? ins.stage : other, theirs = send ? other : ins.stage;
    if (!rv.holds(mine)) bad("this rank does not hold stage " + std::to_string(mine));
    if (ins.peer < 0 || static_cast<std::uint32_t>(ins.peer) != rv.rank_of_stage(theirs))
        bad("peer should be rank " + std::to_string(rv.rank_of_stage(theirs)) + " (holding stage " + std::to_string(theirs) + ")");
    if (ins.peer >= 0 && static_cast<std::uint32_t>(ins.peer) == rv.rank) bad("message to itself");
}

/// What structure_ok() asks of a kind, by code: `user` (a user's kind: nothing), `unknown` (a
/// code neither built in nor a user's), `slots` (built-in frees, ends: slots in range), `local`
/// (compute, load, clock and overlap: slots, and on a stage of the rank) or `message`.
enum class structure_class : std::uint8_t { user, unknown, slots, local, message };
inline constexpr std::array<structure_class, 256> structure_class_by_code = [] {
    std::array<structure_class, 256> t{};
    for (std::size_t k = 0; k < t.size(); ++k) {
        const auto kind = static_cast<instr_kind>(k);
        const kind_category c = category(kind);
        t[k] = is_unknown(kind)                                         ? structure_class::unknown
               : !is_builtin(kind)                                      ? structure_class::user
               : c == kind_category::compute || kind == instr_kind::load_microbatch || kind == instr_kind::set_frequency ||
                       kind == instr_kind::overlap_f_b                  ? structure_class::local
               : is_message(kind)                                       ? structure_class::message
                                                                        : structure_class::slots;
    }
    return t;
}();

/// What structure_ok() compares every instruction of a rank with, read once per rank.
struct structure_limits {
    std::uint32_t slots;  ///< the buffer count (at most no_slot)
    std::uint32_t stages;  ///< virtual_stages()
    std::size_t microbatches;
    const microbatch_entry* table;
    std::uint32_t replica;
    dtype type;
    std::uint32_t rank, device;
    std::uint32_t first_rank;  ///< of the rank's replica (rank_of_stage() of a stage on device 0)
    const std::uint32_t* stage_devices;  ///< the header's map; nullptr without one (stage v on device v)
    /// [message_kind_index() * stages + stage] the one peer a message of that kind and stage
    /// may name (message_peer()), or no_peer_fits; empty when the stages outnumber the
    /// program's instructions (a header from a file may claim 2^30: nothing is tabulated then)
    std::vector<std::uint64_t> peer_of;
    static constexpr std::uint64_t no_peer_fits = std::uint64_t(1) << 32;  ///< no 32-bit peer equals it
    explicit structure_limits(const rank_view& rv)
        : slots(static_cast<std::uint32_t>(std::min<std::size_t>(rv.p.buffers.size(), no_slot))), stages(rv.h.virtual_stages()),
          microbatches(rv.h.microbatches.size()), table(rv.h.microbatches.data()), replica(rv.replica), type(rv.h.type),
          rank(rv.rank), device(rv.device), first_rank(rv.replica * rv.h.devices),
          stage_devices(rv.h.stage_devices.empty() ? nullptr : rv.h.stage_devices.data()) {
        if (stages > rv.p.instructions.size()) return;
        peer_of.resize(4 * std::size_t(stages));
        for (std::uint32_t m = 0; m < 4; ++m)
            for (std::uint32_t v = 0; v < stages; ++v)
                peer_of[m * std::size_t(stages) + v] = message_peer(static_cast<instr_kind>(4 + 2 * m), v);
    }
    /// rank_view::device_of() of a stage < stages.
    [[nodiscard]] std::uint32_t device_of(std::uint32_t stage) const { return stage_devices ? stage_devices[stage] : stage; }
    /// The peer a message of kind k on stage v < stages must name (check_structure()'s rules
    /// for messages: an adjacent stage, this rank holding its own side, not itself), or
    /// no_peer_fits.
    [[nodiscard]] std::uint64_t message_peer(instr_kind k, std::uint32_t v) const {
        const kind_category c = category(k);
        const bool act = is_activation_message(k);
        const bool send = c == kind_category::send_start || c == kind_category::send_wait;
        if ((act && v + 1 >= stages) || (!act && v == 0)) return no_peer_fits;
        const std::uint32_t other = act ? v + 1 : v - 1;
        const std::uint32_t mine = send ? v : other, theirs = send ? other : v;
        const std::uint32_t peer = first_rank + device_of(theirs);
        return device_of(mine) == device && peer != rank ? peer : no_peer_fits;
    }
};

/// a == b, as two 64-bit compares.
[[nodiscard]] inline bool same_shape(const tensor_shape& a, const tensor_shape& b) noexcept {
    static_assert(sizeof(tensor_shape) == 16, "four 32-bit fields, no padding");
    using halves = std::array<std::uint64_t, 2>;
    const auto x = std::bit_cast<halves>(a), y = std::bit_cast<halves>(b);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
}

/// Whether a slot of `ins` (in, out, stash, work) other than no_slot is >= n: s + 1 > n in 32
/// bits (no_slot + 1 = 0), the four at once.
[[nodiscard]] inline bool slots_out_of_range(const instruction& ins, std::uint32_t n) noexcept {
    static_assert(offsetof(instruction, work) == offsetof(instruction, in) + 3 * sizeof(std::uint32_t), "four adjacent slots");
    using lanes = std::uint32_t __attribute__((vector_size(16)));
    lanes s;
    std::memcpy(&s, &ins.in, sizeof s);
    const lanes out = (s + 1u) > n;  // all ones where out of range
    std::uint64_t half[2];
    std::memcpy(half, &out, sizeof half);
    return (half[0] | half[1]) != 0;
}

/// Whether check_structure() finds nothing wrong with instruction `ins` (the same tests,
/// without the messages: the common case of a sound plan costs no string work).
[[nodiscard]] inline bool structure_ok(const structure_limits& lim, const instruction& ins) {
    const structure_class sc = structure_class_by_code[static_cast<std::uint8_t>(ins.kind)];
    if (sc == structure_class::unknown) return false;
    if (sc == structure_class::user) return true;
    // a slot out of range: s >= n for s != no_slot, i.e. s + 1 > n in 32 bits (no_slot + 1 = 0)
    const std::uint32_t n = lim.slots;
    const bool slot_out = slots_out_of_range(ins, n);
    if (sc == structure_class::slots) return !slot_out;
    if (slot_out || ins.microbatch >= lim.microbatches) return false;
    const microbatch_entry& m = lim.table[ins.microbatch];
    const std::uint32_t V = lim.stages;
    if ((m.replica != lim.replica) | !same_shape(ins.shape, m.shape) | (ins.type != lim.type) | (ins.stage >= V)) return false;
    if (sc == structure_class::local) return lim.device_of(ins.stage) == lim.device;  // (rank_view::holds(), stage < V)
    const std::uint64_t want = lim.peer_of.empty() ? lim.message_peer(ins.kind, ins.stage)
                                                   : lim.peer_of[message_kind_index(ins.kind) * std::size_t(V) + ins.stage];
    return ins.peer >= 0 && static_cast<std::uint32_t>(ins.peer) == want;
}

/// clock: each set_frequency sets a clock in range for the compute op right after it.
inline void check_clocks(const rank_view& rv, const validate_options& opt, reporter& rep) {
    const auto& prog = rv.p.instructions;
    for (std::uint32_t i = 0; i < prog.size(); ++i) {
        const instruction& x = prog[i];
        // A file holds a set_frequency's clock in the bytes field (fields.hpp's held_in), so a
        // clock on another kind, or bytes on a set_frequency, would not survive a round trip.
        if (x.kind != instr_kind::set_frequency) {
            if (x.clock_mhz != 0)
                rep(rv.rank, i, "clock", describe(x) + ": clock_mhz " + std::to_string(x.clock_mhz) + " on an instruction that is not a set_frequency");
            continue;
        }
        if (x.bytes != 0) rep(rv.rank, i, "clock", describe(x) + ": bytes " + std::to_string(x.bytes) + " on a set_frequency (it carries clock_mhz only)");
        const std::uint64_t f = frequency_mhz(x);
        if (f == 0 || (opt.max_frequency_mhz > 0 && (f < opt.min_frequency_mhz || f > opt.max_frequency_mhz)))
            rep(rv.rank, i, "clock",
                describe(x) + ": clock outside " +
                    (opt.max_frequency_mhz > 0 ? "[" + std::to_string(opt.min_frequency_mhz) + ", " +
                                                     std::to_string(opt.max_frequency_mhz) + "] MHz"
                                               : std::string("(0, inf) MHz")));
        if (i + 1 >= prog.size() || !is_compute(prog[i + 1].kind) || prog[i + 1].microbatch != x.microbatch || prog[i + 1].stage != x.stage)
            rep(rv.rank, i, "clock", describe(x) + ": not immediately before a compute op of its micro-batch and stage");
    }
}

/// overlap: each overlap_f_b's parts are its forward, then the next compute op, a backward of
/// another micro-batch.
inline void check_overlaps(const rank_view& rv, reporter& rep) {
    const auto& prog = rv.p.instructions;
    // The index of the next compute instruction from j on (prog.size() when none).
    auto next_compute = [&](std::size_t j) {
        while (j < prog.size() && !is_compute(prog[j].kind)) ++j;
        return j;
    };
    for (std::uint32_t i = 0; i < prog.size(); ++i) {
        const instruction& x = prog[i];
        if (x.kind != instr_kind::overlap_f_b) continue;
        std::size_t f = i + 1;
        if (f < prog.size() && prog[f].kind == instr_kind::set_frequency) ++f;
        if (f >= prog.size() || prog[f].kind != instr_kind::forward || prog[f].microbatch != x.microbatch || prog[f].stage != x.stage) {
            rep(rv.rank, i, "overlap", describe(x) + ": not followed by the forward of its micro-batch and stage");
            continue;
        }
        const std::size_t b = next_compute(f + 1);
        if (b >= prog.size() || prog[b].kind != instr_kind::backward || prog[b].microbatch == x.microbatch)
            rep(rv.rank, i, "overlap", describe(x) + ": the compute op after its forward is not a backward of another micro-batch");
    }
}

inline void check_arena(const rank_view& rv, reporter& rep) {
    const std::uint64_t arena = rv.p.arena_bytes;  // (read once: a report may write memory)
    bool out = false;  // whether some buffer lies outside (no branch per buffer in the common case)
    for (const buffer& b : rv.p.buffers) out |= (b.size_bytes > arena) | (b.offset_bytes > arena - b.size_bytes);
    if (!out) return;
    for (std::size_t s = 0; s < rv.p.buffers.size(); ++s) {
        const buffer& b = rv.p.buffers[s];
        if (b.size_bytes > rv.p.arena_bytes || b.offset_bytes > rv.p.arena_bytes - b.size_bytes)
            rep(rv.rank, violation::whole_program, "structure",
                "buffer " + std::to_string(s) + " [" + std::to_string(b.offset_bytes) + ", +" + std::to_string(b.size_bytes) +
                    ") lies outside the arena of " + std::to_string(rv.p.arena_bytes) + " bytes");
    }
}

/// pairing: every start has exactly one later wait of the same message (start_of_wait(),
/// messages.hpp), naming the same buffer, bytes, shape and dtype; `messages` lists the
/// program's starts and waits, ascending (program_facts::messages). Leaves the pairing in `pairs`.
inline void check_pairing(const rank_view& rv, std::span<const std::uint32_t> messages, reporter& rep, wait_pairing& pairs) {
    pairs = start_of_wait(rv.p.instructions, rv.h.microbatches.size(), messages);
    const auto& prog = rv.p.instructions;
    static constexpr const char* what[] = {"started again before its wait", "waits for a message that was not started",
                                           "never waited for"};
    for (const wait_pairing::fault& f : pairs.faults)
        rep(rv.rank, f.index, "pairing", describe(prog[f.index]) + ": " + what[static_cast<std::size_t>(f.what)]);
    for (const std::uint32_t i : messages) {
        const std::uint32_t o = pairs.start_of[i];
        if (o == no_instruction) continue;
        const instruction &ins = prog[i], &st = prog[o];
        if (st.in != ins.in || st.out != ins.out)
            rep(rv.rank, i, "pairing", describe(ins) + ": names another buffer than its start");
        else if (st.bytes != ins.bytes || !same_shape(st.shape, ins.shape) || st.type != ins.type)
            rep(rv.rank, i, "pairing", describe(ins) + ": bytes, shape or dtype differ from its start");
    }
}

/// Per (mb, stage) facts gathered while walking a rank's program.
struct unit_state {
    std::int32_t fwd = -1, rec = -1, bwd = -1, wgt = -1;
    std::uint8_t nfwd = 0, nrec = 0, nbwd = 0, nwgt = 0;
    bool checkpoint = false, input_only = false, loaded = false;
};

/// The buffer walk: states, contents, lifetimes (rule "buffer").
struct buffer_walk {
    enum state_t : std::uint8_t { unborn, pending, ready, dead };
    const rank_view& rv;
    reporter& rep;
    std::vector<state_t> state;
    std::vector<content> holds;
    std::vector<std::uint32_t> in_flight, birth, death;
    std::vector<std::uint32_t> born;  ///< slots in the order of their birth in the walk: born[0 .. births)
    std::size_t births = 0;
    /// slots in the order of their frees: freed[0 .. frees) (then room for finish()'s live workspaces)
    std::vector<std::uint32_t> freed;
    std::size_t frees = 0;
    std::vector<char> is_work;

    buffer_walk(const rank_view& r, reporter& re)
        : rv(r), rep(re), state(r.p.buffers.size(), unborn), holds(r.p.buffers.size()),
          in_flight(r.p.buffers.size(), 0), birth(r.p.buffers.size(), 0), death(r.p.buffers.size(), 0),
          is_work(r.p.buffers.size(), 0) {
        born.resize(r.p.buffers.size());  // each slot is born at most once
        freed.resize(r.p.buffers.size());  // and freed (or used as a workspace) at most once
    }

    [[gnu::cold, gnu::noinline]] void bad(std::uint32_t i, const std::string& m) {
        rep(rv.rank, i, "buffer", describe(rv.p.instructions[i]) + ": " + m);
    }

    /// A read of `slot` expecting `want` (tag none: anything written). (The checks inline,
    /// the messages out of line: a sound plan costs no call.)
    [[gnu::always_inline]] void read(std::uint32_t i, std::uint32_t slot, content want, const char* what) {
        if (slot != no_slot && want.tag != content::none && state[slot] == ready && holds[slot] == want) return;
        if (slot != no_slot || want.tag != content::none) read_failed(i, slot, want, what);
    }
    [[gnu::cold, gnu::noinline]] void read_failed(std::uint32_t i, std::uint32_t slot, content want, const char* what) {
        if (slot == no_slot) return bad(i, std::string("reads no ") + what + " (needs the " + describe(want) + ")");
        if (want.tag == content::none) return bad(i, std::string("reads a ") + what + " buffer it should not have");
        const auto sl = [slot] { return "slot " + std::to_string(slot); };
        switch (state[slot]) {
            case unborn: return bad(i, sl() + " is read before it is written");
            case pending: return bad(i, sl() + " is read before its receive completed");
            case dead: return bad(i, sl() + " is read after its free");
            case ready: break;
        }
        bad(i, sl() + " holds the " + describe(holds[slot]) + ", needs the " + describe(want));
    }
    /// A write of `slot` with `c` (state becomes `to`).
    [[gnu::always_inline]] void write(std::uint32_t i, std::uint32_t slot, content c, state_t to) {
        if (slot == no_slot) return;
        if (state[slot] != unborn) return written_twice(i, slot);
        state[slot] = to;
        holds[slot] = c;
        birth[slot] = i;
        death[slot] = i;
        born[births++] = slot;
    }
    [[gnu::cold, gnu::noinline]] void written_twice(std::uint32_t i, std::uint32_t slot) {
        bad(i, "slot " + std::to_string(slot) + " is written twice");
    }
    void expect_slot(std::uint32_t i, std::uint32_t slot, bool wanted, const char* what) {
        if (wanted != (slot != no_slot)) slot_unexpected(i, wanted, what);
    }
    [[gnu::cold, gnu::noinline]] void slot_unexpected(std::uint32_t i, bool wanted, const char* what) {
        if (wanted) bad(i, std::string("writes no ") + what);
        else bad(i, std::string("writes a ") + what + " it should not");
    }
    [[gnu::always_inline]] void scratch(std::uint32_t i, std::uint32_t slot) {
        if (slot == no_slot) return;
        if (state[slot] != unborn) return bad(i, "workspace slot " + std::to_string(slot) + " used by two ops");
        state[slot] = dead;
        is_work[slot] = 1;
        birth[slot] = death[slot] = i;
        born[births++] = slot;
    }
    void free(std::uint32_t i, std::uint32_t slot) {
        if (slot != no_slot && state[slot] == ready && in_flight[slot] == 0) {
            state[slot] = dead;
            death[slot] = i;
            freed[frees++] = slot;
            return;
        }
        free_failed(i, slot);
    }
    [[gnu::cold, gnu::noinline]] void free_failed(std::uint32_t i, std::uint32_t slot) {
        if (slot == no_slot) return bad(i, "frees no slot");
        const auto sl = [slot] { return "slot " + std::to_string(slot); };
        if (state[slot] == unborn) return bad(i, sl() + " is freed before it is written");
        if (state[slot] == dead) return bad(i, sl() + (is_work[slot] ? " is a workspace (never freed)" : " is freed twice"));
        if (state[slot] == pending) return bad(i, sl() + " is freed before its receive completed");
        bad(i, sl() + " is freed while a send of it is in flight");
    }
    /// No two buffers live at the same time overlap in the arena; nothing leaks. The overlap
    /// rule: arena_disjoint() proves the common case (no two live buffers overlap) without
    /// reports; otherwise report_overlaps() finds and reports each overlap.
    void finish() {
        report_leaks();
        if (!arena_disjoint()) report_overlaps();
    }

    /// Reports the buffers still live at the end (they die there, for the overlap rule).
    void report_leaks() {
        const auto n = static_cast<std::uint32_t>(rv.p.instructions.size());
        for (std::uint32_t s = 0; s < state.size(); ++s) {
            if (state[s] == ready || state[s] == pending) {
                rep(rv.rank, birth[s], "buffer", "slot " + std::to_string(s) + " is never freed");
                death[s] = n;
            }
        }
    }

    /// Reports each buffer that overlaps one live at its birth (sweep_arena(), in the walk's
    /// order with the births of one instruction by slot).
    void report_overlaps() {
        born.resize(births);
        for (std::size_t k = 1; k < born.size(); ++k) {  // one instruction's few births by slot
            const std::uint32_t x = born[k];
            std::size_t j = k;
            for (; j > 0 && birth[born[j - 1]] == birth[x] && born[j - 1] > x; --j) born[j] = born[j - 1];
            born[j] = x;
        }
        sweep_arena();
    }

    /// Whether no two buffers (of size > 0) live at the same time overlap in the arena: each
    /// birth (in the walk's order) is compared with every live buffer, kept unordered (the
    /// live set is small); before the births of an instruction the buffers dead by then leave
    /// it: the freed ones in the order of their frees (`freed`), and the workspaces of the
    /// instruction before (a buffer lives from its birth to its death, both included).
    [[nodiscard]] bool arena_disjoint() {
        born.resize(births);
        const auto& buf = rv.p.buffers;
        struct span_t {
            std::uint64_t begin, end;
        };
        std::vector<span_t> live(born.size() + 1);
        std::vector<std::uint32_t> slot_at(born.size() + 1), at_slot(buf.size());  // live[k]'s slot; a live slot's k
        std::size_t n = 0;
        const auto drop = [&](std::uint32_t s) {  // (s must be live)
            const std::uint32_t k = at_slot[s];
            live[k] = live[--n];
            slot_at[k] = slot_at[n];
            at_slot[slot_at[k]] = k;
        };
        std::size_t next_free = 0, works = 0;  // freed[next_free ..) are not dropped yet;
        std::uint32_t* const work_live = freed.data() + frees;  // work_live[0 .. works): live workspaces
        std::uint32_t now = no_instruction;  // the instruction of the last birth
        for (const std::uint32_t s : born) {
            const buffer& b = buf[s];
            if (birth[s] != now) {
                now = birth[s];
                for (std::size_t k = 0; k < works; ++k) drop(work_live[k]);
                works = 0;
                for (; next_free < frees && death[freed[next_free]] < now; ++next_free)
                    if (buf[freed[next_free]].size_bytes != 0) drop(freed[next_free]);
            }
            if (b.size_bytes == 0) continue;
            const span_t e{b.offset_bytes, b.offset_bytes + b.size_bytes};
            for (std::size_t k = 0; k < n; ++k)
                if (e.begin < live[k].end && live[k].begin < e.end) return false;
            live[n] = e;
            slot_at[n] = s;
            at_slot[s] = static_cast<std::uint32_t>(n++);
            if (is_work[s]) work_live[works++] = s;
        }
        return true;
    }

private:
    /// finish()'s sweep where two live buffers overlap: in the walk's order (by instruction,
    /// the births of one instruction by slot) it keeps the live buffers sorted by offset (and
    /// disjoint: a buffer found overlapping is reported and left out), so each new buffer meets
    /// only its neighbours. The buffers that die before a birth are dropped together in one
    /// pass over the few live ones before that birth is checked (once the earliest death among
    /// them has passed).
    void sweep_arena() {
        struct span_t {
            std::uint64_t begin, end;
            std::uint32_t slot, death;
        };
        const auto& buf = rv.p.buffers;
        std::vector<span_t> spans(born.size() + 1);  // the live ones, by offset: active[0 .. n)
        span_t* const active = spans.data();
        std::size_t n = 0;  // (few: a linear scan beats a binary search)
        std::uint32_t next_death = UINT32_MAX;  // the earliest death among active[0 .. n)
        for (const std::uint32_t s : born) {
            const buffer& b = buf[s];
            if (b.size_bytes == 0) continue;
            if (birth[s] > next_death) {  // drop the buffers dead before s's birth
                next_death = UINT32_MAX;
                std::size_t kept = 0;
                for (std::size_t k = 0; k < n; ++k) {  // (compaction without branches)
                    const span_t q = active[k];
                    const bool alive = q.death >= birth[s];
                    active[kept] = q;
                    kept += alive;
                    next_death = std::min(next_death, alive ? q.death : UINT32_MAX);
                }
                n = kept;
            }
            // s's place: the live buffers at or above its offset move up one (from the top),
            // then its neighbours below and above are the only ones it can overlap
            const span_t e{b.offset_bytes, b.offset_bytes + b.size_bytes, s, death[s]};
            std::size_t at = n;
            for (; at > 0 && active[at - 1].begin >= e.begin; --at) active[at] = active[at - 1];
            const auto overlaps = [&](const span_t& q) { return e.begin < q.end && q.begin < e.end; };
            std::uint32_t hit = no_slot;
            if (at > 0 && overlaps(active[at - 1])) hit = active[at - 1].slot;
            else if (at < n && overlaps(active[at + 1])) hit = active[at + 1].slot;
            if (hit != no_slot) {
                for (std::size_t k = at; k < n; ++k) active[k] = active[k + 1];  // (back down: s is left out)
                rep(rv.rank, birth[s], "buffer", "slot " + std::to_string(s) + " overlaps live slot " + std::to_string(hit) + " in the arena");
                continue;
            }
            active[at] = e;
            ++n;
            next_death = std::min(next_death, death[s]);
        }
    }
};

/// The data a backward (or recompute / backward_weight) reads as its stash.
[[nodiscard]] inline content stash_wanted(const unit_state& u, std::uint32_t mb, std::uint32_t stage) {
    if (u.checkpoint && u.rec < 0) {
        if (stage == 0) return {};
        return {content::activation, mb, stage - 1};
    }
    return {content::stash, mb, stage};
}

/// compute, for a forward of stage 0 or the last whose micro-batch its own unit did not load:
/// the load may sit on the unit of the other end stage (one load per rank and micro-batch).
inline void check_loaded(const rank_view& rv, const std::vector<unit_state>& units, std::uint32_t i, reporter& rep) {
    const instruction& x = rv.p.instructions[i];
    const std::uint32_t end = x.stage == 0 ? rv.h.virtual_stages() - 1 : 0;
    if (!rv.holds(end) || !units[rv.unit_of(end, x.microbatch)].loaded)
        rep(rv.rank, i, "compute", describe(x) + ": micro-batch not loaded before");
}

/// The walk of walk_rank() (the buffer rule's states and the per-unit facts), before
/// buffer_walk::finish().
inline void walk_program(buffer_walk& w, std::vector<unit_state>& units) {
    const rank_view& rv = w.rv;
    reporter& rep = w.rep;
    const std::uint32_t V = rv.h.virtual_stages();
    const auto& prog = rv.p.instructions;
    for (std::uint32_t i = 0; i < prog.size(); ++i) {
        const instruction& x = prog[i];
        if (!is_builtin(x.kind)) continue;
        const std::uint32_t j = x.microbatch, v = x.stage;
        const auto unit = [&] { return &units[rv.unit_of(v, j)]; };  // (compute and load: v, j in range)
        const auto prev_act = [&] { return v == 0 ? content{} : content{content::activation, j, v - 1}; };
        switch (x.kind) {
            case instr_kind::forward: {
                unit_state* const u = unit();
                ++u->nfwd;
                u->fwd = static_cast<std::int32_t>(i);
                u->checkpoint = x.mode == static_cast<std::uint8_t>(forward_mode::checkpoint);
                if (x.mode > 1) w.bad(i, "unknown forward mode");
                w.read(i, x.in, prev_act(), "input activation");
                w.expect_slot(i, x.out, v + 1 < V, "output activation");
                w.expect_slot(i, x.stash, !u->checkpoint, "stash");
                w.write(i, x.out, {content::activation, j, v}, buffer_walk::ready);
                w.write(i, x.stash, {content::stash, j, v}, buffer_walk::ready);
                w.scratch(i, x.work);
                if ((v == 0 || v + 1 == V) && !u->loaded) check_loaded(rv, units, i, rep);
                break;
            }
            case instr_kind::recompute: {
                unit_state* const u = unit();
                ++u->nrec;
                u->rec = static_cast<std::int32_t>(i);
                w.read(i, x.in, prev_act(), "checkpoint");
                w.expect_slot(i, x.stash, true, "stash");
                w.write(i, x.stash, {content::stash, j, v}, buffer_walk::ready);
                w.scratch(i, x.work);
                break;
            }
            case instr_kind::backward: {
                unit_state* const u = unit();
                ++u->nbwd;
                u->bwd = static_cast<std::int32_t>(i);
                u->input_only = x.mode == static_cast<std::uint8_t>(backward_mode::input_only);
                if (x.mode > 1) w.bad(i, "unknown backward mode");
                w.read(i, x.in, v + 1 < V ? content{content::gradient, j, v + 1} : content{}, "output gradient");
                w.read(i, x.stash, stash_wanted(*u, j, v), "stash");
                w.expect_slot(i, x.out, v > 0, "input gradient");
                w.write(i, x.out, {content::gradient, j, v}, buffer_walk::ready);
                w.scratch(i, x.work);
                break;
            }
            case instr_kind::backward_weight: {
                unit_state* const u = unit();
                ++u->nwgt;
                u->wgt = static_cast<std::int32_t>(i);
                w.read(i, x.stash, stash_wanted(*u, j, v), "stash");
                w.scratch(i, x.work);
                break;
            }
            case instr_kind::send_activation_start:
            case instr_kind::send_grad_start:
                w.read(i, x.in, {is_activation_message(x.kind) ? content::activation : content::gradient, j, v}, "message");
                if (x.in != no_slot) ++w.in_flight[x.in];
                break;
            case instr_kind::send_activation_wait:
            case instr_kind::send_grad_wait:
                if (x.in != no_slot && w.in_flight[x.in] > 0) --w.in_flight[x.in];
                break;
            case instr_kind::recv_activation_start:
            case instr_kind::recv_grad_start:
                if (x.out == no_slot) w.bad(i, "receives into no buffer");
                w.write(i, x.out, {is_activation_message(x.kind) ? content::activation : content::gradient, j, v}, buffer_walk::pending);
                break;
            case instr_kind::recv_activation_wait:
            case instr_kind::recv_grad_wait:
                if (x.out != no_slot && w.state[x.out] == buffer_walk::pending) w.state[x.out] = buffer_walk::ready;
                break;
            case instr_kind::load_microbatch: unit()->loaded = true; break;
            case instr_kind::free: w.free(i, x.in); break;
            default: break;
        }
    }
}

/// Walks one rank's program: buffer rule and the per-unit facts for the compute rule.
inline void walk_rank(const rank_view& rv, reporter& rep, std::vector<unit_state>& units) {
    buffer_walk w(rv, rep);
    walk_program(w, units);
    w.finish();
}

/// compute: counts and order of each (mb, stage) the rank must run.
inline void check_units(const rank_view& rv, const std::vector<unit_state>& units, reporter& rep) {
    const std::size_t M = rv.h.microbatches.size();
    for (const std::uint32_t v : rv.held()) {  // the rank's stages, one per chunk
        for (std::uint32_t j = 0; j < M; ++j) {
            if (rv.h.microbatches[j].replica != rv.replica) continue;
            const unit_state& u = units[rv.unit_of(v, j)];
            const auto at = [](std::int32_t x) { return x < 0 ? violation::whole_program : static_cast<std::uint32_t>(x); };
            auto bad = [&](std::int32_t idx, const std::string& m) {
                rep(rv.rank, at(idx), "compute", "mb " + std::to_string(j) + " stage " + std::to_string(v) + ": " + m);
            };
            if (u.nfwd != 1) bad(u.fwd, std::to_string(u.nfwd) + " forwards (needs exactly 1)");
            if (u.nbwd != 1) bad(u.bwd, std::to_string(u.nbwd) + " backwards (needs exactly 1)");
            if (u.nfwd == 1 && u.nbwd == 1 && u.bwd < u.fwd) bad(u.bwd, "backward before its forward");
            if (u.input_only && u.nwgt != 1) bad(u.bwd, std::to_string(u.nwgt) + " backward_weights after an input-only backward (needs 1)");
            if (!u.input_only && u.nwgt != 0) bad(u.wgt, "backward_weight after a whole backward");
            if (u.nwgt == 1 && u.nbwd == 1 && u.wgt < u.bwd) bad(u.wgt, "backward_weight before its backward");
            if (u.nrec > 1) bad(u.rec, "recomputed twice");
            if (u.nrec == 1 && !u.checkpoint) bad(u.rec, "recompute of a forward that stored its activations");
            if (u.nrec == 1 && (u.rec < u.fwd || (u.bwd >= 0 && u.rec > u.bwd))) bad(u.rec, "recompute outside its forward..backward");
        }
    }
}

/// compute, before the per-unit walk: every (held stage, micro-batch of the replica) needs a
/// forward and a backward, so a program shorter than 2 x chunks x M cannot pass; one violation
/// says so (a header from a file may claim millions of chunks: the walk stays O(instructions)).
[[nodiscard]] inline bool enough_compute(const rank_view& rv, reporter& rep) {
    std::size_t m = 0;
    for (const microbatch_entry& e : rv.h.microbatches) m += e.replica == rv.replica;
    const std::size_t need = 2 * std::size_t(rv.h.chunks) * m;
    if (need <= rv.p.instructions.size()) return true;
    rep(rv.rank, violation::whole_program, "compute",
        "the header's " + std::to_string(rv.h.chunks) + " chunks x " + std::to_string(m) +
            " micro-batches need a forward and a backward each (" + std::to_string(need) + " instructions), the program has " +
            std::to_string(rv.p.instructions.size()));
    return false;
}

/// The predicted figures of the header (rule "header").
inline void check_predictions(const plan_header& h, std::uint32_t rank, reporter& rep) {
    const auto bad = [&](const std::string& field, const std::string& why) { rep(rank, violation::whole_program, "header", field + ": " + why); };
    if (h.version == 0 || h.version > plan_format_version)
        bad("header.version", std::to_string(h.version) + " is not a plan version this library knows (1.." +
                                  std::to_string(plan_format_version) + ")");
    if (!std::isfinite(h.predicted_makespan_ms) || h.predicted_makespan_ms < 0)
        bad("header.predicted_makespan_ms", std::to_string(h.predicted_makespan_ms) + " is not a time >= 0 ms");
    if (h.predicted_peak_memory_mb.size() != h.ranks())
        bad("header.predicted_peak_memory_mb", std::to_string(h.predicted_peak_memory_mb.size()) + " entries for " +
                                                   std::to_string(h.ranks()) + " ranks (one per rank)");
    for (std::size_t k = 0; k < h.predicted_peak_memory_mb.size(); ++k)
        if (const double x = h.predicted_peak_memory_mb[k]; !std::isfinite(x) || x < 0) {
            bad("header.predicted_peak_memory_mb[" + std::to_string(k) + "]", std::to_string(x) + " is not a size >= 0 MB");
            break;
        }
    if (h.zero_stage > 3) bad("header.zero_stage", std::to_string(h.zero_stage) + " is not a ZeRO stage (0..3)");
    if (!std::isfinite(h.device_memory_mb) || h.device_memory_mb < 0)
        bad("header.device_memory_mb", std::to_string(h.device_memory_mb) + " is not a size >= 0 MB");
    if (!h.model_state_mb.empty() && h.model_state_mb.size() != h.ranks())
        bad("header.model_state_mb", std::to_string(h.model_state_mb.size()) + " entries for " + std::to_string(h.ranks()) +
                                         " ranks (one per rank, or none)");
    for (std::size_t k = 0; k < h.model_state_mb.size(); ++k)
        if (const double x = h.model_state_mb[k]; !std::isfinite(x) || x < 0) {
            bad("header.model_state_mb[" + std::to_string(k) + "]", std::to_string(x) + " is not a size >= 0 MB");
            break;
        }
    if (h.device_memory_mb > 0 && h.model_state_mb.empty())
        bad("header.model_state_mb", "empty, but the header records a device memory of " + std::to_string(h.device_memory_mb) +
                                         " MB (the memory rule needs one model state per rank)");
}

/// `mb` with one decimal ("32649.5").
[[nodiscard]] inline std::string mb_text(double mb) {
    char text[400];  // the longest double in %.1f is 312 characters
    std::snprintf(text, sizeof text, "%.1f", mb);
    return text;
}

/// memory: the rank's arena plus its model state fits the device memory the header records.
inline void check_memory(const plan_header& h, const rank_program& p, reporter& rep) {
    if (!records_memory(h) || p.rank >= h.ranks()) return;
    const double need_mb = rank_memory_mb(h, p);
    if (need_mb <= h.device_memory_mb) return;
    rep(p.rank, violation::whole_program, "memory",
        "arena " + mb_text(static_cast<double>(p.arena_bytes) / 1e6) + " MB + model state " + mb_text(h.model_state_mb[p.rank]) +
            " MB = " + mb_text(need_mb) + " MB exceeds the device memory of " + mb_text(h.device_memory_mb) +
            " MB the plan was made for");
}

/// The micro-batch table (rule "header"): replicas in range; samples named once each.
inline void check_microbatch_table(const plan_header& h, std::uint32_t rank, reporter& rep) {
    const auto bad = [&](std::size_t j, const std::string& field, const std::string& why) {
        rep(rank, violation::whole_program, "header", "header.microbatches[" + std::to_string(j) + "]." + field + ": " + why);
    };
    std::size_t named = 0;
    for (std::size_t j = 0; j < h.microbatches.size(); ++j) {
        if (h.microbatches[j].replica >= h.dp)
            bad(j, "replica", std::to_string(h.microbatches[j].replica) + " is not a replica of dp " + std::to_string(h.dp));
        named += h.microbatches[j].sample_ids.size();
    }
    if (named == 0) return;  // a table without samples (a plan lowered by hand) names none
    std::vector<std::uint32_t> owner(named, 0xFFFFFFFFu);
    for (std::size_t j = 0; j < h.microbatches.size(); ++j) {
        const microbatch_entry& m = h.microbatches[j];
        if (m.sample_ids.empty()) bad(j, "sample_ids", "lists no samples (the table names " + std::to_string(named) + ")");
        for (const std::uint32_t id : m.sample_ids) {
            if (id >= named) {
                bad(j, "sample_ids", "sample id " + std::to_string(id) + " is out of range: the table names " +
                                         std::to_string(named) + " samples, ids 0.." + std::to_string(named - 1));
                return;
            }
            if (owner[id] != 0xFFFFFFFFu) {
                bad(j, "sample_ids", "sample " + std::to_string(id) + " is also in micro-batch " + std::to_string(owner[id]));
                return;
            }
            owner[id] = static_cast<std::uint32_t>(j);
        }
    }
}

/// The program's arena figures (rule "header").
inline void check_arena_figures(const rank_program& p, reporter& rep) {
    if (p.arena_bytes > max_arena_bytes)
        rep(p.rank, violation::whole_program, "header", "arena_bytes: " + std::to_string(p.arena_bytes) + " is more than " +
                                                            std::to_string(max_arena_bytes) + " (1 PiB)");
    if (p.live_peak_bytes > p.arena_bytes)
        rep(p.rank, violation::whole_program, "header", "live_peak_bytes: " + std::to_string(p.live_peak_bytes) +
                                                            " exceeds arena_bytes " + std::to_string(p.arena_bytes));
}

/// Every header rule (see the file comment) except the identity.
inline void check_header(const plan_header& h, std::uint32_t rank, reporter& rep) {
    check_predictions(h, rank, rep);
    check_microbatch_table(h, rank, rep);
}

/// What the structure pass (program_facts) notes of a kind, by code (bits).
enum fact_bit : std::uint8_t { fact_clock = 1, fact_overlap = 2, fact_end = 4, fact_work = 8, fact_bwd = 16, fact_message = 32 };
inline constexpr std::array<std::uint8_t, 256> fact_bits_by_code = [] {
    std::array<std::uint8_t, 256> t{};
    for (std::size_t code = 0; code < t.size(); ++code) {
        const auto k = static_cast<instr_kind>(code);
        t[code] = static_cast<std::uint8_t>(
            (k == instr_kind::set_frequency ? fact_clock : 0) | (k == instr_kind::overlap_f_b ? fact_overlap : 0) |
            (k == instr_kind::reduce_gradients || k == instr_kind::optimizer_step ? fact_end
             : is_compute(k) || is_message(k)                                      ? fact_work
                                                                                   : 0) |
            (k == instr_kind::backward || k == instr_kind::backward_weight ? fact_bwd : 0) |
            (is_message(k) ? fact_message : 0));
    }
    return t;
}();

/// What the structure pass notes of a program for the later rules: whether there is anything
/// for the clock and overlap rules to check, what the reduce rule reads (check_end()), and
/// the indices of the starts and waits, ascending (all the pairing and match rules read).
struct program_facts {
    bool clocks = false, overlaps = false;
    std::vector<std::uint32_t> ends;  ///< the reduce_gradients and optimizer_steps, in program order
    std::int64_t last_bwd = -1, last_work = -1;  ///< the last backward(_weight); the last compute op or message
    std::vector<std::uint32_t> messages;  ///< the starts and waits

    /// The structure pass: check_structure() of every instruction that is not structure_ok(),
    /// noting the facts on the way (in locals: one pass of a few instructions each).
    program_facts(const rank_view& rv, reporter& rep) : messages(rv.p.instructions.size()) {
        const structure_limits lim(rv);
        const auto& prog = rv.p.instructions;
        std::uint8_t seen = 0;  // the fact bits of every kind met
        std::uint64_t clock_bits = 0;  // the clock_mhz fields or'ed
        std::int64_t work = -1, bwd = -1;
        std::uint32_t* const listed = messages.data();
        std::size_t n = 0;
        for (std::uint32_t i = 0; i < prog.size(); ++i) {
            const instruction& x = prog[i];
            if (!structure_ok(lim, x)) check_structure(rv, i, rep);
            const std::uint8_t f = fact_bits_by_code[static_cast<std::uint8_t>(x.kind)];
            seen |= f;
            clock_bits |= x.clock_mhz;
            listed[n] = i;  // kept when x is a message
            n += (f & fact_message) != 0;
            if (!(f & (fact_end | fact_work))) continue;
            if (f & fact_end) ends.push_back(i);
            else {
                work = i;
                if (f & fact_bwd) bwd = i;
            }
        }
        messages.resize(n);
        clocks = (seen & fact_clock) != 0 || clock_bits != 0;
        overlaps = (seen & fact_overlap) != 0;
        last_work = work;
        last_bwd = bwd;
    }
};

/// reduce: one reduce_gradients after the last backward, then one optimizer_step, then
/// nothing (from the facts the structure pass noted).
inline void check_end(const rank_view& rv, const program_facts& facts, reporter& rep) {
    const auto& prog = rv.p.instructions;
    std::int64_t reduce = -1, step = -1;
    for (const std::uint32_t i : facts.ends) {
        if (prog[i].kind == instr_kind::reduce_gradients) {
            if (reduce >= 0) rep(rv.rank, i, "reduce", "reduce_gradients twice");
            reduce = i;
            const auto want = rv.h.zero_stage >= 2 ? reduce_mode::reduce_scatter : reduce_mode::all_reduce;
            if (prog[i].mode != static_cast<std::uint8_t>(want))
                rep(rv.rank, i, "reduce", std::string("reduce_gradients should be ") +
                                              (want == reduce_mode::reduce_scatter ? "reduce_scatter (ZeRO >= 2)" : "all_reduce"));
        } else {
            if (step >= 0) rep(rv.rank, i, "reduce", "optimizer_step twice");
            step = i;
            if (reduce < 0) rep(rv.rank, i, "reduce", "optimizer_step before reduce_gradients");
        }
    }
    if (reduce < 0) rep(rv.rank, violation::whole_program, "reduce", "no reduce_gradients");
    else if (facts.last_bwd > reduce) rep(rv.rank, static_cast<std::uint32_t>(facts.last_bwd), "reduce", "backward after reduce_gradients");
    else if (facts.last_work > reduce)
        rep(rv.rank, static_cast<std::uint32_t>(facts.last_work), "reduce", "compute or message after reduce_gradients");
    if (step < 0) rep(rv.rank, violation::whole_program, "reduce", "no optimizer_step");
}

/// Every rule that concerns one rank alone; leaves the rank's message pairing in `pairs` and
/// the indices of its starts and waits in `messages`.
inline void check_rank(const plan_header& h, const placement_tables& t, const rank_program& p, reporter& rep,
                       const validate_options& opt, wait_pairing& pairs, std::vector<std::uint32_t>& messages) {
    const rank_view rv(h, p, t);
    const std::size_t before = rep.seen;
    check_arena_figures(p, rep);
    program_facts facts(rv, rep);
    messages = std::move(facts.messages);
    check_arena(rv, rep);
    if (rep.seen != before) return;  // the walks below index with these fields
    if (facts.clocks) check_clocks(rv, opt, rep);
    if (facts.overlaps) check_overlaps(rv, rep);
    if (!enough_compute(rv, rep)) return;  // bounds chunks x M by the program's length
    check_pairing(rv, messages, rep, pairs);
    std::vector<unit_state> units(std::size_t(h.chunks) * h.microbatches.size());
    walk_rank(rv, rep, units);
    check_units(rv, units, rep);
    check_end(rv, facts, rep);
}

/// match: the k-th start on each side of every pair agree.
inline bool check_match(const execution_plan& plan, const message_sequence& px, reporter& rep) {
    const std::size_t before = rep.seen;
    const std::size_t R = plan.programs.size();
    for (std::uint32_t a = 0; a < R; ++a)
        for (std::uint32_t b = a + 1; b < R; ++b) {
            const auto la = px.starts(a, b);
            const auto lb = px.starts(b, a);
            const std::size_t n = std::min(la.size(), lb.size());
            for (std::size_t k = 0; k < n; ++k) {
                const instruction& x = plan.programs[a].instructions[la[k]];
                const instruction& y = plan.programs[b].instructions[lb[k]];
                std::string why;
                if (matching_start(x.kind) != y.kind) why = "kinds do not pair";
                else if (x.microbatch != y.microbatch || x.stage != y.stage) why = "micro-batch or stage differ";
                else if (!(x.shape == y.shape)) why = "shapes differ";
                else if (x.type != y.type) why = "dtypes differ";
                else if (x.bytes != y.bytes) why = "byte counts differ";
                if (!why.empty()) {
                    rep(a, la[k], "match", "message " + std::to_string(k) + " with rank " + std::to_string(b) + " (" +
                                               describe(x) + ") does not match rank " + std::to_string(b) +
                                               "'s instruction " + std::to_string(lb[k]) + " (" + describe(y) + "): " + why);
                    break;  // later ones are shifted: report the first per pair
                }
            }
            if (la.size() != lb.size()) {
                const bool a_more = la.size() > lb.size();
                const auto& more = a_more ? la : lb;
                rep(a_more ? a : b, more[n], "match",
                    "rank " + std::to_string(a_more ? a : b) + " starts " + std::to_string(more.size()) + " messages with rank " +
                        std::to_string(a_more ? b : a) + ", which starts " + std::to_string(n) + " with it");
            }
        }
    return rep.seen == before;
}

/// deadlock: runs the programs under the header's send rule (deadlock.hpp).
inline void check_deadlock(const execution_plan& plan, const std::vector<wait_pairing>& pairs, const message_sequence& seq,
                           reporter& rep) {
    const std::vector<blocked_rank> stuck = find_deadlock(plan, pairs, seq, plan.header.sends);
    std::vector<std::uint32_t> at(plan.programs.size(), no_instruction);
    for (const blocked_rank& b : stuck) at[b.rank] = b.index;
    for (const blocked_rank& b : stuck) {
        const instruction& x = plan.programs[b.rank].instructions[b.index];
        std::string why = x.kind == instr_kind::reduce_gradients ? "waits for its data-parallel group"
                                                                 : "waits for rank " + std::to_string(x.peer);
        if (is_message(x.kind) && at[static_cast<std::size_t>(x.peer)] != no_instruction) {
            const std::uint32_t q = static_cast<std::uint32_t>(x.peer);
            why += ", which is blocked at instruction " + std::to_string(at[q]) + " (" +
                   describe(plan.programs[q].instructions[at[q]]) + ")";
        }
        rep(b.rank, b.index, "deadlock", describe(x) + " " + why + " (send rule " + std::string(name_of(plan.header.sends)) + ")");
    }
}

/// The cross-rank rules (match, deadlock); `messages[r]` lists rank r's starts and waits.
inline void check_messages(const execution_plan& plan, const std::vector<wait_pairing>& pairs,
                           const std::vector<std::vector<std::uint32_t>>& messages, reporter& rep) {
    const message_sequence seq = pair_sequence(plan, messages);
    if (check_match(plan, seq, rep)) check_deadlock(plan, pairs, seq, rep);
}
}  // namespace detail

/// Checks every rule of the file comment; never throws on a malformed plan (a plan whose
/// header and programs disagree on the rank count is reported as a structure violation).
[[nodiscard]] inline validation_report validate(const execution_plan& plan, const validate_options& opt = {}) {
    validation_report out;
    detail::reporter rep{out, opt.max_violations};
    const plan_header& h = plan.header;
    if (h.devices == 0 || h.dp == 0 || h.chunks == 0 || plan.programs.size() != h.ranks()) {
        rep(0, violation::whole_program, "structure",
            "the header describes " + std::to_string(h.ranks()) + " ranks, the plan has " +
                std::to_string(plan.programs.size()) + " programs");
        return out;
    }
    if (const std::string why = placement_problem(h); !why.empty()) {
        rep(0, violation::whole_program, "structure", "placement: " + why);
        return out;
    }
    for (std::uint32_t r = 0; r < plan.programs.size(); ++r)
        if (plan.programs[r].rank != r) {
            rep(r, violation::whole_program, "structure", "program " + std::to_string(r) + " says it is rank " +
                                                              std::to_string(plan.programs[r].rank));
            return out;
        }
    const std::size_t before = rep.seen;
    const detail::placement_tables t(h);
    std::vector<wait_pairing> pairs(plan.programs.size());
    std::vector<std::vector<std::uint32_t>> messages(plan.programs.size());
    for (std::size_t r = 0; r < plan.programs.size(); ++r)
        detail::check_rank(h, t, plan.programs[r], rep, opt, pairs[r], messages[r]);
    const bool ranks_sound = rep.seen == before;
    for (const rank_program& p : plan.programs) detail::check_memory(h, p, rep);
    detail::check_header(h, 0, rep);
    if (h.plan_id != 0 && h.version == plan_format_version && h.plan_id != plan_identity(plan))
        rep(0, violation::whole_program, "header",
            "header.plan_id: " + plan_id_hex(h.plan_id) + " is not this plan's identity (" + plan_id_hex(plan_identity(plan)) +
                "): the header or a program was changed after the plan was stamped");
    // The cross-rank rules need sound local structure (matched starts and waits).
    if (ranks_sound) detail::check_messages(plan, pairs, messages, rep);
    return out;
}

/// validate(), throwing plan_error listing the violations when there are any.
inline void validate_or_throw(const execution_plan& plan, const validate_options& opt = {}) {
    validation_report r = validate(plan, opt);
    if (!r.ok()) throw plan_error(std::move(r));
}

/// The header rules alone for one rank's share (cheap: no walk of the program); executors run
/// them even when the full rank rules are switched off.
[[nodiscard]] inline validation_report validate_header(const rank_plan& rp, const validate_options& opt = {}) {
    validation_report out;
    detail::reporter rep{out, opt.max_violations};
    detail::check_header(rp.header, rp.program.rank, rep);
    detail::check_arena_figures(rp.program, rep);
    detail::check_memory(rp.header, rp.program, rep);
    return out;
}

/// Checks one rank's share alone: every rule that needs no other rank.
[[nodiscard]] inline validation_report validate_rank(const rank_plan& rp, const validate_options& opt = {}) {
    validation_report out;
    detail::reporter rep{out, opt.max_violations};
    if (rp.header.devices == 0 || rp.header.dp == 0 || rp.header.chunks == 0 || rp.program.rank >= rp.header.ranks()) {
        rep(rp.program.rank, violation::whole_program, "structure", "rank out of range of the header");
        return out;
    }
    if (const std::string why = placement_problem(rp.header); !why.empty()) {
        rep(rp.program.rank, violation::whole_program, "structure", "placement: " + why);
        return out;
    }
    wait_pairing pairs;
    std::vector<std::uint32_t> messages;
    detail::check_rank(rp.header, detail::placement_tables(rp.header), rp.program, rep, opt, pairs, messages);
    detail::check_header(rp.header, rp.program.rank, rep);
    detail::check_memory(rp.header, rp.program, rep);
    return out;
}

}  // namespace pipeplan::plan
