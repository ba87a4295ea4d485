// pipeplan/schedule/simulator_structure.hpp — the free-network replay's structure of a
// schedule's orders and its timing pass (simulator.hpp's order_sweep records the result).
//
// On a free network an op starts at max(its device free, its inputs' ends) (timing.hpp's data
// flow; the simulator's file comment). Which ops those inputs are, and an order of all ops in
// which each comes after its inputs and after the op before it on its device, depend on the
// orders alone (with the stage and micro-batch counts, the placement and whether backwards are
// split), not on the scenario's durations or memory. sweep_structure holds both: the ops in
// that order as sweep_steps (the indices of the inputs' spans, the op's key and duration class,
// where its span goes, its device) and per op id its op_code. structure_builder builds it as the
// event replay would run the devices, each as far as its inputs allow, with table slots (per op
// class, stage, micro-batch) that name the op that wrote them, and times each op as it goes.
// A reused workspace keeps the orders; seen again, the structure is built with its steps, and
// from then on time_steps() is the whole replay (per op a few loads, two maxima and an add):
// the same schedule again, another scenario of the same shape, 1F1B or GPipe in another
// micro-batch order. Figures: docs/schedules.md, "Simulator speed".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "pipeplan/core/huge_pages.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/scenario.hpp"
#include "pipeplan/schedule/timing.hpp"

