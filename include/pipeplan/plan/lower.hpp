// pipeplan/plan/lower.hpp — lowering a pipeline schedule into per-rank instruction programs.
//
// Three pure passes (each usable and tested alone), then buffer planning (plan/buffers.hpp):
//
// 1. lower_compute(scenario, schedule): the compute instructions of every rank in the
//    schedule's order (F → forward/store, f → forward/checkpoint, R → recompute, B → backward
//    (input_only when the schedule splits the backward), W → backward_weight), each with the
//    op that produces its data input (the forward of the previous stage; the backward of the
//    next stage) and a global sequence number: a topological order of all compute ops that
//    respects every rank's program order (ranks advanced round-robin, each as far as its
//    inputs allow). A schedule whose orders cannot run (an op before one it needs) is
//    rejected here, naming the rank and op.
// 2.+3. insert_communication(compute, scenario, options): every data input produced on
//    another rank becomes a message (activation forward, gradient backward) and every buffer
//    a slot. Where:
//      send_*_start  right after the producing op (start early);
//      recv_*_start  as early as the pair rule below allows, but not before the receiver's
//                    last compute op that precedes the producer in the global order (posting
//                    earlier would only hold the receive buffer longer);
//      recv_*_wait   right before the consuming op (wait late);
//      send_*_wait   right before the sender's first compute op that follows the consumer in
//                    the global order (or at the end), then the buffer is freed.
//    The pair rule (deadlock freedom): on every pair of ranks, messages are ordered by the
//    global sequence number of their producing op, and both ranks post that pair's starts in
//    that order. Why it cannot deadlock: run the programs in the global order of their compute
//    ops; before compute op X runs, each wait in front of it is satisfied — a recv_wait's send
//    was started right after its producer, which precedes X's consumer-side use in the global
//    order; a send_wait sits after a compute op ordered after the consumer, whose receive was
//    started before the consumer. Starts never block. So the blocking-wait execution of the
//    programs always makes progress (validate() re-checks it by simulation). PyTorch's
//    pipelining and DynaPipe both had to patch orderings where a rank waited on a receive
//    whose matching send its peer had queued behind a send to it.
//    Also inserted: load_microbatch(mb) before the first forward of mb on the ranks of the
//    first and the last virtual stage (inputs and labels), and reduce_gradients and
//    optimizer_step at the end of every program.
//    An overlapped forward/backward pair of the schedule (schedule::op::overlaps_next) gets an
//    overlap_f_b right before its forward; the messages stay where the rules above put them.
// 4. plan_buffers(program) (plan/buffers.hpp): lifetimes, frees, arena offsets. lower() and
//    join_replicas() write each program from its last instruction to its first with the frees
//    in place (insert_communication_and_frees_into(): the programs of insert_communication()
//    then insert_frees(), without a second pass), then assign the offsets.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/parallel.hpp"
#include "pipeplan/plan/buffers.hpp"
#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/op_index.hpp"
#include "pipeplan/schedule/scenario.hpp"
#include "pipeplan/schedule/simulator.hpp"

