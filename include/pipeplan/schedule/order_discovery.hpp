// pipeplan/schedule/order_discovery.hpp — discover a per-device op order by simulating a
// greedy, memory-aware policy (the engine behind the adaptive and zero-bubble schedules).
//
// The engine runs the one timing model (timing.hpp: durations, data flow, message sizes; the
// links of links.hpp) that the simulator replays, but, instead of replaying a fixed order, lets
// every idle device pick its next op:
//   - a ready backward B (the smallest micro-batch first; backwards free memory and unblock
//     the stages upstream), or
//   - a ready forward F — of a micro-batch the device already admitted (a later chunk), or
//     the admission of the next micro-batch in order if the memory limit and the in-flight
//     limit allow it;
//     which of the two goes first when both are possible is the device's preference:
//     backward-first, forward-first, or alternate (the kind it did not run last);
//   - otherwise (split backward only) a pending weight-gradient W, which fills the bubble;
//   - otherwise it waits for the next message or completion.
// Events at equal times are taken completions first, then by device index; everything is
// deterministic.
// Admission reserves on the device everything the micro-batch will hold there: its stored
// activations on each of the device's stages plus the largest transient (peak - stored) of any
// admitted micro-batch. A device with nothing in flight can always admit, so the discovery
// never deadlocks; when a single micro-batch does not fit the limit, it throws limit_exceeded.
// Micro-batches are admitted in order on every device. The recorded start order is the
// schedule; the simulator then replays it wait-free.
// Stage memory (discovery_policy::stage_memory, the V schedules): reserving a micro-batch's
// activations on all of a device's stages at admission is too coarse when its chunks run far
// apart (ZB-V's first device runs 2S - 1 first-chunk forwards before the first second-chunk
// one). Instead a device holds the stored activations of each (micro-batch, stage) from the start
// of its forward to the end of the op that frees them (W, or B without a split), and a forward
// starts only if the model state, what the device holds, the forward's stored activations and
// the largest transient of the micro-batches in flight fit the limit (and the held activations
// fit discovery_policy::held_limit_mb); admitting a micro-batch also keeps room under the memory
// limit for the largest later-stage forward still owed by an admitted micro-batch (or by
// itself), so the forward coming back up the V usually finds room. What a device holds is a
// running sum (added at each forward, taken off at each W; exactly 0 when nothing is held; the
// simulator's replay measures the peak itself). Such a run can stall (every
// device waiting for memory): the result says so, and the V generators then run the
// per-micro-batch reservation, which cannot.
//
// Cost: O(ops · log) time and O(D · M) memory. Each device keeps its candidates of each kind in
// two heaps (not yet arrived, by arrival; arrived, by (mb, stage)); the next event is each
// device's one completion or wake-up, the earliest found by a scan of the devices (up to
// event_queue::scan_devices), else kept by a tournament over the devices (up to
// event_queue::tournament_devices: log2 D compares when a device's times change) or by one global
// heap with lazy invalidation (beyond); the largest transient in flight comes from a lazy
// max-heap, so does (stage memory) the largest later-stage forward owed, what a device holds is a
// count and a running sum (no list to search), and the reserved memory comes from reserved_memory
// below, which gives the exact floating-point sum the rule defines without re-adding the in-flight
// set on every release. The engine (detail::order_discovery) is reusable: prepare() computes the
// scenario's tables once, run() runs one policy, and its scratch memory stays between runs
// (discover_order() uses one per thread; adaptive runs its preference candidates on one
// prepare()), so a warm engine does not allocate. A run also records where each device's
// preference made a choice (choice_masks), so adaptive can skip a candidate that would repeat a
// run (same_decisions).
// tests/schedule/order_discovery_reference.hpp is the same policy with linear scans (quadratic); a
// property test checks both give the same orders.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/links.hpp"
#include "pipeplan/schedule/timing.hpp"

