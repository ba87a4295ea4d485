// pipeplan/schedule/simulator_structure.hpp — the free-network replay: a timing pass over the
// ops in an order where each follows its inputs, then a recording pass per device
// (simulator.hpp's order_sweep sizes the result and finishes it).
//
// On a free network an op starts at max(its device free, its inputs' ends) (timing.hpp's data
// flow; the simulator's file comment), which is max(its device free, its cross input's end): its
// local input (of its own stage) ran before it on its device. structure_builder runs the devices as the event replay
// would, each as far as its inputs allow, with table slots (per op class, stage, micro-batch)
// that name the timeline entry of the op that wrote them, and writes each op's timeline entry
// (op, start, end) as it runs: the timeline is also the table of ends that later ops read.
// Which ops are an op's inputs, and that order of all ops, depend on the orders alone (with the
// stage and micro-batch counts, the placement and whether backwards are split), not on the
// scenario's durations or memory: a workspace that is kept (simulator, order searches) also
// writes the order as 12-byte sweep_steps, and the next run with equal orders is time_steps(),
// one loop over them (per op a few loads, a maximum, an add, and the entry's start, end and
// key). Then each device's entries are read in order (record_device(): memory, busy time, peak,
// curve; after time_steps() it also checks every op of the orders against its entry's key, so
// orders that differ are found and built again, and writes the op into the entry). The timing
// pass interleaves the devices; the recording pass reads and writes one device's rows at a time,
// which the hardware prefetchers follow (recording in the timing pass, 64 devices' curves and
// memory rows at once, measured 1.5x slower).
// Figures: docs/schedules.md, "Simulator speed".
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

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pipeplan::schedule {

/// When one op ran.
struct op_timing {
    op o;
    double start_ms = 0.0;
    double end_ms = 0.0;
};

/// A step of a device's memory-over-time curve: from `time_ms` on, the device holds
/// `memory_mb` (until the next point).
struct memory_point {
    double time_ms = 0.0;
    double memory_mb = 0.0;
};

}  // namespace pipeplan::schedule

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

/// 1 when `a == b` (as doubles: NaN never, −0 == +0), else 0, without a branch: g++ 12 compiles
/// the comparison of two doubles into an integer as two jumps (zero and parity flags), which
/// the recording pass would mispredict about every other op.
[[nodiscard, gnu::always_inline]] inline std::ptrdiff_t equal_as_one(double a, double b) noexcept {
#if defined(__SSE2__)
    return _mm_cvtsi128_si32(_mm_castpd_si128(_mm_cmpeq_sd(_mm_set_sd(a), _mm_set_sd(b)))) & 1;
#else
    return a == b;
#endif
}

/// An op's kind, with a B told apart by what ran before it on its (stage, micro-batch): what it
/// frees and whether it recomputes inline (timing.hpp). The first five values are op_kind's.
enum class op_code : std::uint8_t { F = 0, B = 1, W = 2, f = 3, R = 4, B_after_f = 5, B_after_R = 6 };
inline constexpr std::size_t op_codes = 7;

[[nodiscard, gnu::always_inline]] constexpr op_kind kind_of(op_code c) noexcept {
    return c >= op_code::B_after_f ? op_kind::B : static_cast<op_kind>(c);
}

/// The op_code of an op of kind `k` whose (stage, micro-batch) has the checkpoint flags `fl`
/// (structure_scratch::checkpoint: bit 1 its forward was an f, bit 2 an R ran).
[[nodiscard, gnu::always_inline]] constexpr op_code code_of(op_kind k, std::uint8_t fl) noexcept {
    if (k != op_kind::B) return static_cast<op_code>(k);
    return (fl & 2) != 0 ? op_code::B_after_R : (fl & 1) != 0 ? op_code::B_after_f : op_code::B;
}

/// One op in replay order: `cross_code` its cross input's timeline entry (0: none, ready at 0;
/// else sweep_structure::span_of() of its op id) + the op's op_code · 2^29; `own` its own entry
/// (the entry before it is the op before it on its device, or, before a device's first op, one
/// that time_steps() sets to end at 0); `key` its (stage, micro-batch) index and kind
/// (sweep_structure::key_of()). Its local input ran before it on its device, so it ended by the
/// entry before its own: the step does not name it.
struct sweep_step {
    std::uint32_t cross_code, own, key;
};

/// How many steps on time_steps() prefetches what a step reads and writes.
inline constexpr std::size_t time_ahead = 12;

/// The replay order of a schedule's orders (the file comment), kept for the next schedule.
struct sweep_structure {
    bool has_steps = false;  ///< `steps` hold the replay order of the last orders built
    std::size_t V = 0, M = 0, D = 0;
    bool split = false;       ///< the shape of a schedule with w_share > 0
    bool any_w = false;       ///< some op is a W (durations need the W table)
    bool any_inline = false;  ///< some B recomputes inline
    bool any_recompute = false;  ///< some op is an f or R (so not all are F and B)
    std::vector<std::uint32_t> device_of_stage;
    std::vector<std::uint32_t> first_op;  ///< [d]: device d's first op id; [D] = the op count
    huge_page_vector<sweep_step> steps;   ///< replay order, padded by time_ahead steps of zeros
    std::vector<op> ends;                 ///< [2d], [2d + 1]: device d's first and last op (steps kept)

    static constexpr unsigned code_shift = 29;
    static constexpr std::uint32_t span_mask = (std::uint32_t{1} << code_shift) - 1;