namespace pipeplan::plan {

/// A reference to one compute op: rank and index in that rank's compute list.
struct op_ref {
    static constexpr std::uint32_t none = 0xFFFFFFFFu;
    std::uint32_t rank = none;
    std::uint32_t index = none;
    [[nodiscard]] bool valid() const noexcept { return rank != none; }
    friend bool operator==(const op_ref&, const op_ref&) noexcept = default;
};

/// Pass 1's result: per rank, the compute instructions in order, each op's data producer, and
/// the global sequence number of each op.
struct compute_programs {
    std::size_t stages = 0;
    std::size_t microbatches = 0;
    schedule::stage_placement placement;
    std::vector<std::vector<instruction>> ops;   ///< [rank][i]
    std::vector<std::vector<op_ref>> input_from;  ///< [rank][i] producer of the data input
    std::vector<std::vector<op_ref>> stash_from;  ///< [rank][i] forward/recompute whose activations it reads
    std::vector<std::vector<std::uint32_t>> seq;  ///< [rank][i] global sequence number
    /// [rank] the indices i of forwards that overlap the next compute op (schedule::op::overlaps_next)
    std::vector<std::vector<std::uint32_t>> overlap_heads;
};

/// Options of the lowering passes.
struct lowering_options {
    dtype type = dtype::fp16;
    std::vector<tensor_shape> shapes;  ///< per micro-batch shape (empty: zeros)
    reduce_mode reduce = reduce_mode::all_reduce;
    std::uint32_t rank_offset = 0;     ///< rank of device 0 (replica * devices)
    std::uint32_t microbatch_offset = 0;       ///< micro-batch table index of micro-batch 0
    send_rule sends = send_rule::buffered;  ///< recorded in the header (send_rule.hpp)
};

namespace detail {

/// `size_mb` in bytes, rounded half away from zero (std::llround's result, without its call in
/// the common range: the truncated value converts back exactly, so x - whole is exact).
[[nodiscard]] inline std::uint64_t bytes_from_mb(double size_mb) {
    if (!(size_mb > 0.0)) return 0;
    const double x = size_mb * 1e6;
    if (!(x < 0x1p62)) return static_cast<std::uint64_t>(std::llround(x));
    const auto whole = static_cast<std::int64_t>(x);
    return static_cast<std::uint64_t>(whole) + (x - static_cast<double>(whole) >= 0.5 ? 1 : 0);
}

[[nodiscard]] inline instruction compute_instruction(const schedule::op& o, bool split) {
    instruction ins;
    ins.microbatch = o.microbatch;
    ins.stage = o.stage;
    switch (o.kind) {
        case schedule::op_kind::F: ins.kind = instr_kind::forward; break;
        case schedule::op_kind::F_checkpoint:
            ins.kind = instr_kind::forward;
            ins.mode = static_cast<std::uint8_t>(forward_mode::checkpoint);
            break;
        case schedule::op_kind::R: ins.kind = instr_kind::recompute; break;
        case schedule::op_kind::B:
            ins.kind = instr_kind::backward;
            ins.mode = static_cast<std::uint8_t>(split ? backward_mode::input_only : backward_mode::whole);
            break;
        case schedule::op_kind::W: ins.kind = instr_kind::backward_weight; break;
    }
    return ins;
}

/// Fills cp.seq by advancing the ranks round-robin; throws when no rank can advance.
inline void sequence_ops(compute_programs& cp) {
    const std::size_t R = cp.ops.size();
    std::vector<std::vector<char>> done(R);
    std::vector<std::size_t> pos(R, 0);
    std::size_t total = 0, ran = 0;
    for (std::size_t r = 0; r < R; ++r) {
        done[r].assign(cp.ops[r].size(), 0);
        cp.seq[r].assign(cp.ops[r].size(), 0);
        total += cp.ops[r].size();
    }
    auto ready = [&](op_ref p) { return !p.valid() || done[p.rank][p.index]; };
    while (ran < total) {
        bool progress = false;
        for (std::size_t r = 0; r < R; ++r)
            while (pos[r] < cp.ops[r].size() && ready(cp.input_from[r][pos[r]]) && ready(cp.stash_from[r][pos[r]])) {
                done[r][pos[r]] = 1;
                cp.seq[r][pos[r]] = static_cast<std::uint32_t>(ran++);
                ++pos[r];
                progress = true;
            }
        if (progress) continue;
        for (std::size_t r = 0; r < R; ++r)
            if (pos[r] < cp.ops[r].size()) {
                const instruction& i = cp.ops[r][pos[r]];
                throw invalid_argument("lower: the schedule deadlocks: rank " + std::to_string(r) + " op " +
                                       std::to_string(pos[r]) + " (" + kind_name(i.kind) + " mb " +
                                       std::to_string(i.microbatch) + " stage " + std::to_string(i.stage) +
                                       ") waits for an op that never runs before it");
            }
    }
}

}  // namespace detail

/// Pass 1 (see the file comment). Throws pipeplan::invalid_argument when the schedule is
/// malformed for the scenario (missing / duplicated ops, wrong device) or cannot run.
[[nodiscard]] inline compute_programs lower_compute(const schedule::scenario& sc, const schedule::pipeline_schedule& s) {
    schedule::op_index idx;
    idx.build(sc, s);  // the simulator's checks: every op once, on its stage's device
    compute_programs cp;
    cp.stages = sc.stages;
    cp.microbatches = sc.microbatches;
    cp.placement = s.placement;
    const std::size_t R = s.placement.devices();
    const bool split = s.w_share > 0.0;
    cp.ops.resize(R);
    cp.input_from.resize(R);
    cp.stash_from.resize(R);
    cp.seq.resize(R);
    cp.overlap_heads.resize(R);
    for (std::size_t r = 0; r < R; ++r) {
        cp.ops[r].reserve(s.orders[r].size());
        cp.input_from[r].reserve(s.orders[r].size());
        cp.stash_from[r].reserve(s.orders[r].size());
    }
    std::vector<op_ref> ref_of(idx.ops.size());  // op id -> (rank, index)
    for (std::size_t r = 0; r < R; ++r)
        for (std::uint32_t id = idx.first_of_device[r]; id < idx.first_of_device[r + 1]; ++id)
            ref_of[id] = {static_cast<std::uint32_t>(r), id - idx.first_of_device[r]};
    auto ref = [&](std::int32_t id) { return id < 0 ? op_ref{} : ref_of[static_cast<std::size_t>(id)]; };
    for (std::size_t r = 0; r < R; ++r)
        for (const schedule::op& o : s.orders[r]) {  // producers by timing.hpp's data flow
            if (o.overlaps_next) cp.overlap_heads[r].push_back(static_cast<std::uint32_t>(cp.ops[r].size()));
            cp.ops[r].push_back(detail::compute_instruction(o, split));
            cp.input_from[r].push_back(ref(idx.cross_producer_of(o)));
            cp.stash_from[r].push_back(ref(idx.local_producer_of(o)));
        }
    detail::sequence_ops(cp);
    return cp;
}

namespace detail {

/// One message between two ranks (pass 2).
struct message {
    bool activation = true;
    op_ref producer, consumer;
    std::uint64_t bytes = 0;
    std::uint32_t slot_send = no_slot, slot_recv = no_slot;
    std::uint32_t recv_anchor = 0;  ///< recv_start goes after this many compute ops
    std::uint32_t send_anchor = 0;  ///< send_wait goes before compute op with this index
};

/// Where an inserted instruction goes: before compute op `before` (ops.size() = the end),
/// ordered by `phase` then `key`.
/// (Small, so that sorting moves little: the instruction is built when the program is.)
struct placed {
    enum what_t : std::uint8_t { send_start, recv_start, recv_wait, send_wait, load };
    std::uint32_t before = 0;
    std::uint8_t phase = 0;  // 0 send starts (after the previous op), 1 recv starts, 2 waits, 3 loads
    what_t what = send_start;
    std::uint64_t key = 0;   // the message's index; a load's micro-batch
};

/// The buffers and slots of one rank while pass 2 builds them (into the program's table).
struct slot_table {
    std::vector<buffer>* buffers = nullptr;
    std::uint32_t add(buffer_role role, std::uint32_t mb, std::uint32_t stage, std::uint64_t bytes) {
        buffer b;
        b.role = role;
        b.microbatch = mb;
        b.stage = stage;
        b.size_bytes = bytes;
        buffers->push_back(b);
        return static_cast<std::uint32_t>(buffers->size() - 1);
    }
};

/// Assigns each compute op's slots (in, out, stash, work) and creates the messages.
struct slot_builder {
    const compute_programs& cp;
    const schedule::scenario& sc;
    std::vector<std::vector<instruction>> ops;  // copies of cp.ops with slots filled
    std::vector<slot_table> tables;
    std::vector<message> messages;