namespace pipeplan::schedule {

/// Knobs of the greedy discovery.
struct discovery_policy {
    std::string schedule = "adaptive";  ///< the schedule that runs the discovery (named in errors)
    double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< per device
    /// Per device: at most this many micro-batches in flight (admitted and not yet released);
    /// empty = unlimited; one value = the same for every device.
    std::vector<std::size_t> inflight_limit;
    double w_share = 0.0;  ///< > 0: split backwards into B and W (W takes this share)
    /// Which of a ready backward and an admissible forward an idle device runs first.
    enum class preference : std::uint8_t {
        backward_first,  ///< always the backward (frees memory soonest)
        forward_first,   ///< always the forward (fills the pipeline soonest)
        alternate,       ///< the kind it did not run last (1F1B-like cycling)
    } prefer = preference::backward_first;
    /// Per-device override of `prefer` (empty: `prefer` everywhere).
    std::vector<preference> prefer_on;
    /// Memory held per stage instead of reserved per micro-batch (the V schedules: see
    /// "Stage memory" in the file comment).
    bool stage_memory = false;
    /// > 0 (split backward only): a device with this many weight gradients W pending runs one
    /// before anything else (zero-bubble's bound on pending backwards); 0 = W only fills waits.
    std::size_t max_pending_w = 0;
    /// Stage memory only: per device, a bound (MB) on the stored activations it holds (the V
    /// schedules' share of 1F1B's activation memory); empty = none.
    std::vector<double> held_limit_mb;
    /// The run gives up (discovery_result::gave_up) once its makespan is sure to exceed this: a
    /// device's op ends, plus the durations of the ops the device has yet to start, lies above it
    /// by more than a relative 1e-9 (the rounding of those running sums is below 1e-12). For
    /// the inner loops of order searches, where an order slower than the one to beat is only
    /// compared. Infinite: every run completes.
    double give_up_above_ms = std::numeric_limits<double>::infinity();
    /// Record where each device's preference made a choice (order_discovery::choice_masks(), which
    /// adaptive reads); false leaves the masks 0 and spares a backward-first device the look at
    /// its forwards when it runs a ready backward anyway (the V schedules).
    bool record_choices = true;
};

/// The discovered orders and the makespan they reach (the simulator's replay of the orders
/// reproduces it exactly: same timing model, and every op started as early as the order lets it).
struct discovery_result {
    device_orders orders;
    double makespan_ms = 0.0;
    /// Stage memory only: the run stopped with ops left, every device waiting for memory that
    /// only another waiting device could free (the orders are then incomplete: not a schedule).
    bool stalled = false;
    /// The run stopped early: its makespan would exceed discovery_policy::give_up_above_ms, or it
    /// would stall (which one is not known). The orders are incomplete; makespan_ms is the
    /// time reached.
    bool gave_up = false;
};

namespace detail {

/// The memory a device reserved for its micro-batches in flight: by definition the sum of
/// their reservations added one by one in admission order, starting from 0 (floating-point
/// rounding makes that order part of the value). Admitting appends, so the sum extends by one
/// addition; releasing removes any member, after which the sum of the rest is in general not
/// the old sum minus the member. Instead of re-adding the rest on every release (O(in flight)),
/// it keeps a running sum P with a bound B on |P - exact sum| and bounds the ordered sum R by
/// the classic |R - exact| <= gamma(n-1) * exact (non-negative terms). A test f(R) <= limit
/// with f monotone in R is decided from the two ends of that interval; only when they disagree
/// (a near tie) is R re-added exactly, and then kept until the next release.
class reserved_memory {
public:
    /// Admits member `id` reserving `mb`.
    void add(std::uint32_t id, double mb) {
        live_.push_back({id, mb});
        ++count_;
        if (!(mb >= 0.0) || !std::isfinite(mb)) exact_only_ = true;
        if (exact_valid_) exact_ += mb;  // what re-adding the members in order gives
        track(running_ + mb);
    }
    /// Releases a member that reserved `mb` (the `released` predicate of fits() now names it).
    void remove(double mb) {
        --count_;
        exact_valid_ = false;
        if (count_ == 0) return clear_members();
        track(running_ - mb);
    }
    /// True when f(R) <= limit, R being the ordered sum of the members' reservations; f must be
    /// non-decreasing (sums of R and constants in floating point are). `released(id)` tells
    /// the members removed since they were added.
    template <class F, class Released>
    [[nodiscard]] bool fits(F&& f, double limit, Released&& released) {
        if (exact_valid_) return f(exact_) <= limit;
        if (!exact_only_) {
            constexpr double u = std::numeric_limits<double>::epsilon() / 2.0;
            const double n = static_cast<double>(count_);
            // |R - exact| <= gamma(n-1)·exact <= 2(n-1)u·exact while n·u <= 1/2; exact <= P + B;
            // factor 2 more for the rounding of this bound itself, and 2u·(|P| + width) for the
            // rounding of P ± width.
            double width = bound_ + 4.0 * n * u * (running_ + bound_);
            width += 4.0 * u * (std::fabs(running_) + width);
            const double lo = running_ - width, hi = running_ + width;
            if (std::isfinite(lo) && std::isfinite(hi) && n * u <= 0.25) {
                if (f(hi) <= limit) return true;
                if (!(f(lo) <= limit)) return false;
            }
        }
        return f(exact(released)) <= limit;
    }
    /// Forgets every member; room for `capacity` members in flight.
    void reset(std::size_t capacity) {
        clear_members();
        live_.reserve(capacity);
        exact_only_ = false;
    }
    /// Number of exact re-additions so far (near ties; for tests).
    [[nodiscard]] std::size_t exact_sums() const noexcept { return exact_sums_; }

private:
    struct member {
        std::uint32_t id;
        double mb;
    };
    void track(double running) {
        running_ = running;
        // One rounding of the running sum: at most u·|P| (2u here covers the bound's own
        // rounding), plus the smallest subnormal against underflow.
        bound_ += std::numeric_limits<double>::epsilon() * std::fabs(running_) + std::numeric_limits<double>::denorm_min();
    }
    void clear_members() {
        live_.clear();
        count_ = 0;
        running_ = bound_ = exact_ = 0.0;
        exact_valid_ = true;
    }
    template <class Released>
    double exact(Released&& released) {
        std::erase_if(live_, [&](const member& m) { return released(m.id); });
        exact_ = 0.0;
        for (const member& m : live_) exact_ += m.mb;
        exact_valid_ = true;
        ++exact_sums_;
        // The ordered sum is now known exactly; the running sum restarts from it.
        running_ = exact_;
        bound_ = 2.0 * std::numeric_limits<double>::epsilon() * static_cast<double>(count_) * exact_;
        return exact_;
    }