    /// An op's key: its (stage, micro-batch) index k = stage · M + micro-batch (scenario::at(),
    /// below 2^29 in a schedule with steps: it has 2 ops per index and fewer than 2^29 ops) + its
    /// op_kind · 2^29. time_steps() leaves each entry's key in its o.microbatch, which the
    /// recording pass compares with the orders' op (record_device()) before it writes the op.
    [[nodiscard]] static constexpr std::uint32_t key_of(op_kind kind, std::size_t k) noexcept {
        return static_cast<std::uint32_t>(k) | static_cast<std::uint32_t>(kind) << code_shift;
    }

    /// Where the timeline entry of op id `id` of device d goes: after the entry of no input (0),
    /// the devices' rows, each `span_stagger` entries (160 bytes) after the previous row's end.
    /// Rows of equal length would otherwise start a multiple of 4 KiB apart (M = 4096, 1F1B:
    /// 256 KiB), in one set of the L1 cache, and the replay, which writes all rows at once, would
    /// evict its own lines.
    static constexpr std::uint32_t span_stagger = 5;
    [[nodiscard]] static constexpr std::uint32_t span_of(std::size_t id, std::size_t d) noexcept {
        return static_cast<std::uint32_t>(id + 1 + d * span_stagger);
    }
    /// The most points the memory curves of `n` ops on D devices have: 2 per op and 1 per device
    /// (the recording pass writes the devices' curves one after the other, back to back).
    [[nodiscard]] static constexpr std::size_t curve_points(std::size_t n, std::size_t D) noexcept { return 2 * n + D; }

    /// Sets the shape of `sched` on `sc` (no steps); false when it has too many ops (2^29 timeline
    /// entries).
    [[nodiscard]] bool set_shape(const scenario& sc, const pipeline_schedule& sched) {
        has_steps = false;
        V = sc.stages;
        M = sc.microbatches;
        D = sched.orders.size();
        split = sched.w_share > 0.0;
        device_of_stage.resize(V);
        for (std::size_t v = 0; v < V; ++v) device_of_stage[v] = static_cast<std::uint32_t>(sched.placement.device_of(v));
        first_op.resize(D + 1);
        std::size_t n = 0;
        for (std::size_t d = 0; d < D; ++d) {
            first_op[d] = static_cast<std::uint32_t>(n);
            n += sched.orders[d].size();
            if (n + (d + 1) * span_stagger >= span_mask) return false;
        }
        first_op[D] = static_cast<std::uint32_t>(n);
        return true;
    }

    /// Whether `sched` on `sc` may have the kept steps: the same shape, placement, split, order
    /// lengths and first and last ops (record_device() checks every op).
    [[nodiscard]] bool may_match(const scenario& sc, const pipeline_schedule& sched) const noexcept {
        if (!has_steps || sc.stages != V || sc.microbatches != M || sched.orders.size() != D ||
            (sched.w_share > 0.0) != split)
            return false;
        for (std::size_t v = 0; v < V; ++v)
            if (sched.placement.device_of(v) != device_of_stage[v]) return false;
        for (std::size_t d = 0; d < D; ++d) {
            const std::vector<op>& order = sched.orders[d];
            if (order.size() != first_op[d + 1] - first_op[d]) return false;
            if (!order.empty() && (!(order.front() == ends[2 * d]) || !(order.back() == ends[2 * d + 1]))) return false;
        }
        return true;
    }
};

/// A device in the timing pass: when its last op ended (its ends never decrease: the last is
/// its makespan) and where its next op's timeline entry goes.
struct device_clock {
    double free_ms = 0.0;
    std::uint32_t span = 0;
    std::uint32_t level = 0;  ///< the level of its last op (structure_builder, when it keeps steps)
};

/// A device's running figures in the recording pass.
struct device_walk {
    double state_mb = 0.0;          ///< model state of its stages
    double stored_mb = 0.0;         ///< activations held
    double peak_mb = 0.0, busy_ms = 0.0;
    /// The end of its last op, where its curve's last step starts (-1 before the first op, so
    /// that the first op's step never replaces the point {0, state}); kept here, not read back
    /// from the curve: a load of the last point would chain every op's store to the next op.
    double last_end_ms = -1.0;
    std::uint32_t span = 0;         ///< the entry of its next op
    std::uint32_t peak_span = 0;    ///< the entry of the (first) op of its peak
    memory_point* curve = nullptr;  ///< where its next curve point goes (nullptr: not recorded)
};

/// The replay's scratch: the durations of the classes that are not the scenario's arrays
/// (durations_of()), the timeline when the result has none, the devices' clocks and walks.
struct sweep_times {
    huge_page_vector<double> backward_ms, weight_ms, inline_ms;
    huge_page_vector<op_timing> spans;  ///< the timeline's entries when none is recorded
    std::vector<device_clock> clocks;
    std::vector<device_walk> walks;
};

/// The recording pass's model of memory (timing.hpp's op_model): each op's memory, busy time,
/// peak and curve points, from its timeline entry.
class sweep_recorder {
public:
    sweep_recorder(const scenario& sc, double w_share) noexcept
        : model_(sc, w_share), stored_(sc.stored_mb.data()), peak_(sc.peak_mb.data()) {}

    [[nodiscard]] std::size_t microbatches() const noexcept { return model_.scene().microbatches; }
    [[nodiscard]] std::size_t stages() const noexcept { return model_.scene().stages; }