    /// The buffer tables are written into `progs` (one per rank, cleared first).
    slot_builder(const compute_programs& c, const schedule::scenario& s, std::vector<rank_program>& progs)
        : cp(c), sc(s), ops(c.ops), tables(c.ops.size()) {
        for (std::size_t r = 0; r < tables.size(); ++r) {
            progs[r].buffers.clear();
            tables[r].buffers = &progs[r].buffers;
        }
    }

    void run() {
        // Producers run before consumers in the global order: assign in that order.
        // (the sequence numbers are a permutation of 0 .. ops - 1)
        std::size_t total = 0;
        for (const auto& v : ops) total += v.size();
        std::vector<op_ref> order(total);
        for (std::uint32_t r = 0; r < ops.size(); ++r)
            for (std::uint32_t i = 0; i < ops[r].size(); ++i) order[cp.seq[r][i]] = {r, i};
        for (std::size_t r = 0; r < ops.size(); ++r) {
            std::size_t n = 0;  // each compute op adds at most 4 buffers
            for (const instruction& x : ops[r]) n += x.kind == instr_kind::backward_weight ? 1 : 4;
            tables[r].buffers->reserve(n);
        }
        for (op_ref o : order) assign(o);
    }

private:
    instruction& at(op_ref o) { return ops[o.rank][o.index]; }