    std::vector<member> live_;  // admitted members in admission order (released ones until compaction)
    std::size_t count_ = 0;     // members in flight
    double running_ = 0.0;      // P
    double bound_ = 0.0;        // B >= |P - exact sum of the members|
    double exact_ = 0.0;        // R when exact_valid_
    bool exact_valid_ = true;
    bool exact_only_ = false;   // a negative or non-finite term: no interval (always re-add)
    std::size_t exact_sums_ = 0;
};

/// A device's candidates of one kind: those whose input has not arrived yet, in a min-heap by
/// arrival time, and those that have, in a min-heap by (micro-batch, stage) — the order in
/// which the policy takes them.
class candidate_queue {
public:
    /// Adds a candidate whose input arrives at `ready_ms`; `now_ms` is the current time (no
    /// later arrive() call has an earlier time), so one that is already there goes straight to
    /// the ready heap.
    void push(double ready_ms, std::uint32_t mb, std::uint32_t stage, double now_ms) {
        if (!(ready_ms > now_ms)) {
            ready_.push_back(key(mb, stage));
            std::push_heap(ready_.begin(), ready_.end(), std::greater<>{});
            return;
        }
        pending_.push_back({ready_ms, key(mb, stage)});
        std::push_heap(pending_.begin(), pending_.end(), later{});
    }
    /// Moves the candidates that arrived by `t_ms` to the ready heap (the test inline: most
    /// calls find none).
    [[gnu::always_inline]] void arrive(double t_ms) {
        if (!pending_.empty() && !(pending_.front().ready_ms > t_ms)) move_arrived(t_ms);
    }
    /// Forgets every candidate; room for `n` arrived ones (fewer reallocations while they fill).
    void reset(std::size_t n) {
        pending_.clear();
        ready_.clear();
        ready_.reserve(n);
    }
    [[nodiscard]] bool has_ready() const noexcept { return !ready_.empty(); }
    /// Number of arrived candidates.
    [[nodiscard]] std::size_t ready_count() const noexcept { return ready_.size(); }
    /// Stage of the first ready candidate (has_ready() must hold).
    [[nodiscard]] std::uint32_t first_stage() const noexcept { return static_cast<std::uint32_t>(ready_.front()); }
    /// Micro-batch of the first ready candidate (has_ready() must hold).
    [[nodiscard]] std::uint32_t first_mb() const noexcept { return static_cast<std::uint32_t>(ready_.front() >> 32); }
    /// Removes the first ready candidate and returns its key (mb_of / stage_of). A key, not an
    /// op: an op assembled in a non-inlined return goes through the stack.
    std::uint64_t take() {
        std::pop_heap(ready_.begin(), ready_.end(), std::greater<>{});
        const std::uint64_t k = ready_.back();
        ready_.pop_back();
        return k;
    }
    static constexpr std::uint64_t key(std::uint32_t mb, std::uint32_t stage) noexcept {
        return (static_cast<std::uint64_t>(mb) << 32) | stage;
    }
    static constexpr std::uint32_t mb_of(std::uint64_t k) noexcept { return static_cast<std::uint32_t>(k >> 32); }
    static constexpr std::uint32_t stage_of(std::uint64_t k) noexcept { return static_cast<std::uint32_t>(k); }
    /// Earliest arrival not yet moved to the ready heap (infinity when none).
    [[nodiscard]] double next_arrival_ms() const noexcept {
        return pending_.empty() ? std::numeric_limits<double>::infinity() : pending_.front().ready_ms;
    }

private:
    struct pending {
        double ready_ms;
        std::uint64_t key;
    };
    struct later {
        bool operator()(const pending& a, const pending& b) const noexcept { return a.ready_ms > b.ready_ms; }
    };
    void move_arrived(double t_ms) {
        do {
            std::pop_heap(pending_.begin(), pending_.end(), later{});
            ready_.push_back(pending_.back().key);
            pending_.pop_back();
            std::push_heap(ready_.begin(), ready_.end(), std::greater<>{});
        } while (!pending_.empty() && !(pending_.front().ready_ms > t_ms));
    }
    std::vector<pending> pending_;
    std::vector<std::uint64_t> ready_;
};

/// The next event of the discovery: per device its running op's completion and its wake-up
/// (each at most one; `never` when none), ranked by (time, completion before wake-up, device) —
/// the rule of the file comment. Up to tournament_devices devices, update(d) after a change of
/// d's times ranks d's earliest event and replays d's matches in a tournament over the devices
/// (each node keeps the earlier of its two halves' winners, the left one on ties, so the root
/// holds the first device among the earliest), and next() reads the root: log2 of the devices
/// compares per update instead of one per device and event; beyond, every
/// finite time set is pushed on a heap, and next() pops it, skipping the entries that a later
/// set made stale (O(log) per event). Up to scan_devices devices (the 4-device V plans), update(d)
/// does nothing and next() scans the times: the first device with the earliest completion, unless
/// a wake-up is strictly earlier (then the first device with that one) — the same event as the
/// rule's, with fewer instructions than ranking or replaying matches.
class event_queue {
public:
    static constexpr double never = std::numeric_limits<double>::infinity();
    static constexpr std::size_t tournament_devices = 16;
    /// Up to this many devices, next() scans the devices' times instead (no matches to replay).
    static constexpr std::size_t scan_devices = 4;

    struct event {
        std::size_t device;
        double t_ms;  // never: no event left
        bool wake;    // else the completion
    };