    /// Op `o` (of code C) ran from `start_ms` to `end_ms` on the device of `w`. What its (stage,
    /// micro-batch) held before it is what the op before it there left: nothing before a
    /// forward; f before R; R, f or F before B (its code); B before W. `curve`: whether w.curve
    /// is recorded (a constant: no test per op).
    template <op_code C, bool curve>
    [[gnu::always_inline]] void add(device_walk& w, const op& o, double start_ms, double end_ms) const noexcept {
        const op x{kind_of(C), o.microbatch, o.stage};  // o, with its kind known to the compiler
        double held_mb = 0.0;
        if constexpr (C != op_code::F && C != op_code::f) {
            op before = x;
            before.kind = C == op_code::B_after_R ? op_kind::R
                          : C == op_code::B       ? op_kind::F
                          : C == op_code::W       ? op_kind::B
                                                  : op_kind::F_checkpoint;  // R, B after f
            held_mb = model_.held_after_mb(before);
        }
        const double during = model_.during_mb(x, w.state_mb + w.stored_mb - held_mb, held_mb);
        w.stored_mb += model_.held_after_mb(x) - held_mb;
        record<curve>(w, start_ms, end_ms, during);
    }

    /// add() with the code given at run time.
    template <bool curve>
    [[gnu::always_inline]] void add(op_code c, device_walk& w, const op& o, double start_ms, double end_ms) const noexcept {
        switch (c) {
            case op_code::F: add<op_code::F, curve>(w, o, start_ms, end_ms); break;
            case op_code::B: add<op_code::B, curve>(w, o, start_ms, end_ms); break;
            case op_code::W: add<op_code::W, curve>(w, o, start_ms, end_ms); break;
            case op_code::f: add<op_code::f, curve>(w, o, start_ms, end_ms); break;
            case op_code::R: add<op_code::R, curve>(w, o, start_ms, end_ms); break;
            case op_code::B_after_f: add<op_code::B_after_f, curve>(w, o, start_ms, end_ms); break;
            case op_code::B_after_R: add<op_code::B_after_R, curve>(w, o, start_ms, end_ms); break;
        }
    }

    /// add() for an F or a B (`backward`) after its F when nothing is split off (schedules of F and
    /// B only), k its (stage, micro-batch) index: the same figures, without a branch on the kind.
    template <bool curve>
    [[gnu::always_inline]] void add_forward_backward(device_walk& w, bool backward, std::size_t k, double start_ms,
                                                     double end_ms) const noexcept {
        const double stored = stored_[k];
        const double held_mb = backward ? stored : 0.0;   // F: nothing; B: what its F left
        const double after_mb = backward ? 0.0 : stored;  // held_after_mb(): F stored, B (no split) 0
        const double during = w.state_mb + w.stored_mb - held_mb + peak_[k];
        w.stored_mb += after_mb - held_mb;
        record<curve>(w, start_ms, end_ms, during);
    }

private:
    /// The op's peak, busy time and the two steps of its curve (a step of zero length, when the
    /// op starts as the previous one ended, is replaced by the op's own; without a branch on the
    /// data: which steps collapse is about every other op).
    template <bool curve>
    [[gnu::always_inline]] static void record(device_walk& w, double start_ms, double end_ms, double during_mb) noexcept {
        if (during_mb > w.peak_mb) {
            w.peak_mb = during_mb;
            w.peak_span = w.span;
        }
        ++w.span;
        w.busy_ms += end_ms - start_ms;
        if constexpr (curve) {
            w.curve -= equal_as_one(w.last_end_ms, start_ms);
            w.curve[0] = {start_ms, during_mb};
            w.curve[1] = {end_ms, w.state_mb + w.stored_mb};
            w.curve += 2;
            w.last_end_ms = end_ms;
        }
    }

    op_model model_;
    const double* stored_;  ///< the scenario's stored_mb and peak_mb (read through the scenario, they
    const double* peak_;    ///< would be reloaded after every store)
};

/// A device in structure_builder's run, in one cache line: what a visit of it reads and writes
/// (the op it runs next, its order's end, its clock) and what waking it reads (the slot it waits
/// for). A visit's chain of loads is then the device (popped from the stack), this line, its op.
struct alignas(64) device_cursor {
    const op* next = nullptr;  ///< the op it runs next (or waits at)
    const op* end = nullptr;
    device_clock clock;
    std::size_t blocked_on = SIZE_MAX;  ///< the slot it waits for, or none
};

/// structure_builder's tables, kept in the workspace between builds.
struct structure_scratch {
    huge_page_vector<std::uint32_t> done;  ///< per slot: the timeline entry of the op that wrote it, or unfinished
    /// Per (stage, micro-batch): bit 1 its forward was an f, bit 2 an R ran; written when some op
    /// is an f (sweep_structure::any_recompute), and, with a B's kind, its op_code (code_of(): the
    /// recording pass reads it; as no f or R can follow its B, the flags a B ran with are those
    /// at the end of the run).
    std::vector<std::uint8_t> checkpoint;
    std::vector<device_cursor> cursors;   ///< per device
    std::vector<std::uint32_t> ready;      ///< the devices to run, a stack
    /// Kept steps only: per entry its op's level (1 + the largest of its inputs' and of the op
    /// before it on its device; entry 0: level 0), per step its level, the steps by level.
    huge_page_vector<std::uint32_t> level, step_level, at_level;
    huge_page_vector<sweep_step> by_level;
};