    void assign(op_ref o) {
        instruction& ins = at(o);
        slot_table& t = tables[o.rank];
        const std::size_t j = ins.microbatch, v = ins.stage, V = cp.stages;
        const bool fwd = ins.kind == instr_kind::forward;
        const bool bwd = ins.kind == instr_kind::backward;
        if (fwd || bwd) ins.in = input_slot(o, fwd);
        if (fwd && v + 1 < V) ins.out = t.add(buffer_role::activation_out, ins.microbatch, ins.stage, bytes_from_mb(sc.activation(j)));
        if (bwd && v > 0) ins.out = t.add(buffer_role::grad_out, ins.microbatch, ins.stage, bytes_from_mb(sc.activation(j)));
        const bool stores = (fwd && ins.mode == static_cast<std::uint8_t>(forward_mode::store)) ||
                            ins.kind == instr_kind::recompute;
        if (stores) ins.stash = t.add(buffer_role::stash, ins.microbatch, ins.stage, bytes_from_mb(sc.stored(j, v)));
        const op_ref st = cp.stash_from[o.rank][o.index];
        if (st.valid()) {
            const instruction& src = at(st);
            // A backward of a checkpointed forward reads the checkpoint (that forward's input).
            const bool checkpoint = src.kind == instr_kind::forward && src.mode != 0;
            if (ins.kind == instr_kind::recompute) ins.in = src.in;
            else ins.stash = checkpoint ? src.in : src.stash;
        }
        if (ins.kind != instr_kind::backward_weight) {
            const double excess = sc.peak(j, v) - sc.stored(j, v);
            if (excess > 0.0) ins.work = t.add(buffer_role::workspace, ins.microbatch, ins.stage, bytes_from_mb(excess));
        }
    }