    /// `devices` devices with no event.
    void reset(std::size_t devices) {
        devices_ = devices;
        tournament_ = devices <= tournament_devices;
        scan_ = devices <= scan_devices;
        done_.assign(devices, never);
        wake_.assign(devices, never);
        key_.assign(tournament_ ? devices + 1 : 0, key{never, 0, 0});
        heap_.clear();
        if (!tournament_) return;
        key_[devices] = key{never, 2, 0};  // the padding leaves' key: after every device's
        leaves_ = std::bit_ceil(std::max<std::size_t>(devices, 1));
        winner_.assign(2 * leaves_, static_cast<std::uint32_t>(devices));
        for (std::size_t d = 0; d < devices; ++d) winner_[leaves_ + d] = static_cast<std::uint32_t>(d);
        for (std::size_t i = leaves_ - 1; i >= 1; --i) winner_[i] = match(i);
    }
    [[nodiscard]] double wake_at(std::size_t d) const noexcept { return wake_[d]; }
    void set_done(std::size_t d, double t) {
        done_[d] = t;
        if (!tournament_ && t < never) push({t, 0, static_cast<std::uint32_t>(d)});
    }
    void set_wake(std::size_t d, double t) {
        wake_[d] = t;
        if (!tournament_ && t < never) push({t, 1, static_cast<std::uint32_t>(d)});
    }
    /// Re-ranks device d after set_done / set_wake (tournament only; the heap has the entries).
    void update(std::size_t d) noexcept {
        if (!tournament_ || scan_) return;
        const bool w = !(done_[d] <= wake_[d]);
        key_[d] = key{w ? wake_[d] : done_[d], static_cast<std::uint32_t>(w), static_cast<std::uint32_t>(d)};
        // Up the tree until a match whose winner stays another device (nothing above changes).
        for (std::size_t i = (leaves_ + d) / 2; i >= 1; i /= 2) {
            const std::uint32_t was = winner_[i];
            winner_[i] = match(i);
            if (winner_[i] == was && was != d) break;
        }
    }
    /// The earliest event (removed from the heap; the caller then clears or resets its time).
    [[nodiscard]] event next() {
        if (scan_) {  // the first device among the earliest, as the tournament's root
            if (devices_ == 0) return {0, never, false};
            std::size_t done = 0, wake = 0;  // the first device with the earliest completion, wake-up
            for (std::size_t i = 1; i < devices_; ++i) {
                if (done_[i] < done_[done]) done = i;
                if (wake_[i] < wake_[wake]) wake = i;
            }
            if (done_[done] <= wake_[wake]) return {done, done_[done], false};
            return {wake, wake_[wake], true};
        }
        if (tournament_) {
            if (devices_ == 0) return {0, never, false};
            const std::size_t d = winner_[1];
            return {d, key_[d].t_ms, key_[d].wake != 0};
        }
        while (!heap_.empty()) {
            const key k = heap_.front();
            std::pop_heap(heap_.begin(), heap_.end(), later{});
            heap_.pop_back();
            if ((k.wake ? wake_[k.device] : done_[k.device]) == k.t_ms) return {k.device, k.t_ms, k.wake != 0};
        }
        return {0, never, false};
    }

private:
    struct key {
        double t_ms;
        std::uint32_t wake;  // 0 = completion, 1 = wake-up
        std::uint32_t device;
    };
    // Bitwise on bools: no branch to mispredict (which device wins is data, not a pattern).
    static bool before(const key& a, const key& b) noexcept {
        return (a.t_ms < b.t_ms) | ((a.t_ms == b.t_ms) & (a.wake < b.wake));
    }
    struct later {  // the heap's order: the full rule, the device included
        bool operator()(const key& a, const key& b) const noexcept {
            if (a.t_ms != b.t_ms) return a.t_ms > b.t_ms;
            if (a.wake != b.wake) return a.wake > b.wake;
            return a.device > b.device;
        }
    };
    // The winner of node i's match: its right half's when that is strictly earlier, else its
    // left half's (a padding leaf, devices_, is never earlier).
    [[nodiscard]] std::uint32_t match(std::size_t i) const noexcept {
        const std::uint32_t a = winner_[2 * i], b = winner_[2 * i + 1];
        return before(key_[b], key_[a]) ? b : a;
    }
    void push(key k) {
        heap_.push_back(k);
        std::push_heap(heap_.begin(), heap_.end(), later{});
    }
    std::size_t devices_ = 0;
    bool tournament_ = true;
    bool scan_ = true;  // devices <= scan_devices: next() scans done_ and wake_ (key_ unused)
    std::vector<double> done_, wake_;
    std::vector<key> key_;   // tournament: each device's earliest event, then the padding's
    std::size_t leaves_ = 1;  // tournament: its leaves, a power of two >= the devices
    std::vector<std::uint32_t> winner_;  // tournament: node i's winner (leaves at leaves_ + d)
    std::vector<key> heap_;  // beyond: min-heap of the times set, stale ones included
};

/// Whether a device whose preference is `p` runs a ready backward before a possible forward,
/// its last op having been a forward or not (the rule of the file comment).
[[nodiscard]] constexpr bool backward_first(discovery_policy::preference p, bool last_forward) noexcept {
    using pref = discovery_policy::preference;
    return p == pref::backward_first || (p == pref::alternate && last_forward);
}

/// True when a run with the per-device preferences `other` makes every decision that a run with
/// `ran` made (same scenario and other knobs), `ran_choices` being that run's choice_masks():
/// both then give the same orders and makespan. By induction over the run's steps: the
/// preference decides only where a device chose between a ready backward and a possible
/// forward, and `other` decides each such state (mask bit) as `ran` did.
[[nodiscard]] inline bool same_decisions(const std::vector<discovery_policy::preference>& ran,
                                         const std::vector<std::uint8_t>& ran_choices,
                                         const std::vector<discovery_policy::preference>& other) {
    if (ran.size() != other.size() || ran.size() != ran_choices.size()) return false;
    for (std::size_t d = 0; d < ran.size(); ++d)
        for (const bool last_forward : {false, true})
            if ((ran_choices[d] & (last_forward ? 2 : 1)) &&
                backward_first(ran[d], last_forward) != backward_first(other[d], last_forward))
                return false;
    return true;
}

/// The engine of discover_order(), reusable: prepare() computes what depends only on the
/// scenario and placement (memory reservations per device and micro-batch), run() runs one
/// policy on them; scratch memory is kept between runs, so a warm engine allocates only when a
/// run needs more room than any before.
class order_discovery {
public:
    /// Tables of `sc` placed by `pl` with backward split `w_share` for the following run() calls;
    /// `sc` and `pl` must outlive them and stay unchanged.
    void prepare(const scenario& sc, const stage_placement& pl, double w_share) {
        if (pl.virtual_stages() != sc.stages)
            throw invalid_argument("discover_order: the placement has " + std::to_string(pl.virtual_stages()) +
                                   " virtual stages, the scenario " + std::to_string(sc.stages));
        sc_ = &sc;
        V_ = sc.stages;
        M_ = sc.microbatches;
        D_ = pl.devices();
        w_share_ = w_share;
        split_ = w_share > 0.0;
        timing_.emplace(sc, w_share);
        dev_of_.resize(V_);
        for (std::size_t v = 0; v < V_; ++v) dev_of_[v] = pl.device_of(v);
        dev0_ = V_ > 0 ? dev_of_[0] : 0;
        stages_on_.assign(D_, {});
        for (std::size_t v = 0; v < V_; ++v) stages_on_[dev_of_[v]].push_back(v);
        init_memory();
        init_work();
    }