/// Runs the devices of a schedule as far as their inputs allow, timing each op into its timeline
/// entry (the file comment): run() is false for what the free-network replay leaves to the general
/// replay, which gives the result or names the fault: an op out of range, on another device,
/// overlapped with the next, repeated or missing, an R not after its f or after its B, a W
/// without a split, a deadlock, a duration that is negative or not finite.
class structure_builder {
public:
    /// Times `sched` on `sc` (the shape of `st`, set_shape()) from the devices' `clocks` into
    /// `timeline` (sweep_structure::span_of()), and the clocks at the end into `clocks` when run()
    /// succeeds; writes the steps into `st` when `keep_steps`.
    structure_builder(sweep_structure& st, structure_scratch& scratch, device_clock* clocks, op_timing* timeline,
                      const scenario& sc, const pipeline_schedule& sched, bool keep_steps) noexcept
        : st_(st), scratch_(scratch), done_(scratch.done), checkpoint_(scratch.checkpoint), cursors_(scratch.cursors),
          ready_(scratch.ready), clocks_(clocks), timeline_(timeline), sc_(sc), sched_(sched), V_(sc.stages),
          M_(sc.microbatches), VM_(V_ * M_), keep_steps_(keep_steps), fwd_(sc.forward_ms.data()),
          bwd_(sc.backward_ms.data()), w_(sched.w_share), one_minus_w_(1.0 - sched.w_share) {}

    [[nodiscard]] bool run() {
        const std::size_t D = st_.D;
        prepare(D);
        const tables t = tables_of();
        for (std::size_t d = 0; d < D; ++d) {  // each device's first op (run_device() checks the others)
            const device_cursor& c = cursors_[d];
            if (c.next != c.end && !valid_on(t, *c.next, static_cast<std::uint32_t>(d))) return false;
        }
        // The devices that can run, a stack: each device is on it at most once (pushed first,
        // or when woken from a wait, after it was popped), so D entries hold it. Last in, first
        // out: a woken device runs at once, while its inputs are in the cache, and runs ~2 ops
        // per visit in 1F1B at S 64 (a queue: 0.7).
        ready_.resize(D);
        std::uint32_t* top = ready_.data();
        for (std::size_t d = D; d-- > 0;) *top++ = static_cast<std::uint32_t>(d);
        const bool large = st_.first_op[D] >= prefetch_from_ops;
        if (!(keep_steps_ ? (large ? run_all<true, true>(top) : run_all<false, true>(top))
                          : (large ? run_all<true, false>(top) : run_all<false, false>(top))))
            return false;
        for (std::size_t d = 0; d < D; ++d) {
            if (cursors_[d].blocked_on != none) return false;  // a deadlock (or a missing input)
            clocks_[d] = cursors_[d].clock;
        }
        const std::size_t keys = V_ * M_;
        const std::size_t forwards = count_[kind_index(op_kind::F)] + count_[kind_index(op_kind::F_checkpoint)];
        if (forwards != keys || count_[kind_index(op_kind::B)] != keys ||
            count_[kind_index(op_kind::W)] != (st_.split ? keys : 0))
            return false;
        st_.any_w = count_[kind_index(op_kind::W)] > 0;
        st_.any_inline = any_inline_;
        st_.any_recompute = count_[kind_index(op_kind::F_checkpoint)] + count_[kind_index(op_kind::R)] > 0;
        if (keep_steps_) {
            keep_ends(D);
            sort_by_level();
        }
        st_.has_steps = keep_steps_;
        return true;
    }

private:
    /// The table slots' classes (F and f, B, R, W): class c's table is at c·V·M, (stage,
    /// micro-batch) k's slot at c·V·M + k. (There is no slot for the input that does not exist:
    /// a one-slot table would take a page of its own where the F and B tables fill whole pages,
    /// as 1F1B's at S 64, M 4096 fill one 2 MiB page; a forward of stage 0 reads entry 0 without
    /// a slot.)
    enum op_class : std::uint8_t { fwd = 0, bwd = 1, rec = 2, wgt = 3 };
    static constexpr std::size_t none = SIZE_MAX;
    static constexpr std::uint32_t unfinished = UINT32_MAX;

    [[nodiscard]] static constexpr std::size_t kind_index(op_kind k) noexcept { return static_cast<std::size_t>(k); }
    /// Sizes the steps and the tables (the forward and backward classes unfinished; R and W on
    /// their first op).
    void prepare(std::size_t D) {
        const std::size_t n = st_.first_op[D];
        st_.any_inline = false;
        if (keep_steps_) {
            reserve_scratch(st_.steps, n + time_ahead);
            st_.steps.resize(n + time_ahead);
            std::fill_n(st_.steps.begin() + static_cast<std::ptrdiff_t>(n), time_ahead, sweep_step{0, 0, 0});  // read ahead, not run
        } else {
            st_.steps.clear();
        }
        if (keep_steps_) {
            reserve_scratch(scratch_.level, sweep_structure::span_of(n, D));
            scratch_.level.resize(sweep_structure::span_of(n, D));
            scratch_.level[0] = 0;
            reserve_scratch(scratch_.step_level, n);
            scratch_.step_level.resize(n);
            level_p_ = scratch_.level.data();
            step_level_p_ = scratch_.step_level.data();
        }
        const std::size_t keys = V_ * M_;
        reserve_scratch(done_, 4 * keys);
        done_.resize(4 * keys);  // R and W only written when opened
        std::fill_n(done_.begin(), 2 * keys, unfinished);
        cursors_.resize(D);
        for (std::size_t d = 0; d < D; ++d) {
            const std::vector<op>& order = sched_.orders[d];
            cursors_[d] = {order.data(), order.data() + order.size(), clocks_[d], none};
        }
        done_p_ = done_.data();
        steps_p_ = st_.steps.data();
    }