namespace pipeplan::schedule::detail {

/// The address of `p` as an integer, for prefetch_line().
[[gnu::always_inline]] inline std::uintptr_t address_of(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

/// Fetches the cache line at address `at` ahead of its use (`write`: 1 for a store). The
/// address is an integer because it may lie past a buffer's end (or near null, for a result
/// that is not recorded), where a prefetch does nothing but pointer arithmetic is undefined.
template <int write = 0>
[[gnu::always_inline]] inline void prefetch_line(std::uintptr_t at) noexcept {
    __builtin_prefetch(reinterpret_cast<const void*>(at), write);
}

/// An op's kind, with a B told apart by what ran before it on its (stage, micro-batch): what it
/// frees and whether it recomputes inline (timing.hpp). The first five values are op_kind's.
enum class op_code : std::uint8_t { F = 0, B = 1, W = 2, f = 3, R = 4, B_after_f = 5, B_after_R = 6 };

[[nodiscard, gnu::always_inline]] constexpr op_kind kind_of(op_code c) noexcept {
    return c >= op_code::B_after_f ? op_kind::B : static_cast<op_kind>(c);
}

/// One op in replay order: its inputs' spans at cross and local (0: no input, ready at 0; else
/// sweep_structure::span_of() their op ids), its (stage, micro-batch) key (stage · M +
/// micro-batch), where its span goes, and `device_class`: its device + its duration class (sweep_structure) · 2^30.
struct sweep_step {
    std::uint32_t cross, local, key, span, device_class;
};

/// How many steps on time_steps() prefetches what a step reads and writes.
inline constexpr std::size_t time_ahead = 16;

/// When an op ran (time_steps()).
struct op_span {
    double start_ms, end_ms;
};

/// The structure of a schedule's orders (the file comment), kept for the next schedule.
struct sweep_structure {
    bool has_steps = false;  ///< `steps` are built (the second time the orders were seen)
    std::size_t V = 0, M = 0, D = 0;
    bool split = false;       ///< built for a schedule with w_share > 0
    bool any_w = false;       ///< some op is a W (durations need the W table)
    bool any_inline = false;  ///< some B recomputes inline
    std::vector<std::uint32_t> device_of_stage;
    std::vector<std::uint32_t> first_op;  ///< [d]: device d's first op id; [D] = the op count
    huge_page_vector<sweep_step> steps;  ///< replay order
    huge_page_vector<op_code> code;      ///< [op id]
    /// The orders it was built from, device after device (empty when not kept: matches() is then false).
    huge_page_vector<op> ops;

    /// An op's duration is in the table of its class (index: its key): F/f/R, B, W, B with inline
    /// recompute (time_steps()); the class is the top two bits of sweep_step::device_class.
    enum duration_class : std::uint32_t { forward = 0, backward = 1, weight = 2, backward_inline = 3 };
    static constexpr unsigned class_shift = 30;
    static constexpr std::uint32_t device_mask = (std::uint32_t{1} << class_shift) - 1;

    /// Where time_steps() writes the span of op id `id` of device d: after the span of no input
    /// (0), the devices' rows, each `span_stagger` spans (80 bytes) after the previous row's end.
    /// Rows of equal length would otherwise start a multiple of 4 KiB apart (M = 4096, 1F1B:
    /// 128 KiB), in one set of the L1 cache, and the timing pass, which writes all rows at once,
    /// would evict its own lines.
    static constexpr std::uint32_t span_stagger = 5;
    [[nodiscard]] static constexpr std::uint32_t span_of(std::size_t id, std::size_t d) noexcept {
        return static_cast<std::uint32_t>(id + 1 + d * span_stagger);
    }

    /// Whether `sched` on `sc` has this structure: the same shape, placement, split and ops. The
    /// ops are compared as bytes (std::memcmp, which reads the padding of `op` too): equal bytes
    /// are equal ops, and equal ops with other padding are only built again.
    [[nodiscard]] bool matches(const scenario& sc, const pipeline_schedule& sched) const noexcept {
        if (ops.empty() || sc.stages != V || sc.microbatches != M || sched.orders.size() != D ||
            (sched.w_share > 0.0) != split)
            return false;
        for (std::size_t v = 0; v < V; ++v)
            if (sched.placement.device_of(v) != device_of_stage[v]) return false;
        for (std::size_t d = 0; d < D; ++d)
            if (sched.orders[d].size() != first_op[d + 1] - first_op[d]) return false;
        for (std::size_t d = 0; d < D; ++d)
            if (first_op[d + 1] > first_op[d] &&
                std::memcmp(sched.orders[d].data(), ops.data() + first_op[d], sched.orders[d].size() * sizeof(op)) != 0)
                return false;
        return true;
    }

    /// Keeps a copy of the orders for matches() (a workspace used once needs none).
    void keep_orders(const pipeline_schedule& sched) {
        reserve_scratch(ops, first_op[D]);
        ops.resize(first_op[D]);
        for (std::size_t d = 0; d < D; ++d) std::copy(sched.orders[d].begin(), sched.orders[d].end(), ops.begin() + first_op[d]);
    }
};

/// The timing pass's scratch: the durations of the classes that are not the scenario's arrays
/// (fill_durations()), device free times, spans.
struct sweep_times {
    huge_page_vector<double> backward_ms, weight_ms, inline_ms;
    std::vector<double> free_ms;
    huge_page_vector<op_span> spans;  ///< [0]: {0, 0} (no input); [span_of(i, d)]: op id i of device d
};

/// structure_builder's tables, kept in the workspace between builds.
struct structure_scratch {
    huge_page_vector<std::uint32_t> done;  ///< per slot: the span of the op that wrote it, or unfinished
    std::vector<std::uint8_t> checkpoint;  ///< per (stage, micro-batch): bit 1 its forward was an f, bit 2 an R ran
    std::vector<std::size_t> blocked_on;   ///< per device: the slot it waits for, or none
    std::vector<std::uint32_t> pos;        ///< per device: the next position in its order
    std::vector<std::uint8_t> waits;       ///< per device: the op at pos waited for an input (it was checked)
    std::vector<std::uint32_t> ready;      ///< the devices to run, a stack
};

/// Builds a sweep_structure (the file comment): run() is false for what the free-network replay
/// leaves to the general replay, which gives the result or names the fault: a schedule of
/// another shape, an op out of range, on another device, overlapped with the next, repeated or
/// missing, an R not after its f or after its B, a W without a split, a deadlock.
class structure_builder {
public:
    /// Builds the structure of `sched` on `sc` in `st` (its steps only when `keep_steps`) and
    /// times the ops into `times` as it goes (as time_steps() would).
    structure_builder(sweep_structure& st, structure_scratch& scratch, sweep_times& times, const scenario& sc,
                      const pipeline_schedule& sched, bool keep_steps) noexcept
        : st_(st), done_(scratch.done), checkpoint_(scratch.checkpoint), blocked_on_(scratch.blocked_on),
          pos_(scratch.pos), waits_(scratch.waits), ready_(scratch.ready), times_(times), sc_(sc), sched_(sched),
          model_(sc, sched.w_share), V_(sc.stages), M_(sc.microbatches), keep_steps_(keep_steps) {}

    [[nodiscard]] bool run() {
        st_.has_steps = false;
        const std::size_t D = sched_.orders.size();
        if (D > sweep_structure::device_mask || !prepare(D)) return false;
        // The devices that can run, a stack: each device is on it at most once (pushed first,
        // or when woken from a wait, after it was popped), so D entries hold it. Last in, first
        // out: a woken device runs at once, while its inputs are in the cache, and runs ~2 ops
        // per visit in 1F1B at S 64 (a queue: 0.7).
        ready_.resize(D);
        for (std::size_t d = D; d-- > 0;) ready_[ready_count_++] = static_cast<std::uint32_t>(d);
        while (ready_count_ > 0)
            if (!(st_.first_op[D] >= prefetch_from_ops ? run_device<true>(ready_[--ready_count_])
                                                       : run_device<false>(ready_[--ready_count_])))
                return false;
        for (std::size_t d = 0; d < D; ++d)
            if (blocked_on_[d] != none) return false;  // a deadlock (or a missing input)
        const std::size_t keys = V_ * M_;
        const std::size_t forwards = count_[kind_index(op_kind::F)] + count_[kind_index(op_kind::F_checkpoint)];
        if (forwards != keys || count_[kind_index(op_kind::B)] != keys ||
            count_[kind_index(op_kind::W)] != (st_.split ? keys : 0))
            return false;
        st_.any_w = count_[kind_index(op_kind::W)] > 0;
        st_.has_steps = keep_steps_;
        return true;
    }

private:
    enum op_class : std::uint8_t { fwd = 0, bwd = 1, rec = 2, wgt = 3 };
    static constexpr std::size_t none = SIZE_MAX;
    static constexpr std::uint32_t unfinished = UINT32_MAX;
    static constexpr std::size_t zero_ = 0;

    [[nodiscard]] static constexpr std::size_t kind_index(op_kind k) noexcept { return static_cast<std::size_t>(k); }
    [[nodiscard]] static constexpr op_class class_of(op_kind k) noexcept {
        switch (k) {
            case op_kind::F:
            case op_kind::F_checkpoint: return fwd;
            case op_kind::B: return bwd;
            case op_kind::R: return rec;
            case op_kind::W: return wgt;
        }
        return fwd;
    }
    /// Slot 0 is the input that does not exist (done at step "0"); class c's table follows at 1 + c·V·M.
    struct dims {
        std::size_t V, M;
    };
    [[nodiscard, gnu::always_inline]] static std::size_t slot(dims n, op_kind k, std::size_t stage, std::size_t mb) noexcept {
        return 1 + (class_of(k) * n.V + stage) * n.M + mb;
    }

    /// Sizes the structure and the tables (the forward and backward classes unfinished; R and W
    /// on their first op). False: too many ops.
    bool prepare(std::size_t D) {
        std::size_t n = 0;
        st_.first_op.resize(D + 1);
        for (std::size_t d = 0; d < D; ++d) {
            st_.first_op[d] = static_cast<std::uint32_t>(n);
            n += sched_.orders[d].size();
            if (n + (d + 1) * sweep_structure::span_stagger >= static_cast<std::size_t>(INT32_MAX)) return false;
        }
        st_.first_op[D] = static_cast<std::uint32_t>(n);
        st_.V = V_;
        st_.M = M_;
        st_.D = D;
        st_.split = sched_.w_share > 0.0;
        st_.any_inline = false;
        if (keep_steps_) {
            reserve_scratch(st_.steps, n + time_ahead);
            st_.steps.resize(n + time_ahead);
            std::fill_n(st_.steps.begin() + static_cast<std::ptrdiff_t>(n), time_ahead, sweep_step{0, 0, 0, 0, 0});  // read ahead, not run
        } else {
            st_.steps.clear();
        }
        reserve_scratch(st_.code, n);
        st_.code.resize(n);
        const std::size_t spans = sweep_structure::span_of(n, D);
        reserve_scratch(times_.spans, spans);
        times_.spans.resize(spans);
        times_.spans[0] = {0.0, 0.0};
        times_.free_ms.assign(D, 0.0);
        const std::size_t keys = V_ * M_;
        reserve_scratch(done_, 1 + 4 * keys);
        done_.resize(1 + 4 * keys);  // R and W only written when opened
        done_[zero_] = 0;
        std::fill_n(done_.begin() + 1, 2 * keys, unfinished);
        blocked_on_.assign(D, none);
        pos_.assign(D, 0);
        waits_.assign(D, 0);
        done_p_ = done_.data();
        spans_p_ = times_.spans.data();
        code_p_ = st_.code.data();
        steps_p_ = st_.steps.data();
        st_.device_of_stage.resize(V_);
        for (std::size_t v = 0; v < V_; ++v) st_.device_of_stage[v] = static_cast<std::uint32_t>(sched_.placement.device_of(v));
        return true;
    }

    /// The class table of `c` set to unfinished on its first op.
    void open_class(op_class c) {
        if (opened_[c]) return;
        opened_[c] = true;
        std::fill_n(done_.begin() + static_cast<std::ptrdiff_t>(1 + c * V_ * M_), V_ * M_, unfinished);
    }
    /// The checkpoint flags (structure_scratch), zeroed on the first f.
    std::uint8_t* checkpoint_flags() {
        if (!checkpointed_) {
            checkpointed_ = true;
            checkpoint_.assign(V_ * M_, 0);
        }
        return checkpoint_.data();
    }
    [[nodiscard]] std::uint8_t flags(std::size_t k) const noexcept { return checkpointed_ ? checkpoint_[k] : 0; }

    /// Op `o`'s table slots: its inputs' (0 when it has none) and its own.
    struct op_slots {
        std::size_t cross, local, own;
    };
    [[nodiscard, gnu::always_inline]] static op_slots slots_of(dims n, op o, std::uint8_t fl) noexcept {
        const cross_target from = cross_producer(o, n.V);
        const std::size_t cross = from.has ? slot(n, from.to.kind, from.to.stage, from.to.microbatch) : zero_;
        const std::optional<op_kind> local_kind = local_producer(o.kind, (fl & 2) != 0);
        const std::size_t local = local_kind ? slot(n, *local_kind, o.stage, o.microbatch) : zero_;
        return {cross, local, slot(n, o.kind, o.stage, o.microbatch)};
    }

    enum class outcome : std::uint8_t { ran, waits, refused };
    static constexpr std::size_t prefetch_from_ops = std::size_t{1} << 16;

    /// Runs device d's order from its cursor until it ends or waits; false on what run() refuses.
    template <bool prefetch>
    bool run_device(std::uint32_t d) {
        const op* order = sched_.orders[d].data();
        const auto size = static_cast<std::uint32_t>(sched_.orders[d].size());
        const std::uint32_t first = st_.first_op[d];
        const dims n{V_, M_};
        std::uint32_t p = pos_[d];
        double free_ms = times_.free_ms[d];
        outcome r = outcome::ran;
        // Woken (blocked_on[d] is none again): the op it waited at was checked; it runs (or
        // waits again, for its other input).
        if (waits_[d]) {
            const op o = order[p];
            r = run_op(n, o, o.stage * n.M + o.microbatch, d, first + p, free_ms);
            if (r == outcome::refused) return false;
            if (r == outcome::ran) ++p;
        }
        const std::uint32_t* device_of_stage = st_.device_of_stage.data();
        // A device runs a few ops per visit, the other devices' visits come between, so its
        // many streams (its order, its rows of the scenario and of the tables, its spans and
        // codes) are read in short bursts that the hardware prefetchers do not follow: fetch
        // them a cache line ahead (in a schedule of prefetch_from_ops ops or more; a smaller one
        // stays in the caches).
        const std::uintptr_t rows[] = {address_of(sc_.forward_ms.data()), address_of(sc_.backward_ms.data())};
        const std::uintptr_t done_rows[] = {address_of(done_p_ + 1), address_of(done_p_ + 1 + n.V * n.M)};
        const std::uintptr_t spans = address_of(spans_p_ + sweep_structure::span_of(first, d));
        const std::uintptr_t codes = address_of(code_p_ + first);
        for (; r == outcome::ran && p < size; ++p) {
            const op o = order[p];
            if (o.microbatch >= n.M || o.stage >= n.V || device_of_stage[o.stage] != d || o.overlaps_next) return false;
            const std::size_t k = o.stage * n.M + o.microbatch;
            if constexpr (prefetch) {
                for (const std::uintptr_t row : rows) prefetch_line(row + (k + 8) * sizeof(double));
                for (const std::uintptr_t row : done_rows) prefetch_line(row + (k + 16) * sizeof(std::uint32_t));
                prefetch_line(address_of(order + p) + 4 * sizeof(op));
                prefetch_line<1>(spans + (p + 4) * sizeof(op_span));
                prefetch_line<1>(codes + p + 64);
            }
            r = run_op(n, o, k, d, first + p, free_ms);
            if (r == outcome::refused) return false;
            if (r == outcome::waits) break;
        }
        pos_[d] = p;
        waits_[d] = r == outcome::waits;
        times_.free_ms[d] = free_ms;
        return true;
    }

    /// Adds op `o` (checked; its (stage, micro-batch) k, its op id) of device d, or finds what it waits for.
    [[gnu::always_inline]] outcome run_op(dims n, op o, std::size_t k, std::uint32_t d, std::uint32_t id, double& free_ms) {
        switch (o.kind) {
            case op_kind::F: return step<op_kind::F>(n, o, k, d, id, free_ms);
            case op_kind::B: return step<op_kind::B>(n, o, k, d, id, free_ms);
            case op_kind::W: return step<op_kind::W>(n, o, k, d, id, free_ms);
            case op_kind::F_checkpoint: return step<op_kind::F_checkpoint>(n, o, k, d, id, free_ms);
            case op_kind::R: return step<op_kind::R>(n, o, k, d, id, free_ms);
        }
        return outcome::refused;
    }

    /// The op_code and duration table of an op of kind K whose (stage, micro-batch) has flags `fl`.
    template <op_kind K>
    [[nodiscard, gnu::always_inline]] static std::pair<op_code, std::uint32_t> code_of(std::uint8_t fl) noexcept {
        using dc = sweep_structure::duration_class;
        if constexpr (K == op_kind::B) {
            if (fl & 2) return {op_code::B_after_R, dc::backward};
            if (fl & 1) return {op_code::B_after_f, dc::backward_inline};
            return {op_code::B, dc::backward};
        }
        return {static_cast<op_code>(K), K == op_kind::W ? dc::weight : dc::forward};
    }

    /// Adds op `o` (of kind K) as the next step, or finds the input it waits for.
    template <op_kind K>
    [[gnu::always_inline]] outcome step(dims n, op o, std::size_t k, std::uint32_t d, std::uint32_t id, double& free_ms) {
        const op x{K, o.microbatch, o.stage};  // o, with its kind known to the compiler
        const std::uint8_t fl = K == op_kind::B || K == op_kind::R ? flags(k) : 0;
        const op_slots s = slots_of(n, x, fl);
        const std::uint32_t cross = done_p_[s.cross], local = done_p_[s.local];
        if (cross == unfinished || local == unfinished) {
            blocked_on_[d] = cross == unfinished ? s.cross : s.local;
            return outcome::waits;
        }
        if (!admit(x, s.own, k)) return outcome::refused;
        const auto [code, table] = code_of<K>(fl);
        st_.any_inline |= table == sweep_structure::backward_inline;
        // Timed as time_steps() does, with the duration from the model (the tables there hold the same).
        op_span* spans = spans_p_;
        const double dur = model_.duration_ms(x, K == op_kind::B && fl == 1);
        const double ready = std::max(spans[cross].end_ms, spans[local].end_ms);
        const double start = std::max(free_ms, ready);
        free_ms = start + dur;
        if (!(dur >= 0.0) || !(free_ms < std::numeric_limits<double>::infinity())) return outcome::refused;
        const std::uint32_t span = st_.span_of(id, d);
        spans[span] = {start, free_ms};
        if (keep_steps_) steps_p_[count_all_++] = {cross, local, static_cast<std::uint32_t>(k), span, d | table << sweep_structure::class_shift};
        done_p_[s.own] = span;
        code_p_[id] = code;
        ++count_[kind_index(K)];
        wake(x, s.own);
        return outcome::ran;
    }

    /// Checks what op `o` (its table slot `own`, its (stage, micro-batch) k) needs besides its
    /// inputs and marks an f or R: false when it repeats an op, is an R not after its f or after
    /// its B, or a W without a split.
    [[gnu::always_inline]] bool admit(op o, std::size_t own, std::size_t k) {
        switch (o.kind) {
            case op_kind::F:
            case op_kind::B: break;
            case op_kind::F_checkpoint: checkpoint_flags()[k] |= 1; break;
            case op_kind::R:
                open_class(rec);
                if (!(flags(k) & 1) || done_p_[slot(dims{V_, M_}, op_kind::B, o.stage, o.microbatch)] != unfinished)
                    return false;
                checkpoint_flags()[k] |= 2;
                break;
            case op_kind::W:
                if (!st_.split) return false;
                open_class(wgt);
                break;
        }
        return done_p_[own] == unfinished;
    }

    /// Op `o` wrote slot `own`: the device of the op it feeds on another stage runs on when it
    /// waits for that slot.
    [[gnu::always_inline]] void wake(op o, std::size_t own) {
        const cross_target to = cross_successor(o, V_);
        if (!to.has) return;
        const std::uint32_t e = st_.device_of_stage[to.to.stage];
        if (blocked_on_[e] != own) return;
        blocked_on_[e] = none;
        ready_[ready_count_++] = e;
    }

    sweep_structure& st_;
    huge_page_vector<std::uint32_t>& done_;
    std::vector<std::uint8_t>& checkpoint_;
    std::vector<std::size_t>& blocked_on_;
    std::vector<std::uint32_t>& pos_;
    std::vector<std::uint8_t>& waits_;
    std::vector<std::uint32_t>& ready_;
    sweep_times& times_;
    const scenario& sc_;
    const pipeline_schedule& sched_;
    op_model model_;
    std::size_t V_, M_;
    bool keep_steps_;
    // The tables' data, as pointers (not through the vectors, read again after each store).
    std::uint32_t* done_p_ = nullptr;
    op_span* spans_p_ = nullptr;
    op_code* code_p_ = nullptr;
    sweep_step* steps_p_ = nullptr;
    std::size_t ready_count_ = 0, count_all_ = 0;
    std::size_t count_[5] = {0, 0, 0, 0, 0};
    bool opened_[4] = {true, true, false, false};
    bool checkpointed_ = false;
};

/// Points `table` at the durations of each class of `st` on `sc` (timing.hpp's op_model, `w` the
/// backward split): the scenario's forward_ms for F/f/R, its backward_ms for B when nothing is
/// split off (B = backward·1 + 0 is the same time: no time here is −0), else tables in `out`;
/// false when one is negative or not finite.
inline bool fill_durations(const sweep_structure& st, const scenario& sc, double w, sweep_times& out,
                           const double* (&table)[4]) {
    const std::size_t V = st.V, M = st.M, keys = V * M;
    const op_model model(sc, w);
    bool ok = true;
    auto check = [&](const double* x) {
        unsigned bad = 0;  // or-ed without a branch, so that the loop vectorizes
        for (std::size_t i = 0; i < keys; ++i)
            bad |= static_cast<unsigned>(!(x[i] >= 0.0)) | static_cast<unsigned>(!(x[i] < std::numeric_limits<double>::infinity()));
        ok = ok && bad == 0;
    };
    auto fill = [&](huge_page_vector<double>& to, op_kind kind, bool inline_recompute) {
        reserve_scratch(to, keys);
        to.resize(keys);
        for (std::size_t v = 0; v < V; ++v)
            for (std::size_t j = 0; j < M; ++j)
                to[v * M + j] = model.duration_ms(op{kind, static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(v)},
                                                  inline_recompute);
        check(to.data());
        return to.data();
    };
    table[sweep_structure::forward] = sc.forward_ms.data();
    check(sc.forward_ms.data());
    if (w == 0.0) {
        table[sweep_structure::backward] = sc.backward_ms.data();
        check(sc.backward_ms.data());
    } else {
        table[sweep_structure::backward] = fill(out.backward_ms, op_kind::B, false);
    }
    table[sweep_structure::weight] = st.any_w ? fill(out.weight_ms, op_kind::W, false) : nullptr;
    table[sweep_structure::backward_inline] = st.any_inline ? fill(out.inline_ms, op_kind::B, true) : nullptr;
    return ok;
}

/// The timing pass: every op's start and end (out.spans, by op id) on a free network; false when
/// a duration is negative or not finite, or a time overflows.
inline bool time_steps(const sweep_structure& st, const scenario& sc, double w, sweep_times& out) {
    const double* table[4];
    if (!fill_durations(st, sc, w, out, table)) return false;
    const std::size_t N = st.first_op[st.D];
    reserve_scratch(out.spans, st.span_of(N, st.D));
    out.spans.resize(st.span_of(N, st.D));
    out.free_ms.assign(st.D, 0.0);
    const sweep_step* steps = st.steps.data();
    double* free_ms = out.free_ms.data();
    op_span* spans = out.spans.data();
    spans[0] = {0.0, 0.0};
    // The steps interleave the devices, so the durations (a row per stage) and the spans (a row
    // per device) are many short streams that the hardware prefetchers do not follow: fetch the
    // lines of the step time_ahead steps on (the steps' end is padded, structure_builder).
    for (std::size_t t = 0; t < N; ++t) {
        const sweep_step s = steps[t];
        const sweep_step& next = steps[t + time_ahead];
        prefetch_line(address_of(table[next.device_class >> sweep_structure::class_shift] + next.key));
        prefetch_line<1>(address_of(spans + next.span));
        const double ready = std::max(spans[s.cross].end_ms, spans[s.local].end_ms);
        const std::uint32_t d = s.device_class & sweep_structure::device_mask;
        const double start = std::max(free_ms[d], ready);
        const double end = start + table[s.device_class >> sweep_structure::class_shift][s.key];
        free_ms[d] = end;
        spans[s.span] = {start, end};
    }
    for (const double f : out.free_ms)
        if (!(f < std::numeric_limits<double>::infinity())) return false;
    return true;
}

}  // namespace pipeplan::schedule::detail