    /// One run of `pol` (its w_share must be prepare()'s) on the prepared scenario. The result
    /// lives in the engine until the next run (its orders may be swapped out).
    discovery_result& run(const discovery_policy& pol) {
        if (sc_ == nullptr || !(pol.w_share == w_share_ || (std::isnan(pol.w_share) && std::isnan(w_share_))))
            throw invalid_argument("discover_order: run() needs prepare() with the policy's w_share");
        if (!pol.prefer_on.empty() && pol.prefer_on.size() != D_)
            throw invalid_argument("discover_order: prefer_on needs one entry per device");
        pol_ = &pol;
        limit_mb_ = pol.memory_limit_mb + 1e-9;
        init_devices();
        links_.reset(D_, sc_->network);
        for (std::size_t d = 0; d < D_; ++d) {
            try_run(d, 0.0);
            events_.update(d);
        }
        for (;;) {
            const event_queue::event e = events_.next();
            const std::size_t d = e.device;
            const double t = e.t_ms;
            if (!(t < never) || out_.gave_up) break;
            if (e.wake) events_.set_wake(d, never);
            else complete(d, t);
            try_run(d, t);
            next_wake(d);
            events_.update(d);
        }
        if (pol.stage_memory && !out_.gave_up) {
            std::size_t ops = 0;
            for (const auto& o : out_.orders) ops += o.size();
            out_.stalled = ops != (split_ ? 3 : 2) * M_ * V_;
        }
        return out_;
    }

    /// After prepare(): true when run(pol), `pol` reserving per micro-batch (not stage_memory)
    /// under an in-flight limit, surely gives up (discovery_result::gave_up) and cannot throw,
    /// so that it need not run. Micro-batch j is in flight on device d from the start of its
    /// forward on d's first stage v0 to the end of its last op there, which follows the chain
    /// F(j, v0 .. V-1), B(j, V-1 .. v0) (then W(j, v0)); with at most k = max(1, limit) in
    /// flight on d at once, every run lasts at least the sum of those chains over j, / k. A run
    /// that lasts longer than give_up_above_ms (with its margin) gives up at the latest when its
    /// last op starts; the bound must exceed it by a relative 1e-6 (its sums' rounding is below
    /// 1e-12). It cannot throw when every micro-batch alone fits every device (admit()).
    /// O(V · M), only the scenario's arrays read.
    [[nodiscard]] bool surely_gives_up(const discovery_policy& pol) const {
        const double give_up_ms = give_up_past_ms(pol.give_up_above_ms);
        if (sc_ == nullptr || pol.stage_memory || pol.inflight_limit.empty() || !std::isfinite(give_up_ms)) return false;
        // Each chain is part of all ops' work: when that, / the smallest k, cannot pass the cut,
        // no chain sum can (ZB-V's fallback, k = S: the devices' mean work, below any makespan).
        const auto in_flight = [&](std::size_t d) {  // k of device d (one entry: every device's)
            return std::max<std::size_t>(1, pol.inflight_limit.size() == 1 ? pol.inflight_limit[0] : pol.inflight_limit.at(d));
        };
        std::size_t k_min = std::numeric_limits<std::size_t>::max();
        for (std::size_t d = 0; d < D_; ++d) k_min = std::min(k_min, in_flight(d));
        double all_ms = 0.0;
        for (const double w_ms : work_) all_ms += w_ms;
        if (all_ms / static_cast<double>(k_min) * (1.0 + 1e-6) <= give_up_ms) return false;
        const double limit_mb = pol.memory_limit_mb + 1e-9;
        for (std::size_t d = 0; d < D_; ++d)
            for (std::size_t j = 0; j < M_; ++j)
                if (model_[d] + res_[d * M_ + j] + gap_[d * M_ + j] > limit_mb) return false;
        const double w = split_ ? w_share_ : 0.0;
        std::vector<double> chains_ms(D_, 0.0);
        for (std::size_t j = 0; j < M_; ++j) {
            double suffix_ms = 0.0;  // F + B of stages v .. V-1
            for (std::size_t v = V_; v-- > 0;) {
                const std::size_t k = sc_->at(j, v);
                suffix_ms += sc_->forward_ms[k] + sc_->backward_ms[k] * (1.0 - w);
                const std::size_t d = dev_of_[v];
                if (stages_on_[d].front() == v) chains_ms[d] += suffix_ms + sc_->backward_ms[k] * w;
            }
        }
        for (std::size_t d = 0; d < D_; ++d)
            if (chains_ms[d] / static_cast<double>(in_flight(d)) * (1.0 - 1e-6) > give_up_ms) return true;
        return false;
    }

    /// Size of the prepared scenario in (virtual stage, micro-batch) pairs: what the engine's
    /// scratch memory grows with.
    [[nodiscard]] std::size_t pairs() const noexcept { return V_ * M_; }

    /// After run(): per device, the states in which its preference chose between a ready
    /// backward and a possible forward — bit 1: its last op was not a forward, bit 2: it was
    /// (what `alternate` looks at). See same_decisions().
    [[nodiscard]] const std::vector<std::uint8_t>& choice_masks() const noexcept { return choices_; }

private:
    using pref_t = discovery_policy::preference;
    static constexpr double never = std::numeric_limits<double>::infinity();
    struct dev_state {
        candidate_queue fwd, bwd, wgt;
        reserved_memory reserved;
        std::vector<std::pair<double, std::uint32_t>> gaps;  // max-heap of (gap, mb) in flight; lazy
        std::size_t inflight = 0;
        std::size_t limit = std::numeric_limits<std::size_t>::max();
        // Stage memory: later-stage forwards owed, a max-heap of (stored, key); lazy (the entries
        // whose forward started are dropped when they come to the top).
        std::vector<std::pair<double, std::uint64_t>> owed;
        std::size_t held_count = 0;  // stage memory: (mb, stage) activations held
        double held_sum = 0.0;       // stage memory: their sum, added in forward-start order
        std::uint32_t next_admit = 0;  // next micro-batch to admit (in order)
        bool busy = false;
        bool last_forward = false;
        pref_t prefer = pref_t::backward_first;
    };