    /// The `in` slot of a forward (activation) or backward (gradient): the producer's `out` on
    /// the same rank, else a receive buffer fed by a new message.
    std::uint32_t input_slot(op_ref o, bool fwd) {
        const op_ref p = cp.input_from[o.rank][o.index];
        if (!p.valid()) return no_slot;
        if (p.rank == o.rank) return at(p).out;
        const instruction& ins = at(o);
        message m;
        m.activation = fwd;
        m.producer = p;
        m.consumer = o;
        m.bytes = bytes_from_mb(sc.activation(ins.microbatch));
        m.slot_send = at(p).out;
        m.slot_recv = tables[o.rank].add(fwd ? buffer_role::activation_in : buffer_role::grad_in, ins.microbatch,
                                         at(p).stage, m.bytes);
        messages.push_back(m);
        return m.slot_recv;
    }
};

}  // namespace detail

/// Pass 2 + 3 (see the file comment): compute programs → full programs with messages, data
/// loads, the end-of-iteration instructions and a buffer table (sizes, no offsets, no frees).
[[nodiscard]] std::vector<rank_program> insert_communication(const compute_programs& cp, const schedule::scenario& sc,
                                                             const lowering_options& opt = {});
/// insert_communication() into `progs` (resized to the ranks), reusing their vectors' memory.
void insert_communication_into(std::vector<rank_program>& progs, const compute_programs& cp, const schedule::scenario& sc,
                               const lowering_options& opt = {});

namespace detail {

/// Stable counting sort of `v` by key(x) < `keys` (linear: the keys are sequence numbers or
/// instruction indices).
template <class T, class Key>
void counting_sort(std::vector<T>& v, std::size_t keys, Key&& key) {
    std::vector<std::uint32_t> start(keys + 1, 0);
    for (const T& x : v) ++start[key(x) + 1];
    for (std::size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
    std::vector<T> out(v.size());
    for (const T& x : v) out[start[key(x)]++] = x;
    v.swap(out);
}

/// The first index k in [0, s.size()] with !before(s[k]) (`before` holds on a prefix of the sorted
/// `s`: std::partition_point's result), searched outward from `hint` — exponential steps,
/// then a binary search — in O(log |result - hint|).
template <class Before>
[[nodiscard]] std::uint32_t partition_point_near(const std::vector<std::uint32_t>& s, std::uint32_t hint, Before&& before) {
    const auto n = static_cast<std::uint32_t>(s.size());
    const std::uint32_t* const v = s.data();
    std::uint32_t lo = 0, hi = 0, step = 1;
    if (hint < n && before(v[hint])) {  // the result lies above hint
        lo = hint + 1;
        while (lo + step <= n && before(v[lo + step - 1])) lo += step, step *= 2;
        hi = std::min(n, lo + step - 1);
    } else {  // at or below hint
        hi = std::min(hint, n);
        while (hi >= step && !before(v[hi - step])) hi -= step, step *= 2;
        lo = hi >= step ? hi - step + 1 : 0;
    }
    return static_cast<std::uint32_t>(std::partition_point(v + lo, v + hi, before) - v);
}

inline void order_messages(const compute_programs& cp, std::vector<message>& msgs) {
    const auto key = [&](const message& m) { return cp.seq[m.producer.rank][m.producer.index]; };
    std::size_t total = 0;  // the sequence numbers are 0 .. ops - 1
    for (const auto& v : cp.ops) total += v.size();
    counting_sort(msgs, total, key);
    const std::size_t R = cp.ops.size();
    // anchor of the last start on each rank pair, as seen by each side; the last search's
    // results on each pair (the next one's hints: the anchors of a pair's messages, in order,
    // move little)
    std::vector<std::uint32_t> last_anchor(R * R, 0), recv_hint(R * R, 0), send_hint(R * R, 0);
    for (message& m : msgs) {
        const std::uint32_t a = m.producer.rank, b = m.consumer.rank;
        const std::uint32_t sp = cp.seq[a][m.producer.index];
        // receiver's compute ops with seq < sp form a prefix (seq increases along a program)
        const std::size_t ab = std::size_t(a) * R + b, ba = std::size_t(b) * R + a;
        const std::uint32_t prefix = recv_hint[ab] = partition_point_near(cp.seq[b], recv_hint[ab], [sp](std::uint32_t x) { return x < sp; });
        m.recv_anchor = std::max(prefix, last_anchor[ba]);
        last_anchor[ba] = m.recv_anchor;
        last_anchor[ab] = std::max(last_anchor[ab], m.producer.index + 1);
        const std::uint32_t sc_ = cp.seq[b][m.consumer.index];
        m.send_anchor = send_hint[ab] = partition_point_near(cp.seq[a], send_hint[ab], [sc_](std::uint32_t x) { return x <= sc_; });
    }
}

/// Writes into `ins` the send (or receive) start (or wait) of message m.
inline void write_message(instruction& ins, const compute_programs& cp, const message& m, bool send, bool start,
                          const lowering_options& opt) {
    const instruction& p = cp.ops[m.producer.rank][m.producer.index];
    ins = instruction{};
    const instr_kind base = m.activation ? (send ? instr_kind::send_activation_start : instr_kind::recv_activation_start)
                                         : (send ? instr_kind::send_grad_start : instr_kind::recv_grad_start);
    ins.kind = start ? base : wait_of(base);
    ins.type = opt.type;
    ins.microbatch = p.microbatch;
    ins.stage = p.stage;
    ins.peer = static_cast<std::int32_t>((send ? m.consumer.rank : m.producer.rank) + opt.rank_offset);
    if (send) ins.in = m.slot_send;
    else ins.out = m.slot_recv;
    ins.bytes = m.bytes;
    if (p.microbatch < opt.shapes.size()) ins.shape = opt.shapes[p.microbatch];
}

/// Calls visit(rank, x) for every inserted (non-compute) instruction x, phase by phase, each
/// in message order: every rank's calls come in (phase, key) order.
template <class Visit>
void each_inserted(const compute_programs& cp, const std::vector<message>& msgs, std::vector<char>& loaded, Visit&& visit) {
    for (std::size_t k = 0; k < msgs.size(); ++k) visit(msgs[k].producer.rank, placed{msgs[k].producer.index + 1, 0, placed::send_start, k});
    for (std::size_t k = 0; k < msgs.size(); ++k) visit(msgs[k].consumer.rank, placed{msgs[k].recv_anchor, 1, placed::recv_start, k});
    for (std::size_t k = 0; k < msgs.size(); ++k) {  // (a message's two waits are on two ranks)
        const message& m = msgs[k];
        visit(m.consumer.rank, placed{m.consumer.index, 2, placed::recv_wait, k});
        visit(m.producer.rank, placed{m.send_anchor, 2, placed::send_wait, k});
    }
    // load_microbatch before the first forward of each micro-batch on the first / last stage's rank
    const std::size_t V = cp.stages;
    for (std::uint32_t r = 0; r < cp.ops.size(); ++r) {
        loaded.assign(cp.microbatches, 0);
        for (std::uint32_t i = 0; i < cp.ops[r].size(); ++i) {
            const instruction& c = cp.ops[r][i];
            if (c.kind != instr_kind::forward || (c.stage != 0 && c.stage + 1 != V) || loaded[c.microbatch]) continue;
            loaded[c.microbatch] = 1;
            visit(r, placed{i, 3, placed::load, c.microbatch});
        }
    }
}

/// The non-compute instructions of every rank with their positions, by (before, phase, key):
/// each_inserted()'s order, bucketed by `before` (unique per rank, see above).
inline std::vector<std::vector<placed>> place_instructions(const compute_programs& cp, const std::vector<message>& msgs) {
    const std::size_t R = cp.ops.size();
    std::vector<std::vector<std::uint32_t>> start(R);  // [rank][before + 1]: counts, then first places
    for (std::size_t r = 0; r < R; ++r) start[r].assign(cp.ops[r].size() + 2, 0);
    std::vector<char> loaded;
    each_inserted(cp, msgs, loaded, [&](std::uint32_t r, const placed& x) { ++start[r][x.before + 1]; });
    std::vector<std::vector<placed>> out(R);
    for (std::size_t r = 0; r < R; ++r) {
        std::vector<std::uint32_t>& st = start[r];
        for (std::size_t k = 1; k < st.size(); ++k) st[k] += st[k - 1];
        out[r].resize(st.back());
    }
    each_inserted(cp, msgs, loaded, [&](std::uint32_t r, const placed& x) { out[r][start[r][x.before]++] = x; });
    return out;
}

}  // namespace detail

namespace detail {

/// Writes into `ins` the inserted instruction x of rank r.
inline void write_placed(instruction& ins, const compute_programs& cp, const std::vector<message>& msgs, const placed& x,
                         std::size_t r, const lowering_options& opt) {
    if (x.what != placed::load) {
        write_message(ins, cp, msgs[x.key], x.what == placed::send_start || x.what == placed::send_wait,
                      x.what == placed::send_start || x.what == placed::recv_start, opt);
        return;
    }
    ins = instruction{};  // before the first forward of micro-batch x.key on this rank
    ins.kind = instr_kind::load_microbatch;
    ins.microbatch = static_cast<std::uint32_t>(x.key);
    ins.stage = cp.ops[r][x.before].stage;
    ins.type = opt.type;
    if (ins.microbatch < opt.shapes.size()) ins.shape = opt.shapes[ins.microbatch];
}

}  // namespace detail

namespace detail {

/// Rank r's program (its compute ops `ops` with slots, the inserted instructions `at` by
/// place, the overlap_f_b heads, reduce_gradients and optimizer_step), written from the last
/// instruction to the first: place(in, out, stash, work) gives the place of the next one (which
/// names those slots), filled here. Every instruction's micro-batch is moved by
/// opt.microbatch_offset. They are program_size() instructions; the buffers' micro-batches are
/// moved already (communicate()).
template <class Place>
void emit_backward(const compute_programs& cp, const slot_builder& sb, const std::vector<placed>& at, std::size_t r,
                   const lowering_options& opt, Place&& place) {
    const auto bare = [&](instr_kind kind, std::uint8_t mode) {
        instruction& x = place(no_slot, no_slot, no_slot, no_slot);
        x = instruction{};
        x.kind = kind;
        x.mode = mode;
        x.microbatch = opt.microbatch_offset;
    };
    bare(instr_kind::optimizer_step, 0);
    bare(instr_kind::reduce_gradients, static_cast<std::uint8_t>(opt.reduce));
    const std::vector<instruction>& ops = sb.ops[r];
    static const std::vector<std::uint32_t> no_heads;
    const std::vector<std::uint32_t>& heads = r < cp.overlap_heads.size() ? cp.overlap_heads[r] : no_heads;
    std::size_t k = at.size(), pair = heads.size();
    for (std::uint32_t i = static_cast<std::uint32_t>(ops.size()) + 1; i-- > 0;) {
        if (i < ops.size()) {
            const instruction& c = ops[i];
            instruction& x = place(c.in, c.out, c.stash, c.work);
            x = c;
            x.type = opt.type;
            if (c.microbatch < opt.shapes.size()) x.shape = opt.shapes[c.microbatch];
            x.microbatch += opt.microbatch_offset;
            if (pair > 0 && heads[pair - 1] == i) {  // the pair's forward comes next
                --pair;
                instruction& o = place(no_slot, no_slot, no_slot, no_slot);
                o = x;
                o.kind = instr_kind::overlap_f_b;
                o.mode = 0;
                o.in = o.out = o.stash = o.work = no_slot;
            }
        }
        for (; k > 0 && at[k - 1].before == i; --k) {
            const placed& y = at[k - 1];
            const bool send = y.what == placed::send_start || y.what == placed::send_wait;
            const bool recv = y.what == placed::recv_start || y.what == placed::recv_wait;
            const std::uint32_t in = send ? sb.messages[y.key].slot_send : no_slot;
            const std::uint32_t out = recv ? sb.messages[y.key].slot_recv : no_slot;
            instruction& x = place(in, out, no_slot, no_slot);
            write_placed(x, cp, sb.messages, y, r, opt);
            x.microbatch += opt.microbatch_offset;
        }
    }
}

/// The number of instructions emit_backward() writes for rank r.
[[nodiscard]] inline std::size_t program_size(const compute_programs& cp, const slot_builder& sb, const std::vector<placed>& at,
                                              std::size_t r) {
    return sb.ops[r].size() + at.size() + (r < cp.overlap_heads.size() ? cp.overlap_heads[r].size() : 0) + 2;
}

/// Passes 2 + 3 for every rank: the slots, messages and inserted instructions, then
/// write(sb, inserted, r, program) for each rank (its rank, its buffer table with the
/// micro-batch offset, and a zero arena set; its instructions left to write).
template <class Write>
void communicate(std::vector<rank_program>& progs, const compute_programs& cp, const schedule::scenario& sc,
                 const lowering_options& opt, Write&& write) {
    const std::size_t R = cp.ops.size();
    progs.resize(R);
    slot_builder sb(cp, sc, progs);
    sb.run();
    order_messages(cp, sb.messages);
    const auto placed = place_instructions(cp, sb.messages);
    for (std::size_t r = 0; r < R; ++r) {
        rank_program& p = progs[r];
        p.rank = static_cast<std::uint32_t>(r + opt.rank_offset);
        p.arena_bytes = p.live_peak_bytes = 0;
        if (opt.microbatch_offset != 0)
            for (auto& b : p.buffers) b.microbatch += opt.microbatch_offset;
        write(sb, placed[r], r, p);
    }
}

}  // namespace detail

inline void insert_communication_into(std::vector<rank_program>& progs, const compute_programs& cp,
                                      const schedule::scenario& sc, const lowering_options& opt) {
    using detail::placed;
    detail::communicate(progs, cp, sc, opt, [&](const detail::slot_builder& sb, const std::vector<placed>& at, std::size_t r,
                                                rank_program& p) {
        std::size_t w = detail::program_size(cp, sb, at, r);
        p.instructions.resize(w);
        detail::emit_backward(cp, sb, at, r, opt,
                              [&](std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t) -> instruction& { return p.instructions[--w]; });
    });
}

/// insert_communication_into() and then insert_frees() on every program, in one backward write
/// per rank (a free_writer): `lives[r]` receives the lifetimes insert_frees() returns.
inline void insert_communication_and_frees_into(std::vector<rank_program>& progs, std::vector<std::vector<lifetime>>& lives,
                                                const compute_programs& cp, const schedule::scenario& sc,
                                                const lowering_options& opt = {}) {
    lives.resize(cp.ops.size());
    using detail::placed;
    detail::communicate(progs, cp, sc, opt, [&](const detail::slot_builder& sb, const std::vector<placed>& at, std::size_t r,
                                                rank_program& p) {
        p.instructions.resize(free_writer::room(detail::program_size(cp, sb, at, r), p.buffers));
        free_writer w(p.instructions, p.buffers, lives[r]);
        detail::emit_backward(cp, sb, at, r, opt, [&](std::uint32_t in, std::uint32_t out, std::uint32_t stash, std::uint32_t work) -> instruction& {
            return w.place(in, out, stash, work);
        });
        w.finish();
    });
}

inline std::vector<rank_program> insert_communication(const compute_programs& cp, const schedule::scenario& sc,
                                                      const lowering_options& opt) {
    std::vector<rank_program> progs;
    insert_communication_into(progs, cp, sc, opt);
    return progs;
}

/// The header fields a schedule determines: devices, chunks, placement, schedule name, and the
/// element type of the messages. The one place that fills them (lower_into(), join_replicas()).
inline void set_schedule_fields(plan_header& h, const schedule::pipeline_schedule& s, dtype type, send_rule sends) {
    set_placement(h, s.placement);
    h.sends = sends;
    h.schedule = s.name;
    h.type = type;
}

/// lower() into an existing plan (its header reset, its programs replaced), reusing the
/// memory of its programs' vectors: a trainer that lowers every iteration keeps one plan and
/// saves the allocation and first-touch cost of a new one (BM_lower_validate_reused). The
/// result equals lower()'s.
inline void lower_into(execution_plan& p, const schedule::scenario& sc, const schedule::pipeline_schedule& s,
                       const lowering_options& opt = {}) {
    sc.validate();
    const compute_programs cp = lower_compute(sc, s);
    p.header = plan_header{};
    set_schedule_fields(p.header, s, opt.type, opt.sends);
    p.header.predicted_peak_memory_mb.assign(p.header.ranks(), 0.0);  // 0 MB: not predicted here
    p.header.microbatches.resize(sc.microbatches);
    for (std::size_t j = 0; j < sc.microbatches && j < opt.shapes.size(); ++j) p.header.microbatches[j].shape = opt.shapes[j];
    std::vector<std::vector<lifetime>> lives;
    insert_communication_and_frees_into(p.programs, lives, cp, sc, opt);
    for (std::size_t r = 0; r < p.programs.size(); ++r) assign_offsets(p.programs[r], lives[r]);
}

/// All passes: schedule → compute → communication → buffers, for one replica (rank_offset and
/// microbatch_offset 0). The header's schedule fields (placement, chunks, devices, schedule name,
/// dtype, send rule) and a micro-batch table with the shapes (no sample ids) are filled; the planner adds
/// the rest. The scenario is validated first (scenario::validate(): sizes and scenario_limits).
[[nodiscard]] inline execution_plan lower(const schedule::scenario& sc, const schedule::pipeline_schedule& s,
                                          const lowering_options& opt = {}) {
    execution_plan p;
    lower_into(p, sc, s, opt);
    return p;
}

/// One data-parallel replica for join_replicas(): its scenario and schedule (on devices
/// 0 .. D − 1, the same placement for every replica) and its micro-batch table entries in the
/// scenario's micro-batch order (their shapes size the messages).
struct replica_schedule {
    const schedule::scenario* sc = nullptr;
    const schedule::pipeline_schedule* sched = nullptr;
    std::vector<microbatch_entry> microbatches;        ///< one per scenario micro-batch (replica set by the join)
    const schedule::simulation_result* sim = nullptr;  ///< the prediction for the header (nullptr: none)
};

/// The plan-wide facts of join_replicas().
struct join_options {
    dtype type = dtype::fp16;
    std::uint64_t iteration = 0;
    std::uint8_t zero_stage = 0;  ///< >= 2: gradients are reduce-scattered
    send_rule sends = send_rule::buffered;  ///< recorded in the header (send_rule.hpp)
    std::size_t threads = 1;      ///< workers for the per-rank buffer planning (the plan does not depend on it)
};

/// Lowers every replica (rank = replica · D + device, micro-batches numbered on from the
/// previous replica's) and joins them into one plan: the schedule's header fields from replica
/// 0 (set_schedule_fields), dp = the replicas, the micro-batch table in replica order, the
/// predicted makespan (the slowest replica) and peaks (per rank) from the replicas'
/// simulations (0 MB per rank for a replica without one), and every rank's buffers planned. Not validated (validate_or_throw()).
[[nodiscard]] inline execution_plan join_replicas(const std::vector<replica_schedule>& reps, const join_options& o) {
    if (reps.empty()) throw invalid_argument("join_replicas: no replica");
    execution_plan p;
    plan_header& h = p.header;
    set_schedule_fields(h, *reps.front().sched, o.type, o.sends);
    h.iteration = o.iteration;
    h.dp = static_cast<std::uint32_t>(reps.size());
    h.zero_stage = o.zero_stage;
    std::uint32_t microbatch_offset = 0;
    std::vector<std::vector<lifetime>> lives;  // by rank: its lifetimes (the frees inserted)
    for (std::size_t r = 0; r < reps.size(); ++r) {
        const replica_schedule& rep = reps[r];
        if (rep.sched->placement.devices() != h.devices || rep.sched->placement.chunks() != h.chunks)
            throw invalid_argument("join_replicas: replica " + std::to_string(r) + " is placed unlike replica 0");
        lowering_options lo;
        lo.type = o.type;
        lo.reduce = o.zero_stage >= 2 ? reduce_mode::reduce_scatter : reduce_mode::all_reduce;
        lo.rank_offset = static_cast<std::uint32_t>(r) * h.devices;
        lo.microbatch_offset = microbatch_offset;
        for (const microbatch_entry& e : rep.microbatches) {
            lo.shapes.push_back(e.shape);
            h.microbatches.push_back(e);
            h.microbatches.back().replica = static_cast<std::uint32_t>(r);
        }
        std::vector<rank_program> progs;
        std::vector<std::vector<lifetime>> rep_lives;
        insert_communication_and_frees_into(progs, rep_lives, lower_compute(*rep.sc, *rep.sched), *rep.sc, lo);
        for (auto& prog : progs) p.programs.push_back(std::move(prog));
        for (auto& life : rep_lives) lives.push_back(std::move(life));
        if (rep.sim) {
            h.predicted_makespan_ms = std::max(h.predicted_makespan_ms, rep.sim->makespan_ms);
            for (double x : rep.sim->peak_memory_mb) h.predicted_peak_memory_mb.push_back(x);
        } else {
            h.predicted_peak_memory_mb.insert(h.predicted_peak_memory_mb.end(), h.devices, 0.0);  // 0 MB: not predicted
        }
        microbatch_offset += static_cast<std::uint32_t>(rep.microbatches.size());
    }
    parallel_for(p.programs.size(), o.threads, [&](std::size_t k, std::size_t) { assign_offsets(p.programs[k], lives[k]); });
    return p;
}

}  // namespace pipeplan::plan