    /// Orders the steps by level (stable, so each device's ops stay in its order): the ops of a
    /// level are independent, so time_steps() overlaps them, where in the order the devices ran
    /// each op mostly waits for the one before it (its input, just stored). A counting sort.
    void sort_by_level() {
        const std::size_t n = count_all_;
        const std::size_t levels = std::size_t{max_level_} + 2;
        huge_page_vector<std::uint32_t>& at = scratch_.at_level;
        at.assign(levels, 0);
        const std::uint32_t* step_level = scratch_.step_level.data();
        for (std::size_t i = 0; i < n; ++i) ++at[step_level[i] + 1];
        for (std::size_t l = 1; l < levels; ++l) at[l] += at[l - 1];
        huge_page_vector<sweep_step>& sorted = scratch_.by_level;
        reserve_scratch(sorted, st_.steps.size());
        sorted.resize(st_.steps.size());
        for (std::size_t i = 0; i < n; ++i) sorted[at[step_level[i]]++] = st_.steps[i];
        std::copy(st_.steps.begin() + static_cast<std::ptrdiff_t>(n), st_.steps.end(), sorted.begin() + static_cast<std::ptrdiff_t>(n));
        st_.steps.swap(sorted);
    }

    /// Keeps each device's first and last op (sweep_structure::may_match()).
    void keep_ends(std::size_t D) {
        st_.ends.resize(2 * D);
        for (std::size_t d = 0; d < D; ++d)
            if (!sched_.orders[d].empty()) {
                st_.ends[2 * d] = sched_.orders[d].front();
                st_.ends[2 * d + 1] = sched_.orders[d].back();
            }
    }