    // Per (device, micro-batch): memory reserved at admission (stored activations on the
    // device's stages) and the largest transient (peak - stored) among them.
    void init_memory() {
        model_.assign(D_, 0.0);
        res_.assign(D_ * M_, 0.0);
        gap_.assign(D_ * M_, 0.0);
        stages_count_.assign(D_, 0);
        for (std::size_t v = 0; v < V_; ++v) {
            model_[dev_of_[v]] += sc_->model_state_mb[v];
            ++stages_count_[dev_of_[v]];
        }
        for (std::size_t j = 0; j < M_; ++j)
            for (std::size_t v = 0; v < V_; ++v) {
                const std::size_t k = dev_of_[v] * M_ + j;
                res_[k] += sc_->stored(j, v);
                gap_[k] = std::max(gap_[k], sc_->peak(j, v) - sc_->stored(j, v));
            }
    }
    // Per device, the durations of all its ops (the running sums of give_up_above_ms start here).
    void init_work() {
        work_.assign(D_, 0.0);
        for (std::size_t v = 0; v < V_; ++v)
            for (std::uint32_t j = 0; j < M_; ++j) {
                double& w = work_[dev_of_[v]];
                const auto st = static_cast<std::uint32_t>(v);
                w += timing_->duration_ms(op{op_kind::F, j, st}) + timing_->duration_ms(op{op_kind::B, j, st});
                if (split_) w += timing_->duration_ms(op{op_kind::W, j, st});
            }
    }
    // Every per-run state back to the start (a run that threw may have left any).
    void init_devices() {
        const discovery_policy& pol = *pol_;
        dev_.resize(D_);
        left_.resize(D_ * M_);
        for (std::size_t d = 0; d < D_; ++d) {
            auto& ds = dev_[d];
            ds.limit = std::numeric_limits<std::size_t>::max();
            if (!pol.inflight_limit.empty())
                ds.limit = std::max<std::size_t>(
                    1, pol.inflight_limit.size() == 1 ? pol.inflight_limit[0] : pol.inflight_limit.at(d));
            ds.prefer = pol.prefer_on.empty() ? pol.prefer : pol.prefer_on[d];
            ds.inflight = 0;
            ds.next_admit = 0;
            ds.busy = false;
            ds.last_forward = false;
            const std::size_t room = std::min<std::size_t>(M_ * stages_count_[d], 16);
            ds.reserved.reset(room);
            ds.fwd.reset(room);
            ds.bwd.reset(room);
            ds.wgt.reset(0);
            ds.gaps.clear();
            ds.gaps.reserve(room);
            ds.held_count = 0;
            ds.held_sum = 0.0;
            ds.owed.clear();
            const auto ops = static_cast<std::uint32_t>((split_ ? 3 : 2) * stages_count_[d]);
            std::fill_n(left_.begin() + static_cast<std::ptrdiff_t>(d * M_), M_, ops);
        }
        if (pol.stage_memory) started_.assign(V_ * M_, 0);
        events_.reset(D_);
        running_.resize(D_);
        choices_.assign(D_, 0);
        out_.makespan_ms = 0.0;
        out_.stalled = false;
        out_.gave_up = false;
        left_work_ = work_;
        give_up_ms_ = give_up_past_ms(pol.give_up_above_ms);
        out_.orders.resize(D_);
        for (std::size_t d = 0; d < D_; ++d) {
            out_.orders[d].clear();
            out_.orders[d].reserve((split_ ? 3 : 2) * M_ * stages_count_[d]);
        }
    }

    // Starts the op (kind, key) on d at t (key as in candidate_queue; scalars, not an op, for
    // the same reason as take()).
    void start(std::size_t d, op_kind kind, std::uint64_t key, double t) {
        const op o{kind, candidate_queue::mb_of(key), candidate_queue::stage_of(key)};
        const double dur = timing_->duration_ms(o);
        const double end = t + dur;
        left_work_[d] -= dur;
        if (end + left_work_[d] > give_up_ms_) out_.gave_up = true;
        auto& ds = dev_[d];
        ds.busy = true;
        ds.last_forward = o.kind == op_kind::F;
        if (pol_->stage_memory && o.kind == op_kind::F) {
            const std::size_t k = sc_->at(o.microbatch, o.stage);
            started_[k] = 1;  // no longer owed
            ++ds.held_count;
            ds.held_sum += sc_->stored_mb[k];
        }
        out_.orders[d].push_back(o);
        events_.set_done(d, end);
        running_[d] = o;
    }
    // Largest transient of the micro-batches in flight on d (0 when none).
    double gap_mb(std::size_t d) {
        auto& g = dev_[d].gaps;
        while (!g.empty() && left_[d * M_ + g.front().second] == 0) {
            std::pop_heap(g.begin(), g.end());
            g.pop_back();
        }
        return g.empty() ? 0.0 : std::max(0.0, g.front().first);
    }
    // Admission of micro-batch j on device d (file comment).
    bool fits(std::size_t d, std::uint32_t j) {
        auto& ds = dev_[d];
        if (ds.inflight == 0) return true;
        if (ds.inflight >= ds.limit) return false;
        if (pol_->stage_memory) return admission_fits(d, j);
        const std::size_t k = d * M_ + j;
        const double model = model_[d], res = res_[k], top = std::max(gap_mb(d), gap_[k]);
        auto released = [&](std::uint32_t i) { return left_[d * M_ + i] == 0; };
        return ds.reserved.fits([&](double reserved) { return model + reserved + res + top; }, limit_mb_, released);
    }
    // Stage memory (file comment): what d holds.
    double held_mb(std::size_t d) const { return dev_[d].held_sum; }
    // Stage memory: admitting j (its first forward on d) leaves room for the largest later-stage
    // forward owed on d, j's own included.
    bool admission_fits(std::size_t d, std::uint32_t j) {
        auto& ds = dev_[d];
        const std::size_t k = d * M_ + j;
        auto& h = ds.owed;
        while (!h.empty() && started_[sc_->at(candidate_queue::mb_of(h.front().second),
                                              candidate_queue::stage_of(h.front().second))]) {
            std::pop_heap(h.begin(), h.end());
            h.pop_back();
        }
        double owed = 0.0;
        if (!h.empty()) owed = std::max(owed, h.front().first);
        const auto& st = stages_on_[d];
        for (std::size_t i = 1; i < st.size(); ++i) owed = std::max(owed, sc_->stored(j, st[i]));
        const double first = sc_->stored(j, st.front());
        const double held = held_mb(d);
        return model_[d] + held + first + owed + std::max(gap_mb(d), gap_[k]) <= limit_mb_ &&
               within_held_limit(d, held + first + owed);
    }
    // Stage memory: the forward of admitted micro-batch j on a later stage v of d.
    bool later_fits(std::size_t d, std::uint32_t j, std::uint32_t v) {
        const double held = held_mb(d) + sc_->stored(j, v);
        return model_[d] + held + gap_mb(d) <= limit_mb_ && within_held_limit(d, held);
    }
    bool within_held_limit(std::size_t d, double held) const {
        return pol_->held_limit_mb.empty() || held <= pol_->held_limit_mb.at(d) + 1e-9;
    }
    void admit(std::size_t d, std::uint32_t j) {
        auto& ds = dev_[d];
        const std::size_t k = d * M_ + j;
        if (ds.inflight == 0 && model_[d] + res_[k] + gap_[k] > limit_mb_)
            throw limit_exceeded(pol_->schedule + " schedule: micro-batch " + std::to_string(j) + " alone needs " +
                                 std::to_string(model_[d] + res_[k] + gap_[k]) + " MB on device " +
                                 std::to_string(d) + ", above the memory limit of " +
                                 std::to_string(pol_->memory_limit_mb) + " MB");
        ++ds.next_admit;
        ++ds.inflight;
        ds.reserved.add(j, res_[k]);
        ds.gaps.emplace_back(gap_[k], j);
        std::push_heap(ds.gaps.begin(), ds.gaps.end());
        if (pol_->stage_memory)
            for (std::size_t i = 1; i < stages_on_[d].size(); ++i) {
                const auto v = static_cast<std::uint32_t>(stages_on_[d][i]);
                ds.owed.emplace_back(sc_->stored(j, v), candidate_queue::key(j, v));
                std::push_heap(ds.owed.begin(), ds.owed.end());
            }
    }
    void release(std::size_t d, std::uint32_t j) {
        const std::size_t k = d * M_ + j;
        if (--left_[k] != 0) return;
        auto& ds = dev_[d];
        --ds.inflight;
        ds.reserved.remove(res_[k]);
        // Released entries deep in the gap heap are dropped in bulk once they are the majority
        // (amortised O(1) each), so the heap stays O(in flight).
        if (ds.gaps.size() > 2 * ds.inflight + 16) {
            std::erase_if(ds.gaps, [&](const auto& g) { return left_[d * M_ + g.second] == 0; });
            std::make_heap(ds.gaps.begin(), ds.gaps.end());
        }
    }