    /// The class table of `c` set to unfinished on its first op.
    void open_class(op_class c) {
        if (opened_[c]) return;
        opened_[c] = true;
        std::fill_n(done_.begin() + static_cast<std::ptrdiff_t>(c * V_ * M_), V_ * M_, unfinished);
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

    enum class outcome : std::uint8_t { ran, waits, refused };
    /// What the per-op path reads, a local of run_all() (members would be loaded again after
    /// each store through a pointer that may alias them, as a char's may); run_device() is inlined
    /// into run_all(), so a visit of a device (~2 ops in 1F1B at S 64) does not load them again.
    struct tables {
        std::uint32_t* done;
        op_timing* entries;
        const double* fwd;  ///< the scenario's forward_ms and backward_ms
        const double* bwd;
        const std::uint32_t* device_of_stage;
        device_cursor* cursors;
        std::size_t V, M, VM;
    };
    static constexpr std::size_t prefetch_from_ops = std::size_t{1} << 16;

    [[nodiscard]] tables tables_of() noexcept {
        return {done_p_, timeline_, fwd_, bwd_, st_.device_of_stage.data(), cursors_.data(), V_, M_, VM_};
    }

    /// Runs the devices on the stack (ready_ up to `top`) until it is empty; false on what run()
    /// refuses.
    template <bool prefetch, bool keep>
    bool run_all(std::uint32_t* top) {
        const tables t = tables_of();
        const std::uint32_t* bottom = ready_.data();
        while (top != bottom) {
            const std::uint32_t d = *--top;
            if (!run_device<prefetch, keep>(t, d, top)) return false;
        }
        return true;
    }

    /// Whether op `o` may run on device d: its micro-batch and stage in range, not overlapped, its
    /// stage on d.
    [[nodiscard, gnu::always_inline]] static bool valid_on(const tables& t, op o, std::uint32_t d) noexcept {
        return o.microbatch < t.M && o.stage < t.V && !o.overlaps_next && t.device_of_stage[o.stage] == d;
    }

    /// Runs device d's order from its cursor until it ends or waits (devices it wakes go on the
    /// stack at `top`); false on what run() refuses. Each op is checked (valid_on()) once, before
    /// it is first tried: a device's first op before the run (run()), the next op after each op
    /// that ran. A device runs first from its first op, later only when woken from a wait, from
    /// the op it waited at, which was checked then.
    template <bool prefetch, bool keep>
    [[gnu::always_inline]] bool run_device(const tables& t, std::uint32_t d, std::uint32_t*& top) {
        device_cursor& dc = t.cursors[d];
        const op* next = dc.next;  // in registers
        const op* const end = dc.end;
        device_clock c = dc.clock;
        // A device runs a few ops per visit, the other devices' visits come between, so its
        // many streams (its order, its rows of the scenario and of the tables, its timeline and
        // curve) are read in short bursts that the hardware prefetchers do not follow: fetch
        // them a few ops ahead (in a schedule of prefetch_from_ops ops or more; a smaller one
        // stays in the caches).
        outcome r = outcome::ran;
        if (next != end) {
            for (;;) {
                const op o = *next;
                const std::size_t k = o.stage * t.M + o.microbatch;
                if constexpr (prefetch) {  // (the entry of the op: c.span)
                    prefetch_line(address_of(t.fwd + k + 8));
                    prefetch_line(address_of(t.bwd + k + 8));
                    prefetch_line(address_of(t.done + k + 16));
                    prefetch_line(address_of(t.done + t.VM + k + 16));
                    prefetch_line(address_of(next) + 4 * sizeof(op));
                    prefetch_line<1>(address_of(t.entries + c.span + 3));
                }
                r = run_op<prefetch, keep>(t, o, next, k, dc, c, top);
                if (r != outcome::ran || ++next == end) break;
                if (!valid_on(t, *next, d)) return false;
            }
        }
        dc.next = next;
        dc.clock = c;
        return r != outcome::refused;
    }

    /// Adds op `o` (checked; its (stage, micro-batch) k; `at` where it is in the order) of the
    /// device of `dc` (its clock `c`, in registers), or finds what it waits for.
    template <bool prefetch, bool keep>
    [[gnu::always_inline]] outcome run_op(const tables& t, op o, const op* at, std::size_t k, device_cursor& dc,
                                          device_clock& c, std::uint32_t*& top) {
        switch (o.kind) {
            case op_kind::F: return step<op_kind::F, prefetch, keep>(t, o, at, k, dc, c, top);
            case op_kind::B: return step<op_kind::B, prefetch, keep>(t, o, at, k, dc, c, top);
            case op_kind::W: return step<op_kind::W, prefetch, keep>(t, o, at, k, dc, c, top);
            case op_kind::F_checkpoint: return step<op_kind::F_checkpoint, prefetch, keep>(t, o, at, k, dc, c, top);
            case op_kind::R: return step<op_kind::R, prefetch, keep>(t, o, at, k, dc, c, top);
        }
        return outcome::refused;
    }

    /// An op's table slots: its own and its inputs' (timing.hpp's cross_producer() and
    /// local_producer(); an op with one input has its slot as both, the later of two equal ends
    /// being that end); `inputs` false for a forward of stage 0 (its inputs are entry 0's).
    struct op_slots {
        std::size_t own, cross, local;
        bool inputs;
        bool from_other_stage;  ///< it has a cross input (cross_producer())
    };
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
    /// The slots of op `o` of kind K, its (stage, micro-batch) k, its flags `fl` (a B's): with K
    /// known, the producers' kinds are constants.
    template <op_kind K>
    [[nodiscard, gnu::always_inline]] static op_slots slots_of(const tables& t, op o, std::size_t k, std::uint8_t fl) noexcept {
        const cross_target from = cross_producer(op{K, o.microbatch, o.stage}, t.V);
        const std::optional<op_kind> local_kind = local_producer(K, (fl & 2) != 0);
        const std::size_t own = class_of(K) * t.VM + k;
        const std::size_t local = local_kind ? class_of(*local_kind) * t.VM + k : own;
        const std::size_t cross = from.has ? class_of(from.to.kind) * t.VM + from.to.stage * t.M + from.to.microbatch : local;
        return {own, cross, local_kind ? local : cross, from.has || local_kind.has_value(), from.has};
    }

    /// The duration of an op of kind K (code `code`), its (stage, micro-batch) k: timing.hpp's
    /// op_model::duration_ms(), from the scenario's rows.
    template <op_kind K>
    [[nodiscard, gnu::always_inline]] double duration_of(const tables& t, op o, std::size_t k, op_code code) const noexcept {
        if constexpr (K == op_kind::B)
            return t.bwd[k] * one_minus_w_ + (code == op_code::B_after_f ? sc_.ratio(o.stage) * t.fwd[k] : 0.0);
        if constexpr (K == op_kind::W) return t.bwd[k] * w_;
        return t.fwd[k];
    }

    /// Runs op `o` (of kind K; `at` in the order) on the device of `dc` (its clock `c`): times it
    /// into its entry, or finds the input it waits for.
    template <op_kind K, bool prefetch, bool keep>
    [[gnu::always_inline]] outcome step(const tables& t, op o, const op* at, std::size_t k, device_cursor& dc,
                                        device_clock& c, std::uint32_t*& top) {
        const std::uint8_t fl = K == op_kind::B ? flags(k) : 0;
        const op_slots s = slots_of<K>(t, o, k, fl);
        std::uint32_t* done = t.done;
        std::uint32_t cross = 0, local = 0;  // entry 0: the input that does not exist, ended at 0
        if (s.inputs) {
            cross = done[s.cross];
            local = K == op_kind::B ? done[s.local] : cross;  // one input: its slot is both
        }
        if (cross == unfinished || local == unfinished) {
            dc.blocked_on = cross == unfinished ? s.cross : s.local;
            return outcome::waits;
        }
        if (!admit<K>(s.own, k)) return outcome::refused;
        const op_code code = code_of(K, fl);
        if constexpr (K == op_kind::B) any_inline_ |= code == op_code::B_after_f;
        op_timing* entries = t.entries;
        const double dur = duration_of<K>(t, o, k, code);
        // The local input ran before on this device (on the op's stage), so it ended by the
        // device's free time: max(free, cross input, local input) = max(free, cross input), the
        // same double (and 0 when there is no cross input), without a load of the local's entry.
        const double ready = s.from_other_stage ? entries[cross].end_ms : 0.0;
        const double start = std::max(c.free_ms, ready);
        c.free_ms = start + dur;
        if (!(dur >= 0.0) || !(c.free_ms < std::numeric_limits<double>::infinity())) return outcome::refused;
        const std::uint32_t span = c.span++;
        op_timing& e = entries[span];
        std::memcpy(&e.o, at, sizeof(op));  // the op in 16 bytes at once (field by field: 4 stores)
        e.start_ms = start;
        e.end_ms = c.free_ms;
        if constexpr (keep) keep_step(K, k, code, s.from_other_stage ? cross : 0, local, span, c);
        done[s.own] = span;
        ++count_[kind_index(K)];
        wake<K, prefetch>(t, o, s.own, top);
        return outcome::ran;
    }

    /// Writes the step of op (kind, k, code) with its cross input's entry `cross` (0: none) and
    /// its own `span`, and its level (structure_scratch: from its inputs' entries `cross` and
    /// `local`) into the device's clock.
    [[gnu::always_inline]] void keep_step(op_kind kind, std::size_t k, op_code code, std::uint32_t cross, std::uint32_t local,
                                          std::uint32_t span, device_clock& c) {
        c.level = std::max({level_p_[cross], level_p_[local], c.level}) + 1;
        level_p_[span] = c.level;
        max_level_ = std::max(max_level_, c.level);
        step_level_p_[count_all_] = c.level;
        steps_p_[count_all_++] = {cross | static_cast<std::uint32_t>(code) << sweep_structure::code_shift, span,
                                  sweep_structure::key_of(kind, k)};
    }

    /// Checks what an op of kind K (its table slot `own`, its (stage, micro-batch) k) needs
    /// besides its inputs and marks an f or R: false when it repeats an op, is an R not after
    /// its f or after its B, or a W without a split.
    template <op_kind K>
    [[gnu::always_inline]] bool admit(std::size_t own, std::size_t k) {
        if constexpr (K == op_kind::F_checkpoint) checkpoint_flags()[k] |= 1;
        if constexpr (K == op_kind::R) {
            open_class(rec);
            if (!(flags(k) & 1) || done_p_[VM_ + k] != unfinished) return false;  // its f; its B not run
            checkpoint_flags()[k] |= 2;
        }
        if constexpr (K == op_kind::W) {
            if (!st_.split) return false;
            open_class(wgt);
        }
        return done_p_[own] == unfinished;
    }

    /// An op of kind K wrote slot `own`: the device of the op it feeds on another stage
    /// (timing.hpp's cross_successor()) runs on when it waits for that slot (with `prefetch`, the
    /// line of the op it waits at is fetched: it runs after the visit that woke it).
    template <op_kind K, bool prefetch>
    [[gnu::always_inline]] void wake(const tables& t, op o, std::size_t own, std::uint32_t*& top) {
        const cross_target to = cross_successor(op{K, o.microbatch, o.stage}, t.V);
        if (!to.has) return;
        const std::uint32_t e = t.device_of_stage[to.to.stage];
        if (t.cursors[e].blocked_on != own) return;
        t.cursors[e].blocked_on = none;
        if constexpr (prefetch) prefetch_line(address_of(t.cursors[e].next));
        *top++ = e;
    }

    sweep_structure& st_;
    structure_scratch& scratch_;
    huge_page_vector<std::uint32_t>& done_;
    std::vector<std::uint8_t>& checkpoint_;
    std::vector<device_cursor>& cursors_;
    std::vector<std::uint32_t>& ready_;
    device_clock* clocks_;
    op_timing* timeline_;
    const scenario& sc_;
    const pipeline_schedule& sched_;
    std::size_t V_, M_, VM_;
    bool keep_steps_;
    const double* fwd_;  ///< the scenario's forward_ms and backward_ms
    const double* bwd_;
    double w_, one_minus_w_;  ///< the backward split w and 1 − w
    // The tables' data, as pointers (not through the vectors, read again after each store).
    std::uint32_t* done_p_ = nullptr;
    sweep_step* steps_p_ = nullptr;
    std::uint32_t* level_p_ = nullptr;
    std::uint32_t* step_level_p_ = nullptr;
    std::uint32_t max_level_ = 0;
    std::size_t count_all_ = 0;
    std::size_t count_[5] = {0, 0, 0, 0, 0};
    bool opened_[4] = {true, true, false, false};
    bool checkpointed_ = false;
    bool any_inline_ = false;
};

/// The durations of each op_code of `st` on `sc` (timing.hpp's op_model, `w` the backward
/// split), indexed by key: the scenario's forward_ms for F/f/R, its backward_ms for B when
/// nothing is split off (B = backward·1 + 0 is the same time: no time here is −0), else tables
/// in `out`.
inline void durations_of(const sweep_structure& st, const scenario& sc, double w, sweep_times& out,
                         const double* (&table)[op_codes]) {
    const std::size_t V = st.V, M = st.M, keys = V * M;
    const op_model model(sc, w);
    auto fill = [&](huge_page_vector<double>& to, op_kind kind, bool inline_recompute) {
        reserve_scratch(to, keys);
        to.resize(keys);
        for (std::size_t v = 0; v < V; ++v)
            for (std::size_t j = 0; j < M; ++j)
                to[v * M + j] = model.duration_ms(op{kind, static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(v)},
                                                  inline_recompute);
        return to.data();
    };
    const double* backward = w == 0.0 ? sc.backward_ms.data() : fill(out.backward_ms, op_kind::B, false);
    table[static_cast<std::size_t>(op_code::F)] = table[static_cast<std::size_t>(op_code::f)] =
        table[static_cast<std::size_t>(op_code::R)] = sc.forward_ms.data();
    table[static_cast<std::size_t>(op_code::B)] = table[static_cast<std::size_t>(op_code::B_after_R)] = backward;
    table[static_cast<std::size_t>(op_code::W)] = st.any_w ? fill(out.weight_ms, op_kind::W, false) : nullptr;
    table[static_cast<std::size_t>(op_code::B_after_f)] = st.any_inline ? fill(out.inline_ms, op_kind::B, true) : nullptr;
}

/// The bits of a duration as an unsigned integer: above those of +infinity exactly when it is
/// negative (−0 included: its op then goes to the general replay, which gives the same time) or NaN.
[[nodiscard, gnu::always_inline]] inline std::uint64_t duration_bits(double x) noexcept {
    std::uint64_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}
inline constexpr std::uint64_t infinity_bits = 0x7ff0000000000000;

/// The timing pass over the kept steps of `st` into `timeline`: each step's entry gets its start,
/// end and key (in o.microbatch, sweep_structure::key_of(); the recording pass writes the op),
/// and each device's clock in `clocks` its last end. False when a duration is negative (−0
/// included: the general replay gives the same times) or not finite, or a time overflows.
inline bool time_steps(const sweep_structure& st, const scenario& sc, double w, sweep_times& times, device_clock* clocks,
                       op_timing* timeline) {
    const double* table[op_codes];
    durations_of(st, sc, w, times, table);
    const std::size_t N = st.first_op[st.D];
    for (std::size_t d = 0; d < st.D; ++d)  // before each device's first op: ended at 0
        timeline[sweep_structure::span_of(st.first_op[d], d) - 1] = op_timing{};
    const sweep_step* steps = st.steps.data();
    constexpr std::uint32_t mask = sweep_structure::span_mask;
    constexpr unsigned shift = sweep_structure::code_shift;
    std::uint64_t bits = 0;  // the largest duration_bits(): without a branch
    // The steps interleave the devices, so the durations (rows per stage) and the timeline's rows
    // are many short streams that the hardware prefetchers do not follow: fetch the lines of the
    // step time_ahead steps on (the steps' end is padded).
    for (std::size_t t = 0; t < N; ++t) {
        const sweep_step s = steps[t];
        const sweep_step& next = steps[t + time_ahead];
        prefetch_line(address_of(table[next.cross_code >> shift] + (next.key & mask)));
        prefetch_line<1>(address_of(timeline + next.own));
        const double dur = table[s.cross_code >> shift][s.key & mask];
        bits = std::max(bits, duration_bits(dur));
        // inputs there (the local one ended by the entry before: builder's step()), device free
        const double start = std::max(timeline[s.cross_code & mask].end_ms, timeline[s.own - 1].end_ms);
        op_timing& e = timeline[s.own];
        e.o.microbatch = s.key;
        e.start_ms = start;
        e.end_ms = start + dur;
    }
    for (std::size_t d = 0; d < st.D; ++d) {
        clocks[d].free_ms = timeline[sweep_structure::span_of(st.first_op[d + 1], d) - 1].end_ms;
        bits = std::max(bits, duration_bits(clocks[d].free_ms));
    }
    return bits < infinity_bits;
}

/// The recording pass of one device: its `n` entries from `entries` in order into `walk`
/// (`flags`: the checkpoint flags per (stage, micro-batch) that tell a B's code, code_of();
/// nullptr when no op is an f or R; `forward_backward`: the ops are F and B only, nothing split
/// off, no code needed; `curve`: walk.curve is recorded); `order`: the device's order, whose ops
/// the entries are. With `verify` (after time_steps()), also whether each op of `order` has its
/// entry's key (false when the orders differ from the kept ones: the figures are then to be
/// dropped, but no table is read out of its range), and each entry gets its op.
template <bool forward_backward, bool verify, bool curve>
bool record_device(const sweep_recorder& recorder, device_walk& walk, op_timing* entries, const std::uint8_t* flags,
                   std::uint32_t n, const op* order) {
    device_walk w = walk;                 // in registers, as the recorder (the op's copy into its
    const sweep_recorder rec = recorder;  // entry may alias anything: read through references,
    const std::uint64_t M = rec.microbatches(), V = rec.stages();  // these would be loaded again)
    constexpr unsigned shift = sweep_structure::code_shift;
    std::uint64_t differ = 0;  // or-ed: without a branch
    for (std::uint32_t i = 0; i < n; ++i) {
        op_timing& e = entries[i];
        op o = order[i];
        std::uint64_t k = std::uint64_t{o.stage} * M + o.microbatch;
        if constexpr (verify) {  // the key: k below 2^29 (M is), of a micro-batch in range, no pair
            differ |= ((k | std::uint64_t{static_cast<std::uint8_t>(o.kind)} << shift) ^ e.o.microbatch) |
                      (k | (M - 1 - o.microbatch)) >> shift | static_cast<std::uint64_t>(o.overlaps_next);
            k = e.o.microbatch & sweep_structure::span_mask;  // the step's (stage, micro-batch): in range
            o.microbatch = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.microbatch, M - 1));
            o.stage = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.stage, V - 1));
        }
        if constexpr (forward_backward)
            rec.add_forward_backward<curve>(w, o.kind == op_kind::B, k, e.start_ms, e.end_ms);
        else
            rec.add<curve>(code_of(o.kind, flags ? flags[k] : 0), w, o, e.start_ms, e.end_ms);
        // the op in 16 bytes at once (field by field, g++ copied it through the stack: op has padding)
        if constexpr (verify) std::memcpy(&e.o, order + i, sizeof(op));
    }
    walk = w;
    return differ == 0;
}

}  // namespace pipeplan::schedule::detail