    void try_run(std::size_t d, double t) {
        auto& ds = dev_[d];
        if (ds.busy) return;
        ds.fwd.arrive(t);
        ds.bwd.arrive(t);
        if (split_) ds.wgt.arrive(t);
        if (split_ && pol_->max_pending_w > 0 && ds.wgt.ready_count() >= pol_->max_pending_w)
            return start(d, op_kind::W, ds.wgt.take(), t);
        const bool b_ready = ds.bwd.has_ready();
        const bool b_first = backward_first(ds.prefer, ds.last_forward);
        const std::uint8_t choice = ds.last_forward ? 2 : 1;  // choice_mask bit of this state
        if (b_first && b_ready) {
            if (pol_->record_choices && !(choices_[d] & choice)) {
                const forwards f = forward_options(d);
                if (f.ready || f.feed) choices_[d] |= choice;
            }
            return start(d, op_kind::B, ds.bwd.take(), t);
        }
        const forwards f = forward_options(d);
        if (b_ready && (f.feed || f.ready)) choices_[d] |= choice;
        if (f.feed) {
            admit(d, ds.next_admit);
            return start(d, op_kind::F, candidate_queue::key(ds.next_admit - 1, 0), t);
        }
        if (f.ready) {
            if (ds.fwd.first_mb() == ds.next_admit) admit(d, ds.next_admit);
            return start(d, op_kind::F, ds.fwd.take(), t);
        }
        if (!b_first && b_ready) return start(d, op_kind::B, ds.bwd.take(), t);
        if (split_ && ds.wgt.has_ready()) return start(d, op_kind::W, ds.wgt.take(), t);
    }
    // The forwards d could start now. `ready`: its first arrived forward, of an admitted
    // micro-batch (below next_admit) or of the next one in order if it fits. `feed`: on the first
    // stage's device, whose input is always there, the next micro-batch in order, if it fits and
    // no arrived forward of an earlier one goes first.
    struct forwards {
        bool ready, feed;
    };
    forwards forward_options(std::size_t d) {
        auto& ds = dev_[d];
        bool ready = false;
        if (ds.fwd.has_ready()) {
            const std::uint32_t j = ds.fwd.first_mb();
            ready = j < ds.next_admit || (j == ds.next_admit && fits(d, j));
            if (ready && j < ds.next_admit && pol_->stage_memory) ready = later_fits(d, j, ds.fwd.first_stage());
        }
        const bool feed = d == dev0_ && ds.next_admit < M_ && (!ready || ds.fwd.first_mb() > ds.next_admit) &&
                          fits(d, ds.next_admit);
        return {ready, feed};
    }
    void wake(std::size_t d, double t) {
        if (t < events_.wake_at(d)) {
            events_.set_wake(d, t);
            events_.update(d);
        }
    }
    // A candidate for device `to` from the op that device `from` completed at now_ms. Only
    // another device that is idle must wake up for it: a busy one looks at its candidates when
    // its op completes (try_run, then next_wake), and so does `from` itself right after
    // complete(). A wake-up that found the device busy did nothing (28 % of the events of
    // BM_plan_gpt_cli_fresh's discoveries, most of them set by a device's own W after its B).
    void deliver(candidate_queue& q, std::size_t from, std::size_t to, double ready_ms, std::uint32_t mb,
                 std::uint32_t stage, double now_ms) {
        q.push(ready_ms, mb, stage, now_ms);
        if (to != from && !dev_[to].busy) wake(to, ready_ms);
    }
    // After its event, an idle device sleeps until its earliest candidate that is not there yet
    // (runs right after try_run(d, t), which moved the arrived ones).
    void next_wake(std::size_t d) {
        auto& ds = dev_[d];
        if (ds.busy) return;
        wake(d, std::min({ds.fwd.next_arrival_ms(), ds.bwd.next_arrival_ms(), ds.wgt.next_arrival_ms()}));
    }
    // The running op of d completes at t: the data flow of timing.hpp — the op of another
    // stage it feeds gets a candidate when the message arrives; on the last stage the forward
    // feeds its own backward; a split backward feeds its W.
    void complete(std::size_t d, double t) {
        out_.makespan_ms = t;
        auto& ds = dev_[d];
        ds.busy = false;
        events_.set_done(d, never);
        const op o = running_[d];
        release(d, o.microbatch);
        if (pol_->stage_memory && o.kind == (split_ ? op_kind::W : op_kind::B)) {
            ds.held_sum = ds.held_count == 1 ? 0.0 : ds.held_sum - sc_->stored(o.microbatch, o.stage);
            --ds.held_count;
        }
        if (const cross_target c = cross_successor(o, V_); c.has) {
            const std::size_t to = dev_of_[c.to.stage];
            auto& q = c.to.kind == op_kind::B ? dev_[to].bwd : dev_[to].fwd;
            deliver(q, d, to, links_.arrival(t, d, to, timing_->message_mb(o)), o.microbatch, c.to.stage, t);
        } else if (o.kind == op_kind::F) {
            deliver(ds.bwd, d, d, t, o.microbatch, o.stage, t);
        }
        if (o.kind == op_kind::B && split_) deliver(ds.wgt, d, d, t, o.microbatch, o.stage, t);
    }

    const scenario* sc_ = nullptr;
    const discovery_policy* pol_ = nullptr;
    std::size_t V_ = 0, M_ = 0, D_ = 0;
    double w_share_ = 0.0;
    bool split_ = false;
    double limit_mb_ = 0.0;
    std::optional<op_model> timing_;  // set by prepare()
    link_channels links_;
    std::vector<std::size_t> dev_of_, stages_count_;
    std::vector<std::vector<std::size_t>> stages_on_;  // per device, its stages in increasing order
    std::size_t dev0_ = 0;
    std::vector<double> model_, res_, gap_;
    std::vector<std::uint8_t> started_;  // stage memory: per scenario pair, its forward started
    std::vector<double> work_, left_work_;  // per device: all its ops' durations; those not yet started
    double give_up_ms_ = 0.0;               // give_up_above_ms with its margin (infinite: never)
    std::vector<std::uint32_t> left_;  // ops left per (device, mb) before release
    std::vector<dev_state> dev_;
    event_queue events_;
    std::vector<op> running_;
    std::vector<std::uint8_t> choices_;  // choice_mask per device
    discovery_result out_;
};

/// This thread's engine (its scratch memory serves every discovery the thread runs).
[[nodiscard]] inline order_discovery& discovery_engine() {
    thread_local order_discovery engine;
    return engine;
}

/// The largest scenario (in pairs()) whose scratch a thread's engine keeps for its next run;
/// after a larger one the memory is given back (detail::engine_release), so a thread that once
/// discovered a huge schedule does not hold its tens of MB for the rest of its life.
inline constexpr std::size_t engine_kept_pairs = std::size_t{1} << 16;

/// Empties the engine, when its last scenario exceeded engine_kept_pairs, at the end of the
/// scope that used it (also when a run threw).
class engine_release {
public:
    explicit engine_release(order_discovery& engine) noexcept : engine_(engine) {}
    engine_release(const engine_release&) = delete;
    engine_release& operator=(const engine_release&) = delete;
    ~engine_release() {
        if (engine_.pairs() > engine_kept_pairs) engine_ = order_discovery{};
    }

private:
    order_discovery& engine_;
};

}  // namespace detail

/// Runs the greedy policy (file comment) on `sc` placed by `pl`; returns the per-device orders.
/// Throws pipeplan::limit_exceeded when a micro-batch alone exceeds the memory limit.
[[nodiscard]] inline discovery_result discover_order(const scenario& sc, const stage_placement& pl,
                                                     const discovery_policy& pol) {
    detail::order_discovery& engine = detail::discovery_engine();
    const detail::engine_release release(engine);
    engine.prepare(sc, pl, pol.w_share);
    return engine.run(pol);  // copied before `release` runs
}

}  // namespace pipeplan::schedule
