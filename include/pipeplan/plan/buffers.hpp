// pipeplan/plan/buffers.hpp — buffer planning (lowering pass 4): lifetimes, frees, offsets.
//
// A buffer is live from the first instruction that names it (in, out or stash) to the last
// one; plan_buffers() emits a `free(slot)` right after that last use (a workspace lives only
// during its op and is never freed explicitly). Offsets in one arena per rank are multiples
// of `alignment_bytes`.
//
// Why plain best fit is not enough. Greedy best fit in the manner of TFLite's and XLA's
// planners (buffers by decreasing size, or size x lifetime, each into the smallest gap left
// between the placed buffers whose lifetimes meet its own) reaches 1.07-1.25x the live set on
// real pipeline plans: a rank's stash buffers (GBs, one per micro-batch in flight) live in a
// FIFO pattern — 1F1B frees the oldest first — and with variable micro-batch sizes the hole
// an old stash leaves is rarely where the next one fits.
//
// What place_items() does. A beam search in time order under a ceiling equal to the largest
// simultaneously-live set (the lower bound): the buffers are taken as they are born; each
// large one (>= 1/8 of the live set) may go to either end of every free gap below the
// ceiling (or above everything live when none fits), medium ones take the bottom of the
// smallest gap that fits; the search keeps the `width` partial placements with the smallest
// arena so far, then the largest free gap (distinct layouts only, by a hash of the live
// buffers' offsets). Buffers below a size threshold are left out of the search and placed
// afterwards by best fit around the others. Each step costs O(width x live buffers). A few
// such searches (beam_stages: wider, or with decisions for smaller buffers) run in turn until
// one leaves the arena within 8% of the live set: 1.00-1.08x on real plans of up to a few
// hundred micro-batches. On long plans (thousands) the searches drift to 1.02-1.15x; there
// (8,192 placed buffers or more), where they leave the arena more than 0.5% above the live
// set, place_stashes_in_lanes() puts the stashes in lanes (one stash at a time per lane, each
// as large as its largest stash), which a stage's FIFO stashes of runs of equal sizes fill up
// to their live set, and the workspaces with the other buffers, in lanes above the stashes'
// or into the gaps around them before the others; the smallest arena is kept.
//
// The arena is the highest end; `live_peak_bytes` — the largest total size of buffers live at
// one instruction — is a lower bound on any arena, and the planner's arena is never below it
// (offsets never overlap).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <utility>
#include <vector>

#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/plan/plan.hpp"

namespace pipeplan::plan {

/// Lifetime of a buffer: the instruction indices of its first and last use (inclusive).
struct lifetime {
    std::uint32_t first = 0xFFFFFFFFu;
    std::uint32_t last = 0;
    [[nodiscard]] bool used() const noexcept { return first != 0xFFFFFFFFu; }
    [[nodiscard]] bool overlaps(const lifetime& o) const noexcept { return first <= o.last && o.first <= last; }
};

/// Lifetimes of every slot of `p` (from in/out/stash/work and frees).
[[nodiscard]] inline std::vector<lifetime> buffer_lifetimes(const rank_program& p) {
    std::vector<lifetime> life(p.buffers.size());
    lifetime* const l = life.data();
    const std::size_t n = life.size();
    for (std::uint32_t i = 0; i < p.instructions.size(); ++i) {  // (i grows: the last use is the latest)
        const instruction& ins = p.instructions[i];
        for (std::uint32_t s : {ins.in, ins.out, ins.stash, ins.work})
            if (s < n) {  // (no_slot is above every slot)
                l[s].first = std::min(l[s].first, i);
                l[s].last = i;
            }
    }
    return life;
}

/// Largest total size of buffers live at one instruction.
[[nodiscard]] inline std::uint64_t live_peak_bytes(const rank_program& p, const std::vector<lifetime>& life) {
    std::vector<std::int64_t> delta(p.instructions.size() + 1, 0);
    for (std::size_t s = 0; s < life.size(); ++s) {
        if (!life[s].used()) continue;
        delta[life[s].first] += static_cast<std::int64_t>(p.buffers[s].size_bytes);
        delta[life[s].last + 1] -= static_cast<std::int64_t>(p.buffers[s].size_bytes);
    }
    std::int64_t cur = 0, best = 0;
    for (std::int64_t d : delta) best = std::max(best, cur += d);
    return static_cast<std::uint64_t>(best);
}

/// Writes a program from its last instruction to its first, with a `free` right after the
/// last use (in, out, stash or work) of every non-workspace buffer — frees after one
/// instruction by slot, ascending — and the lifetimes of the slots in the written program
/// (those of buffer_lifetimes() afterwards). Seen from the back, a slot's first sight is its
/// last use, so one backward pass places every free. `out` holds room for the instructions and
/// one free per non-workspace buffer; finish() moves the program to the front when a buffer
/// was never used (no free), and resizes `out`. Writing stays at or above the next
/// instruction's index, so `out` may be the program being read (insert_frees()).
class free_writer {
public:
    free_writer(std::vector<instruction>& out, const std::vector<buffer>& buffers, std::vector<lifetime>& life)
        : program_(out), buffers_(buffers.data()), w_(out.size()) {
        life.assign(buffers.size(), lifetime{});
        lives_ = &life;
        out_ = out.data(), life_ = life.data(), n_ = life.size();
        state_.resize(n_);
        for (std::size_t s = 0; s < n_; ++s) state_[s] = buffers[s].role == buffer_role::workspace ? unseen_workspace : unseen;
    }

    /// Room for `instructions` instructions and the frees of `buffers`.
    [[nodiscard]] static std::size_t room(std::size_t instructions, const std::vector<buffer>& buffers) noexcept {
        std::size_t n = instructions;
        for (const buffer& b : buffers) n += b.role != buffer_role::workspace;
        return n;
    }

    /// The place of the instruction before those written so far, which names the slots `in`,
    /// `out`, `stash` and `work` (the caller fills it, with those slots), after writing the
    /// frees that follow it. (Inlined: the slots a caller passes as no_slot drop out.)
    [[nodiscard, gnu::always_inline]] instruction& place(std::uint32_t in, std::uint32_t out, std::uint32_t stash,
                                                         std::uint32_t work) {
        const std::uint32_t used[4] = {in, out, stash, work};
        std::uint32_t freed[4];  // the slots last used here that are freed, ascending
        std::size_t k = 0;
        for (const std::uint32_t s : used) {
            if (s == no_slot || s >= n_ || state_[s] != unseen) continue;
            state_[s] = seen;
            std::size_t j = k++;
            for (; j > 0 && freed[j - 1] > s; --j) freed[j] = freed[j - 1];
            freed[j] = s;
        }
        while (k-- > 0) {
            const std::uint32_t s = freed[k];
            instruction& f = out_[--w_];
            f = instruction{};
            f.kind = instr_kind::free;
            f.in = s;
            f.microbatch = buffers_[s].microbatch;
            f.stage = buffers_[s].stage;
            life_[s].last = static_cast<std::uint32_t>(w_);
        }
        const auto at = static_cast<std::uint32_t>(--w_);
        for (const std::uint32_t s : used) {
            if (s == no_slot || s >= n_) continue;
            if (state_[s] == unseen_workspace) state_[s] = seen, life_[s].last = at;
            life_[s].first = at;
        }
        return out_[at];
    }

    /// Writes `x` (the instruction before those written so far) and the frees that follow it.
    void put(const instruction& x) { place(x.in, x.out, x.stash, x.work) = x; }

    /// Moves the program to the front of `out` (where room was left for frees of unused
    /// buffers) and resizes it.
    void finish() {
        if (w_ > 0) {
            std::move(program_.begin() + static_cast<std::ptrdiff_t>(w_), program_.end(), program_.begin());
            const auto shift = static_cast<std::uint32_t>(w_);
            for (lifetime& l : *lives_)
                if (l.used()) l.first -= shift, l.last -= shift;
        }
        program_.resize(program_.size() - w_);
        w_ = 0;
    }

private:
    /// A slot in the backward pass: not yet named (a free follows its last use, when met), a
    /// workspace not yet named (no free), or named already.
    enum slot_state : std::uint8_t { unseen, unseen_workspace, seen };
    std::vector<instruction>& program_;
    const buffer* buffers_;
    std::vector<lifetime>* lives_ = nullptr;
    instruction* out_ = nullptr;
    lifetime* life_ = nullptr;
    std::vector<slot_state> state_;
    std::size_t n_ = 0, w_;
};

/// Inserts a `free` after the last use of every non-workspace buffer (pass 4a), in place, by
/// a free_writer. Returns the lifetimes in the new program (equal to buffer_lifetimes(p)
/// afterwards).
inline std::vector<lifetime> insert_frees(rank_program& p) {
    std::vector<instruction>& prog = p.instructions;
    const std::size_t n = prog.size();
    prog.resize(free_writer::room(n, p.buffers));
    std::vector<lifetime> life;
    free_writer w(prog, p.buffers, life);
    for (std::size_t i = n; i-- > 0;) w.put(instruction(prog[i]));  // (a copy: its place may be written)
    w.finish();
    return life;
}

namespace detail {

/// One buffer to place: its slot, lifetime and aligned size.
struct placement_item {
    std::uint32_t slot = 0, first = 0, last = 0;
    std::uint64_t size_bytes = 0;
};

/// A placed buffer during a placement: its address range and the last instruction using it.
struct placed_span {
    std::uint64_t begin = 0, end = 0;
    std::uint32_t last = 0;
    std::uint32_t item = 0;
};

/// The largest simultaneously-live sets of `items` (sorted by first use): their total aligned
/// size, their total unaligned size (`raw_bytes` by item, or 0 when empty) and the most items
/// live at once — one sweep over the instructions.
struct live_extent {
    std::uint64_t aligned_bytes = 0, raw_bytes = 0;
    std::size_t items = 0;
};
[[nodiscard]] inline live_extent live_extents(std::span<const placement_item> items, std::size_t instructions,
                                              std::span<const std::uint64_t> raw_bytes = {}) {
    struct delta_t {
        std::int64_t aligned = 0, raw = 0;
        std::int32_t count = 0;
    };
    std::size_t end = instructions + 1;
    for (const placement_item& b : items) end = std::max<std::size_t>(end, std::size_t(b.last) + 2);
    std::vector<delta_t> delta(end);
    for (std::size_t k = 0; k < items.size(); ++k) {
        const placement_item& b = items[k];
        const auto raw = static_cast<std::int64_t>(raw_bytes.empty() ? 0 : raw_bytes[k]);
        const auto aligned = static_cast<std::int64_t>(b.size_bytes);
        delta[b.first].aligned += aligned, delta[b.first].raw += raw, ++delta[b.first].count;
        delta[b.last + 1].aligned -= aligned, delta[b.last + 1].raw -= raw, --delta[b.last + 1].count;
    }
    delta_t cur;
    live_extent best;
    for (const delta_t& d : delta) {
        cur.aligned += d.aligned, cur.raw += d.raw, cur.count += d.count;
        best.aligned_bytes = std::max(best.aligned_bytes, static_cast<std::uint64_t>(cur.aligned));
        best.raw_bytes = std::max(best.raw_bytes, static_cast<std::uint64_t>(cur.raw));
        best.items = std::max(best.items, static_cast<std::size_t>(cur.count));
    }
    return best;
}

/// Largest total (aligned) size live at one instruction; `items` sorted by first use.
[[nodiscard]] inline std::uint64_t aligned_live_peak(std::span<const placement_item> items, std::size_t instructions) {
    return live_extents(items, instructions).aligned_bytes;
}

/// Overlap lists in compressed form: the items (indices into `items`, sorted by first use)
/// whose lifetimes meet item i's are adjacent[begin[i] .. begin[i + 1]). Built by a sweep.
struct overlap_lists {
    std::vector<std::uint32_t> begin, adjacent;

    explicit overlap_lists(std::span<const placement_item> items) : begin(items.size() + 1, 0) {
        // count, then fill: j > i overlaps i iff items[j].first <= items[i].last
        const auto each_pair = [&](auto&& visit) {
            for (std::uint32_t i = 0; i < items.size(); ++i)
                for (std::uint32_t j = i + 1; j < items.size() && items[j].first <= items[i].last; ++j) visit(i, j);
        };
        each_pair([&](std::uint32_t i, std::uint32_t j) { ++begin[i + 1], ++begin[j + 1]; });
        for (std::size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
        adjacent.resize(begin.back());
        std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
        each_pair([&](std::uint32_t i, std::uint32_t j) { adjacent[fill[i]++] = j, adjacent[fill[j]++] = i; });
    }
};

inline constexpr std::uint64_t unplaced = UINT64_MAX;

/// Greedy best fit of the items in `order` (indices into `items`) around those `offset`
/// already places (the others hold `unplaced`). Returns the arena size; fills `offset`.
inline std::uint64_t place_best_fit(std::span<const placement_item> items, const overlap_lists& ov,
                                    std::span<const std::uint32_t> order, std::vector<std::uint64_t>& offset,
                                    std::vector<placed_span>& busy) {
    for (std::uint32_t i : order) {
        if (offset[i] != unplaced) continue;
        busy.clear();
        for (std::uint32_t k = ov.begin[i]; k < ov.begin[i + 1]; ++k) {
            const std::uint32_t q = ov.adjacent[k];
            if (offset[q] != unplaced) busy.push_back({offset[q], offset[q] + items[q].size_bytes, 0, 0});
        }
        std::sort(busy.begin(), busy.end(), [](const placed_span& a, const placed_span& b) { return a.begin < b.begin; });
        const std::uint64_t need = items[i].size_bytes;
        std::uint64_t best = 0, best_gap = UINT64_MAX, cursor = 0;
        bool found = false;
        for (const placed_span& b : busy) {
            if (b.begin > cursor && b.begin - cursor >= need && b.begin - cursor < best_gap) {
                best = cursor;
                best_gap = b.begin - cursor;
                found = true;
            }
            cursor = std::max(cursor, b.end);
        }
        offset[i] = found ? best : cursor;
    }
    std::uint64_t arena = 0;
    for (std::size_t i = 0; i < items.size(); ++i) arena = std::max(arena, offset[i] + items[i].size_bytes);
    return arena;
}

/// Inserts `e` into the `n` spans at `sp` (room for n + 1), kept sorted by address (a short
/// list), after the spans that begin at or below e's begin: those above move up one place, from
/// the top (one pass, no call). Returns n + 1.
inline std::size_t insert_sorted(placed_span* sp, std::size_t n, const placed_span& e) {
    std::size_t at = n;
    for (; at > 0 && sp[at - 1].begin > e.begin; --at) sp[at] = sp[at - 1];
    sp[at] = e;
    return n + 1;
}

/// Scratch of place_rest(), kept across calls (its vectors only grow).
struct rest_scratch {
    std::vector<placed_span> live, later;
    std::vector<std::uint32_t> next_placed;
};

/// Best fit over gaps visited in address order: the bottom of the smallest gap of at least
/// `need` bytes (> 0), the first of equal ones, else the top of the visited spans. The
/// smallest excess (gap - need) is kept: a gap too small wraps above any real excess.
struct best_fit_scan {
    std::uint64_t need, cursor = 0, pos = 0, best = UINT64_MAX;
    /// The gap from the top so far to `begin`, then the span up to `end` (begin >= cursor).
    [[gnu::always_inline]] void visit(std::uint64_t begin, std::uint64_t end) {  // (selects, not branches: the gaps come in no order)
        const std::uint64_t excess = begin - cursor - need;
        const bool better = excess < best;
        pos = better ? cursor : pos;
        best = better ? excess : best;
        cursor = end;
    }
    /// A span that may overlap those visited.
    [[gnu::always_inline]] void visit_any(const placed_span& e) { visit(std::max(e.begin, cursor), std::max(e.end, cursor)); }
    [[nodiscard]] std::uint64_t offset() const { return best > UINT64_MAX - need ? cursor : pos; }
};

/// Drops from the `n` spans at `live` (by address) those dead before instruction `now`;
/// returns their number and sets `next_death` to the earliest last use left. With `fit`, also
/// visits the spans left (they meet at `now`: none overlap).
template <bool Fit>
[[gnu::always_inline]] inline std::size_t drop_dead(placed_span* live, std::size_t n, std::uint32_t now, std::uint32_t& next_death,
                                                    best_fit_scan& fit) {
    next_death = UINT32_MAX;
    std::size_t k = 0;
    for (; k < n && live[k].last >= now; ++k) {  // up to the first dead one: nothing moves
        next_death = std::min(next_death, live[k].last);
        if constexpr (Fit) fit.visit(live[k].begin, live[k].end);
    }
    std::size_t kept = k;
    for (; k < n; ++k) {  // (compaction without branches)
        const placed_span e = live[k];
        const bool alive = e.last >= now;
        live[kept] = e;
        kept += alive;
        next_death = std::min(next_death, alive ? e.last : UINT32_MAX);
        if constexpr (Fit) {  // (a dead span neither fits nor moves the top)
            const std::uint64_t excess = alive ? e.begin - fit.cursor - fit.need : UINT64_MAX;
            const bool better = excess < fit.best;
            fit.pos = better ? fit.cursor : fit.pos;
            fit.best = better ? excess : fit.best;
            fit.cursor = alive ? e.end : fit.cursor;
        }
    }
    return kept;
}

/// Whether item i joins place_rest()'s live list: a later-born item meets it (not a
/// workspace, say, dead before the next birth: the items come by first use).
[[nodiscard]] inline bool meets_next_birth(std::span<const placement_item> items, std::size_t i) {
    return i + 1 < items.size() && items[i + 1].first <= items[i].last;
}

/// place_rest()'s state before item `from` (its items before `from` placed in `offset`): the
/// live list (those of them that join it and are alive at item from's birth, by address) and
/// the arena so far. Returns the number of live buffers.
inline std::size_t rest_state_at(std::span<const placement_item> items, const std::vector<std::uint64_t>& offset, std::size_t from,
                                 placed_span* live, std::uint32_t& next_death, std::uint64_t& arena) {
    std::size_t n = 0;
    const std::uint32_t now = from < items.size() ? items[from].first : UINT32_MAX;  // (none left: only the arena)
    for (std::uint32_t k = 0; k < from; ++k) {
        arena = std::max(arena, offset[k] + items[k].size_bytes);
        if (!meets_next_birth(items, k) || items[k].last < now) continue;
        n = insert_sorted(live, n, {offset[k], offset[k] + items[k].size_bytes, items[k].last, k});
        next_death = std::min(next_death, items[k].last);
    }
    return n;
}

/// place_rest()'s result: the arena so far and the first item not yet placed (items.size()
/// when it ran to the end).
struct rest_result {
    std::uint64_t arena = 0;
    std::size_t next = 0;
};

/// Places the items `offset` leaves `unplaced` around those it places, in time order: each
/// into the smallest gap between the buffers whose lifetimes meet its own (those live at its
/// birth, and the placed ones born during its life), or above them. Starts at item `from`
/// (those before it placed by an earlier call: the same placement as one call) and stops
/// after the item that takes the arena above `limit_bytes`.
inline rest_result place_rest_from(std::span<const placement_item> items, std::vector<std::uint64_t>& offset, rest_scratch& x,
                                   std::size_t from, std::uint64_t limit_bytes) {
    // live: the placed buffers that meet the next births, by address; later: the placed
    // buffers born during one buffer's life, by address (plain arrays with counts: every item
    // fits in each)
    if (x.live.size() < items.size() + 1) x.live.resize(items.size() + 1), x.later.resize(items.size() + 1);
    placed_span* const live = x.live.data();
    placed_span* const later = x.later.data();
    std::uint64_t arena = 0;
    std::uint32_t next_death = UINT32_MAX;  // the earliest last use in `live`
    std::size_t n = from == 0 ? 0 : rest_state_at(items, offset, from, live, next_death, arena);  // live buffers
    x.next_placed.resize(items.size() + 1);  // [i]: the first placed item at or after i
    std::uint32_t* const next_placed = x.next_placed.data();
    next_placed[items.size()] = static_cast<std::uint32_t>(items.size());
    for (std::size_t i = items.size(); i-- > from;) next_placed[i] = offset[i] != unplaced ? static_cast<std::uint32_t>(i) : next_placed[i + 1];
    for (auto i = static_cast<std::uint32_t>(from); i < items.size(); ++i) {
        const placement_item& b = items[i];
        const bool drop = b.first > next_death;  // buffers in `live` died before b's birth
        best_fit_scan fit{b.size_bytes};
        if (offset[i] != unplaced) {  // (placed by the search)
            if (drop) n = drop_dead<false>(live, n, b.first, next_death, fit);
        } else {
            std::size_t n_later = 0;
            for (std::size_t j = next_placed[i + 1]; j < items.size() && items[j].first <= b.last; j = next_placed[j + 1])
                n_later = insert_sorted(later, n_later, {offset[j], offset[j] + items[j].size_bytes, 0, 0});
            if (n_later == 0 && drop) {  // (usual: one pass drops and fits)
                n = drop_dead<true>(live, n, b.first, next_death, fit);
            } else if (n_later == 0) {  // (the live buffers meet at b's birth: none overlap)
                for (std::size_t k = 0; k < n; ++k) fit.visit(live[k].begin, live[k].end);
            } else {  // live and later merged (they may overlap)
                if (drop) n = drop_dead<false>(live, n, b.first, next_death, fit);
                std::size_t k = 0;
                for (std::size_t l = 0; l < n_later; ++l) {
                    for (; k < n && live[k].begin < later[l].begin; ++k) fit.visit_any(live[k]);
                    fit.visit_any(later[l]);
                }
                for (; k < n; ++k) fit.visit_any(live[k]);
            }
            offset[i] = fit.offset();
        }
        arena = std::max(arena, offset[i] + b.size_bytes);
        if (arena > limit_bytes) return {arena, i + 1};
        // by address (the live buffers below b begin below its offset, those above it at or
        // above its end)
        if (!meets_next_birth(items, i)) continue;
        n = insert_sorted(live, n, {offset[i], offset[i] + b.size_bytes, b.last, i});
        next_death = std::min(next_death, b.last);
    }
    return {arena, items.size()};
}

/// place_rest_from() over all the items: returns the arena.
inline std::uint64_t place_rest(std::span<const placement_item> items, std::vector<std::uint64_t>& offset, rest_scratch& x) {
    return place_rest_from(items, offset, x, 0, UINT64_MAX).arena;
}

/// Beam search over placements in time order (see the file comment). Each state is a partial
/// placement of the items born so far: its live buffers' address ranges (a flat pool,
/// `cap` spans per state), its arena so far, a hash of its live layout and its last trail node
/// (the trail stores every decision once, with its parent, so the best state's offsets are
/// read back at the end).
class beam_placer {
public:
    /// `max_live` is the most items live at once (live_extents().items): it bounds each
    /// state's spans.
    beam_placer(std::span<const placement_item> items, std::uint64_t ceiling, std::size_t max_width, std::size_t max_live)
        : items_(items), ceiling_(ceiling), max_width_(std::max<std::size_t>(max_width, 1)), cap_(max_live + 1) {}

    /// Runs the search over the items of at least `min_bytes` (the others are left
    /// `unplaced`): items of at least `decision_bytes` try every fitting gap's two ends, smaller
    /// ones take the smallest fitting gap's bottom. Returns the arena; fills `offset`.
    std::uint64_t run(std::size_t width, std::uint64_t decision_bytes, std::uint64_t min_bytes,
                      std::vector<std::uint64_t>& offset) {
        width_ = std::clamp<std::size_t>(width, 1, max_width_);
        states_.assign(1, state{});
        next_death_ = UINT32_MAX;
        if (spans_.size() < cap_ * width_) spans_.resize(cap_ * width_), next_spans_.resize(cap_ * width_);
        if (!searched_known_ || searched_min_bytes_ != min_bytes) {  // (consecutive runs often search the same items)
            searched_.clear();
            for (std::uint32_t i = 0; i < items_.size(); ++i)
                if (items_[i].size_bytes >= min_bytes) searched_.push_back(i);
            searched_known_ = true, searched_min_bytes_ = min_bytes;
        }
        trail_.clear();
        trail_.reserve(searched_.size() * width_);  // (each searched item adds a node per state)
        for (const std::uint32_t i : searched_) {
            expire(items_[i].first);
            next_death_ = std::min(next_death_, items_[i].last);  // every state places item i
            find_twins();
            if (items_[i].size_bytes < decision_bytes) {
                for (std::uint32_t s = 0; s < states_.size(); ++s)
                    if (states_[s].twin == no_twin) place_best_gap(s, i);
                continue;
            }
            candidates_.clear();
            proposed_.resize(states_.size());
            for (std::uint32_t s = 0; s < states_.size(); ++s)
                if (states_[s].twin == no_twin) propose(s, i);
            select_and_apply(i);
        }
        offset.assign(items_.size(), unplaced);
        const auto best = std::min_element(states_.begin(), states_.end(), [](const state& a, const state& b) {
            return a.twin == no_twin && (b.twin != no_twin || a.arena < b.arena);  // (twins: as the first of theirs)
        });
        std::uint32_t t = best->trail;
        for (std::size_t k = searched_.size(); k-- > 0;) {
            offset[searched_[k]] = trail_[t].offset;
            t = trail_[t].parent;
        }
        return best->arena;
    }

private:
    static constexpr std::uint32_t no_twin = UINT32_MAX;
    /// A partial placement. A twin — a state with the layout (by hash) and the arena of an
    /// earlier one, its `twin` — would go on as that one does (its spans, arena and trail are
    /// left as they were, and only its proposals are counted), and none of its proposals could
    /// be kept (each comes after the same one of its twin's).
    struct state {
        std::uint64_t arena = 0, hash = 0;
        std::uint32_t trail = UINT32_MAX, live = 0;
        std::uint32_t twin = no_twin;
    };
    struct candidate {
        std::uint64_t arena, gap, hash, pos;
        std::uint64_t seq;  ///< its state, then its place among that state's proposals (their order)
        std::uint32_t state;
        std::uint32_t at;  ///< its place among the state's spans, by address
    };
    struct trail_node {
        std::uint32_t parent;
        std::uint64_t offset;
    };

    [[nodiscard]] static std::uint64_t mix(std::uint64_t pos, std::uint32_t item) noexcept {
        std::uint64_t z = pos * 0x9E3779B97F4A7C15ull + item + 0x632BE59BD9B4E019ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        return z ^ (z >> 31);
    }

    /// Drops, in every state, the spans of items dead before instruction `now`. (Every state
    /// holds the same items, at different offsets: `next_death_`, their earliest last use,
    /// tells when there is nothing to drop.)
    void expire(std::uint32_t now) {
        if (now <= next_death_) return;
        next_death_ = UINT32_MAX;
        for (state& st : states_) {
            if (st.twin != no_twin) continue;  // (as its twin)
            placed_span* sp = &spans_[std::size_t(&st - states_.data()) * cap_];
            std::uint32_t k = 0;
            while (k < st.live && sp[k].last >= now) ++k;  // up to the first dead one: nothing moves
            std::uint32_t kept = k;
            for (; k < st.live; ++k) {  // (compaction without branches)
                const placed_span e = sp[k];
                const bool alive = e.last >= now;
                sp[kept] = e;
                kept += alive;
                if (!alive) st.hash -= mix(e.begin, e.item);
            }
            st.live = kept;
        }
        // (the same items in every state)
        const placed_span* sp = spans_.data();
        for (std::uint32_t k = 0; k < states_.front().live; ++k) next_death_ = std::min(next_death_, sp[k].last);
    }

    /// Calls visit(begin, end, k) for each gap of state s below max(ceiling, its arena so far)
    /// (and for empty ones between touching buffers), k the number of its spans below the gap
    /// (an item placed in a gap that fits goes at place k of the spans, by address). Returns
    /// the highest end of its spans.
    template <class Visit>
    std::uint64_t each_gap(std::uint32_t s, Visit&& visit) const {
        const state& st = states_[s];
        const placed_span* sp = &spans_[std::size_t(s) * cap_];
        const std::uint64_t roof = std::max(ceiling_, st.arena);
        std::uint64_t low = 0;
        for (std::uint32_t k = 0; k < st.live; ++k) {  // (empty gaps too: no branch; visits ignore them)
            visit(low, std::max(low, sp[k].begin), k);
            low = std::max(low, sp[k].end);
        }
        if (roof > low) visit(low, roof, st.live);
        return low;
    }

    /// A small item, placed in state s without branching: the bottom of the smallest gap that
    /// fits, or above everything.
    void place_best_gap(std::uint32_t s, std::uint32_t i) {
        const std::uint64_t need = items_[i].size_bytes;
        std::uint64_t best_gap = UINT64_MAX, pos = 0;
        const std::uint64_t top = each_gap(s, [&](std::uint64_t a, std::uint64_t b, std::uint32_t) {  // (selects, not branches)
            const std::uint64_t fit = b - a >= need ? b - a : UINT64_MAX;
            const bool better = fit < best_gap;
            pos = better ? a : pos;
            best_gap = better ? fit : best_gap;
        });
        state& st = states_[s];
        if (best_gap == UINT64_MAX) pos = top;
        // (the spans below the gap begin below pos, those above it at or above pos + need)
        st.live = static_cast<std::uint32_t>(insert_sorted(&spans_[std::size_t(s) * cap_], st.live, {pos, pos + need, items_[i].last, i}));
        st.arena = std::max(st.arena, pos + need);
        st.hash += mix(pos, i);
        trail_.push_back({st.trail, pos});
        st.trail = static_cast<std::uint32_t>(trail_.size() - 1);
    }

    /// Adds state s's candidate positions for item i: both ends of every gap that fits (or
    /// above everything when none does), scored by the arena and the largest gap left. (One
    /// pass over the gaps: the fitting ones are proposed once the two largest are known.)
    [[gnu::always_inline]] void propose(std::uint32_t s, std::uint32_t i) {
        const state& st = states_[s];
        const std::uint64_t need = items_[i].size_bytes;
        std::uint64_t g1 = 0, g2 = 0;  // the two largest gaps
        const std::size_t first = candidates_.size();
        fitting_.clear();
        const std::uint64_t top = each_gap(s, [&](std::uint64_t a, std::uint64_t b, std::uint32_t k) {
            const std::uint64_t g = b - a;
            if (g > g1) g2 = g1, g1 = g;
            else if (g > g2) g2 = g;
            if (g >= need) fitting_.push_back({a, b, 0, k});
        });
        const auto add = [&](std::uint64_t pos, std::uint64_t gap_len, std::uint32_t at) {
            const std::uint64_t others = gap_len == g1 ? g2 : g1;
            const std::uint64_t left = gap_len >= need ? gap_len - need : 0;
            candidates_.push_back({std::max(st.arena, pos + need), std::max(others, left), st.hash + mix(pos, i), pos,
                                   (std::uint64_t(s) << 32) | (candidates_.size() - first), s, at});
        };
        for (const placed_span& g : fitting_) {  // (at either end of a gap: after the spans below it)
            add(g.begin, g.end - g.begin, g.item);
            if (g.end - need != g.begin) add(g.end - need, g.end - g.begin, g.item);
        }
        if (fitting_.empty()) add(top, 0, st.live);  // above everything
        proposed_[s] = {static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(candidates_.size() - first)};
    }

    /// Keeps the best `width` distinct candidates (smallest arena, then largest free gap, then
    /// the better parent and the earlier proposal) as the next states: the first `width` of
    /// distinct layouts (by hash) in that order among its first 4 x `width` candidates.
    void select_and_apply(std::uint32_t i) {
        std::size_t proposals = candidates_.size();  // the twins' too
        for (const state& st : states_)
            if (st.twin != no_twin) proposals += proposed_[st.twin].count;
        std::size_t head = std::min(proposals, 4 * width_);
        if (head == proposals && candidates_.size() > few_candidates) {  // all count: the twins' never come first
            keep_best_of_each_layout();  // (the first of each layout in the order is its best)
            const std::size_t kept = std::min(candidates_.size(), width_);
            if (kept < candidates_.size())
                std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(kept), candidates_.end(), better);
            std::sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(kept), better);
            apply(i, kept);
            return;
        }
        if (head < proposals) {  // only the first 4 x width can be kept; the twins' take places among them
            add_twins_proposals();
            std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(head), candidates_.end(), better);
        } else {
            head = candidates_.size();  // (a few, the twins' aside: they never come first)
        }
        std::sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(head), better);
        apply(i, keep_first_layouts(head));
    }

    /// Moves the first candidate of each layout (by hash) among the first `n` (in order) to the
    /// front, in order, up to `width`; returns their number. (A few: found by a scan of those
    /// kept; else by a table.)
    std::size_t keep_first_layouts(std::size_t n) {
        const bool scan = n <= few_candidates;
        if (!scan) clear_layouts(n);
        std::size_t kept = 0;
        for (std::size_t c = 0; c < n && kept < width_; ++c) {
            const std::uint64_t hash = candidates_[c].hash;
            bool seen = false;  // the same layout again
            if (scan) {
                for (std::size_t k = 0; k < kept; ++k) seen = seen || candidates_[k].hash == hash;
            } else {
                std::uint32_t& slot = layout_slot(hash);
                seen = slot != no_candidate;
                if (!seen) slot = static_cast<std::uint32_t>(kept);
            }
            if (!seen) candidates_[kept++] = candidates_[c];  // (kept <= c)
        }
        return kept;
    }

    /// Appends each twin's proposals: its twin's, as its own.
    void add_twins_proposals() {
        for (std::uint32_t s = 0; s < states_.size(); ++s) {
            if (states_[s].twin == no_twin) continue;
            const proposal_range r = proposed_[states_[s].twin];
            for (std::uint32_t k = r.first; k < r.first + r.count; ++k) {
                candidate c = candidates_[k];
                c.state = s;
                c.seq = (std::uint64_t(s) << 32) | (c.seq & 0xFFFFFFFFu);
                candidates_.push_back(c);
            }
        }
    }

    /// Marks as a twin each state with the layout hash and the arena of an earlier one (of the
    /// first such: twins of twins are of theirs).
    void find_twins() {
        if (states_.size() < 2) return;
        const bool scan = states_.size() <= few_states;  // (a few: compared with the earlier ones)
        std::size_t mask = 0;
        if (!scan) {
            std::size_t size = 16;
            while (size < 2 * states_.size()) size *= 2;
            twin_table_.assign(size, no_twin);
            mask = size - 1;
        }
        for (std::uint32_t s = 0; s < states_.size(); ++s) {
            state& st = states_[s];
            if (st.twin != no_twin) {
                if (states_[st.twin].twin != no_twin) st.twin = states_[st.twin].twin;
                continue;
            }
            const auto same = [&](std::uint32_t o) { return states_[o].hash == st.hash && states_[o].arena == st.arena; };
            if (scan) {
                for (std::uint32_t o = 0; o < s && st.twin == no_twin; ++o)
                    if (states_[o].twin == no_twin && same(o)) st.twin = o;
                continue;
            }
            std::size_t k = static_cast<std::size_t>(st.hash ^ (st.hash >> 32)) & mask;
            while (twin_table_[k] != no_twin && !same(twin_table_[k])) k = (k + 1) & mask;
            if (twin_table_[k] != no_twin) st.twin = twin_table_[k];
            else twin_table_[k] = s;
        }
    }

    /// The order of select_and_apply() (a total order: `seq` is unique).
    static constexpr auto better = [](const candidate& a, const candidate& b) noexcept {
        if (a.arena != b.arena) return a.arena < b.arena;
        if (a.gap != b.gap) return a.gap > b.gap;
        return a.seq < b.seq;
    };

    /// Leaves in candidates_ the best candidate of each layout (by hash), in no order.
    void keep_best_of_each_layout() {
        clear_layouts(candidates_.size());
        std::size_t n = 0;
        for (std::size_t c = 0; c < candidates_.size(); ++c) {
            std::uint32_t& slot = layout_slot(candidates_[c].hash);
            if (slot == no_candidate) {
                slot = static_cast<std::uint32_t>(n);
                candidates_[n++] = candidates_[c];  // (n <= c)
            } else if (better(candidates_[c], candidates_[slot])) {
                candidates_[slot] = candidates_[c];
            }
        }
        candidates_.resize(n);
    }

    /// An open-addressing table from layout hashes to candidate indices, room for `n` of them.
    void clear_layouts(std::size_t n) {
        std::size_t size = 16;
        while (size < 2 * n) size *= 2;
        layout_hash_.resize(size);
        layout_index_.assign(size, no_candidate);
    }
    /// The candidate index stored for layout `hash` (no_candidate when none: assign to add it).
    [[nodiscard]] std::uint32_t& layout_slot(std::uint64_t hash) {
        const std::size_t mask = layout_index_.size() - 1;
        std::size_t k = static_cast<std::size_t>(hash ^ (hash >> 32)) & mask;
        while (layout_index_[k] != no_candidate && layout_hash_[k] != hash) k = (k + 1) & mask;
        layout_hash_[k] = hash;
        return layout_index_[k];
    }

    /// Makes the first `kept` candidates the next states (each its parent's spans with item i).
    void apply(std::uint32_t i, std::size_t kept) {
        next_states_.clear();
        const placement_item& b = items_[i];
        for (std::size_t c = 0; c < kept; ++c) {
            const candidate& x = candidates_[c];
            const state& from = states_[x.state];
            const placed_span* src = &spans_[std::size_t(x.state) * cap_];
            placed_span* dst = &next_spans_[next_states_.size() * cap_];
            const placed_span e{x.pos, x.pos + b.size_bytes, b.last, i};
            std::copy(src, src + x.at, dst);
            dst[x.at] = e;
            std::copy(src + x.at, src + from.live, dst + x.at + 1);
            trail_.push_back({from.trail, x.pos});
            next_states_.push_back({x.arena, x.hash, static_cast<std::uint32_t>(trail_.size() - 1), from.live + 1});
        }
        states_.swap(next_states_);
        spans_.swap(next_spans_);
    }

    static constexpr std::uint32_t no_candidate = UINT32_MAX;
    /// Up to this many candidates select_and_apply() orders them all and keep_first_layouts()
    /// finds repeated layouts by a scan of the kept ones (cheaper there than a table).
    static constexpr std::size_t few_candidates = 16;
    /// Up to this many states find_twins() compares each with the earlier ones.
    static constexpr std::size_t few_states = 8;

    std::span<const placement_item> items_;
    std::uint64_t ceiling_;
    std::size_t max_width_, width_ = 1, cap_ = 1;
    std::uint32_t next_death_ = UINT32_MAX;
    std::vector<state> states_, next_states_;
    std::vector<placed_span> spans_, next_spans_;
    std::vector<candidate> candidates_;
    std::vector<placed_span> fitting_;  // propose()'s gaps that fit (`item`: each_gap()'s k)
    std::vector<trail_node> trail_;
    std::vector<std::uint64_t> layout_hash_;  // select_and_apply()'s table of layouts
    std::vector<std::uint32_t> layout_index_;
    struct proposal_range {
        std::uint32_t first = 0, count = 0;
    };
    std::vector<proposal_range> proposed_;  // by state: its proposals in candidates_
    std::vector<std::uint32_t> twin_table_;  // find_twins()'s
    std::vector<std::uint32_t> searched_;     // the items of at least searched_min_bytes_, in order
    std::uint64_t searched_min_bytes_ = 0;
    bool searched_known_ = false;
};

/// The items of `p` to place (used, non-empty buffers), sorted by first use, longer-lived and
/// then larger first among equal births (a counting sort by first use, then the few items of
/// each birth by insertion), and their largest live sets in `live`: live_extents(items,
/// p.instructions.size(), the buffers' sizes), from the same sweep over the instructions.
[[nodiscard]] inline std::vector<placement_item> placement_items(const rank_program& p, const std::vector<lifetime>& life,
                                                                 std::uint64_t alignment_bytes, live_extent& live) {
    struct moment {  // an instruction: the births there, the live sets' changes there
        std::int64_t aligned = 0, raw = 0;
        std::int32_t count = 0;
        std::uint32_t births = 0;  // then the place of its first item
    };
    std::vector<moment> at(p.instructions.size() + 2);  // (a use is an instruction's index)
    std::size_t moments = at.size();
    const bool power_of_two = (alignment_bytes & (alignment_bytes - 1)) == 0;  // (then a mask, not a division)
    const auto aligned_of = [&](std::uint32_t s) {
        const std::uint64_t up = p.buffers[s].size_bytes + alignment_bytes - 1;
        return power_of_two ? up & ~(alignment_bytes - 1) : up / alignment_bytes * alignment_bytes;
    };
    for (std::uint32_t s = 0; s < p.buffers.size(); ++s) {
        const lifetime l = life[s];
        if (!l.used() || p.buffers[s].size_bytes == 0) continue;
        if (std::size_t(l.last) + 2 > moments) at.resize(moments = std::size_t(l.last) + 2);
        const auto raw = static_cast<std::int64_t>(p.buffers[s].size_bytes), aligned = static_cast<std::int64_t>(aligned_of(s));
        moment &born = at[l.first], &dead = at[l.last + 1];
        ++born.births, born.aligned += aligned, born.raw += raw, ++born.count;
        dead.aligned -= aligned, dead.raw -= raw, --dead.count;
    }
    std::uint32_t placed = 0;
    moment cur, most;
    for (moment& m : at) {
        cur.aligned += m.aligned, cur.raw += m.raw, cur.count += m.count;
        most.aligned = std::max(most.aligned, cur.aligned), most.raw = std::max(most.raw, cur.raw);
        most.count = std::max(most.count, cur.count);
        placed += std::exchange(m.births, placed);
    }
    live = {static_cast<std::uint64_t>(most.aligned), static_cast<std::uint64_t>(most.raw), static_cast<std::size_t>(most.count)};
    std::vector<placement_item> items(placed);
    for (std::uint32_t s = 0; s < p.buffers.size(); ++s)
        if (life[s].used() && p.buffers[s].size_bytes > 0) items[at[life[s].first].births++] = {s, life[s].first, life[s].last, aligned_of(s)};
    const auto before = [](const placement_item& a, const placement_item& b) {
        if (a.last != b.last) return a.last > b.last;
        if (a.size_bytes != b.size_bytes) return a.size_bytes > b.size_bytes;
        return a.slot < b.slot;
    };
    for (std::size_t k = 1; k < items.size(); ++k) {  // within each birth (slots ascending so far)
        const placement_item x = items[k];
        std::size_t j = k;
        for (; j > 0 && items[j - 1].first == x.first && before(x, items[j - 1]); --j) items[j] = items[j - 1];
        items[j] = x;
    }
    return items;
}

/// The item indices by decreasing size (greedy by size) or size x lifetime (greedy by breadth).
[[nodiscard]] inline std::vector<std::uint32_t> greedy_order(std::span<const placement_item> items, bool breadth) {
    std::vector<std::uint32_t> order(items.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto key = [&](std::uint32_t i) {
        return double(items[i].size_bytes) * (breadth ? double(items[i].last - items[i].first + 1) : 1.0);
    };
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return key(a) > key(b); });
    return order;
}

/// One beam search of place_items(): its width, and the buffers it covers as divisors of the
/// aligned live set (decisions for those of at least 1/`decision_divisor`, the search over
/// those of at least 1/`min_divisor`; place_rest() takes the others).
struct beam_stage {
    std::size_t width;
    std::uint64_t decision_divisor, min_divisor;
    bool operator==(const beam_stage&) const = default;
};

/// The searches place_items() runs, cheapest first, until one leaves the arena within
/// `good_enough_percent` of the live set. Chosen on 440 rank programs of real 65k- and 1M-token
/// GPT-6.7B and T5-11B plans (bench_plan --arena_report): no single search is best on all of
/// them — a wider beam is not uniformly better, and T5's workspaces (about 1/18 of the live
/// set) want decisions of their own — while the sequence leaves every one of them within 8%.
/// Most programs stop after the first (the cheapest: decisions for the buffers of 1/4 of the
/// live set only) or the second (S 8, M 64: 4, 3 and 1 of its 8 ranks stop after the first,
/// second and third).
inline constexpr beam_stage beam_stages[] = {{4, 4, 16}, {4, 8, 16}, {12, 8, 32}, {96, 8, 32}, {48, 16, 64}};
inline constexpr std::uint64_t good_enough_percent = 8;

/// The placements of the file comment for `items` (sorted as placement_items() sorts them),
/// whose largest live sets are `live` (live_extents()). With `max_beam_width` 0, greedy best
/// fit by size and by breadth; else the beam_stages under the aligned live set (their widths
/// capped at `max_beam_width`; a stage the cap makes a repeat is skipped), each followed by
/// place_rest() for the smaller buffers where that can help (see the loop), until the arena
/// is within good_enough_percent of the live set (a place_rest() that goes above that stops
/// there, and is finished only where its arena counts: the same result). Returns the smallest
/// arena (the first of equal ones); fills `offset` (by item). Deterministic.
inline std::uint64_t place_items(std::span<const placement_item> items, const live_extent& live, std::size_t max_beam_width,
                                 std::vector<std::uint64_t>& offset) {
    if (items.empty()) return offset.clear(), 0;
    std::vector<placed_span> scratch;
    rest_scratch rest;
    std::vector<std::uint64_t> trial;
    std::uint64_t best = UINT64_MAX;
    const auto keep = [&](std::uint64_t arena, std::vector<std::uint64_t>& placed) {
        if (arena < best) best = arena, offset.swap(placed);
    };
    if (max_beam_width == 0) {
        const overlap_lists ov(items);
        for (const bool breadth : {false, true}) {
            trial.assign(items.size(), unplaced);
            keep(place_best_fit(items, ov, greedy_order(items, breadth), trial, scratch), trial);
        }
        return best;
    }
    const std::uint64_t peak = live.aligned_bytes, good_enough = peak + peak / 100 * good_enough_percent;
    beam_placer search(items, peak, max_beam_width, live.items);
    const auto capped = [&](std::size_t k) {
        return beam_stage{std::min(beam_stages[k].width, max_beam_width), beam_stages[k].decision_divisor, beam_stages[k].min_divisor};
    };
    std::vector<std::uint64_t> previous, fallback;  // the last search's placement; the best one set aside
    std::uint64_t fallback_searched = UINT64_MAX;
    // The small buffers' placements that go above good_enough stop there (when a later one
    // reaches it, they do not count); they are finished, in order, where their arenas count:
    // before a test of `best` that they could decide, and at the end.
    std::vector<std::pair<rest_result, std::vector<std::uint64_t>>> stopped;  // (and their offsets)
    const auto finish_stopped = [&] {
        for (auto& [r, placed] : stopped) keep(place_rest_from(items, placed, rest, r.next, UINT64_MAX).arena, placed);
        stopped.clear();
    };
    for (std::size_t k = 0; k < std::size(beam_stages); ++k) {
        const beam_stage st = capped(k);
        bool repeat = false;
        for (std::size_t j = 0; j < k; ++j) repeat = repeat || capped(j) == st;
        if (repeat) continue;
        const std::uint64_t searched = search.run(st.width, peak / st.decision_divisor, peak / st.min_divisor, trial);
        if (searched > good_enough) finish_stopped();  // (those stopped are above good_enough: a searched at most that is not futile)
        // The small buffers, around the rest — unless that cannot help: the searched buffers
        // alone reach the best arena, or the search placed them as the last one did, or they
        // already miss good_enough (then set aside: placed at the end if nothing does better).
        const bool futile = searched >= best || trial == previous;
        previous = trial;
        if (futile) continue;
        if (searched > good_enough) {
            if (searched < fallback_searched) fallback_searched = searched, fallback = trial;
            continue;
        }
        const rest_result r = place_rest_from(items, trial, rest, 0, good_enough);
        if (r.arena <= good_enough) {  // (below every stopped one: they do not count)
            keep(r.arena, trial);
            stopped.clear();
            break;
        }
        stopped.emplace_back(r, std::move(trial));
    }
    finish_stopped();
    if (fallback_searched < best) keep(place_rest(items, fallback, rest), fallback);
    return best;
}

/// place_items() for a program of `instructions` instructions.
inline std::uint64_t place_items(std::span<const placement_item> items, std::size_t instructions,
                                 std::size_t max_beam_width, std::vector<std::uint64_t>& offset) {
    return place_items(items, live_extents(items, instructions), max_beam_width, offset);
}

/// Places the items whose `lane_class` is not `no_lane` in lanes, in time order: a lane is an
/// address range that holds one item at a time, as large as its largest item; each item takes
/// the free lane of its class whose size is the smallest at or above its own (else the
/// largest free one, which grows; else a new one). The lanes lie one above the other in the
/// order they were opened, those of `top_lane_class` above the others; the other items are left
/// `unplaced`. Returns the lanes' total size. O(items x lanes).
inline constexpr std::uint32_t no_lane = UINT32_MAX, top_lane_class = no_lane - 1;
inline std::uint64_t place_in_lanes(std::span<const placement_item> items, std::span<const std::uint32_t> lane_class,
                                    std::vector<std::uint64_t>& offset) {
    struct lane {
        std::uint64_t size_bytes = 0;
        std::uint32_t last = 0, lane_class = 0;
    };
    std::vector<lane> lanes;
    std::vector<std::uint32_t> lane_of(items.size(), no_lane);
    for (std::uint32_t i = 0; i < items.size(); ++i) {
        if (lane_class[i] == no_lane) continue;
        const placement_item& b = items[i];
        std::size_t best = lanes.size();
        for (std::size_t k = 0; k < lanes.size(); ++k) {
            const lane& l = lanes[k];
            if (l.lane_class != lane_class[i] || l.last >= b.first) continue;  // another class's, or busy
            if (best == lanes.size()) { best = k; continue; }
            const bool fits = l.size_bytes >= b.size_bytes, best_fits = lanes[best].size_bytes >= b.size_bytes;
            if (fits != best_fits ? fits : (fits ? l.size_bytes < lanes[best].size_bytes : l.size_bytes > lanes[best].size_bytes))
                best = k;
        }
        if (best == lanes.size()) lanes.push_back({0, 0, lane_class[i]});
        lanes[best].size_bytes = std::max(lanes[best].size_bytes, b.size_bytes);
        lanes[best].last = b.last;
        lane_of[i] = static_cast<std::uint32_t>(best);
    }
    // the lanes one above the other, as opened, those of class top_lane_class above the others
    std::vector<std::uint32_t> order(lanes.size());
    for (std::uint32_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_partition(order.begin(), order.end(), [&](std::uint32_t k) { return lanes[k].lane_class != top_lane_class; });
    std::vector<std::uint64_t> base(lanes.size(), 0);
    std::uint64_t top = 0;
    for (const std::uint32_t k : order) base[k] = top, top += lanes[k].size_bytes;
    offset.assign(items.size(), unplaced);
    for (std::size_t i = 0; i < items.size(); ++i)
        if (lane_of[i] != no_lane) offset[i] = base[lane_of[i]];
    return top;
}

/// place_rest() of the items `pick` selects (indices into `items`) around those `offset` already
/// places, before any other item: they take the gaps first. The other items stay `unplaced`.
template <class Pick>
void place_rest_first(std::span<const placement_item> items, Pick&& pick, std::vector<std::uint64_t>& offset, rest_scratch& x) {
    std::vector<placement_item> sub;  // (by first use, as `items`)
    std::vector<std::uint32_t> index;
    std::vector<std::uint64_t> sub_offset;
    for (std::uint32_t i = 0; i < items.size(); ++i)
        if (offset[i] != unplaced || pick(i)) sub.push_back(items[i]), index.push_back(i), sub_offset.push_back(offset[i]);
    place_rest(sub, sub_offset, x);
    for (std::size_t k = 0; k < index.size(); ++k) offset[index[k]] = sub_offset[k];
}

/// Where place_stashes_in_lanes() puts a rank's workspaces: with the other buffers, in lanes of
/// their own above the stashes', or into the gaps around the stash lanes before the other
/// buffers (a workspace lives for one op and is as large as a stash: the small buffers that live
/// across it would otherwise take the gap it needs and push it above the lanes).
enum class workspace_placement : std::uint8_t { with_rest, top_lanes, before_rest };

/// The lane placements that place_items() misses on long pipeline plans: a rank's stashes in
/// lanes (all in one class, or one class per stage), its workspaces as workspace_placement
/// says, the other buffers by place_rest() around them. On a plan of thousands of micro-batches
/// the stashes of one stage are mostly of a few sizes and die in the order they were born, so
/// their lanes are as large as their largest live set, where the beam search drifts 5-15%
/// above it. Returns the smallest arena of the six (the first of equal ones, in the order
/// by_stage × {with_rest, top_lanes}, then by_stage × before_rest) with its offsets in
/// `offset` (by item).
inline std::uint64_t place_stashes_in_lanes(std::span<const placement_item> items, std::span<const buffer> buffers,
                                            std::vector<std::uint64_t>& offset) {
    std::vector<std::uint32_t> lane_class(items.size());
    std::vector<std::uint64_t> trial;
    rest_scratch rest;
    std::uint64_t best = UINT64_MAX;
    const auto role = [&](std::size_t i) { return buffers[items[i].slot].role; };
    const auto try_lanes = [&](bool by_stage, workspace_placement work) {
        for (std::size_t i = 0; i < items.size(); ++i)
            lane_class[i] = role(i) == buffer_role::stash                                              ? (by_stage ? buffers[items[i].slot].stage : 0)
                            : work == workspace_placement::top_lanes && role(i) == buffer_role::workspace ? top_lane_class
                                                                                                        : no_lane;
        place_in_lanes(items, lane_class, trial);
        if (work == workspace_placement::before_rest)
            place_rest_first(items, [&](std::size_t i) { return role(i) == buffer_role::workspace; }, trial, rest);
        const std::uint64_t arena = place_rest(items, trial, rest);
        if (arena < best) best = arena, offset.swap(trial);
    };
    for (const bool by_stage : {false, true})
        for (const auto work : {workspace_placement::with_rest, workspace_placement::top_lanes}) try_lanes(by_stage, work);
    for (const bool by_stage : {false, true}) try_lanes(by_stage, workspace_placement::before_rest);
    return best;
}

/// Programs of at least `lanes_min_items` placed buffers (long plans: some 1,500 micro-batches
/// per rank and more) whose place_items() arena exceeds the live set by more than
/// `lanes_above_per_mille` per mille also try place_stashes_in_lanes(), and keep the smaller
/// arena. (Shorter programs do not: there the searches reach 1.00-1.08x, and the lanes' time
/// sweep would cost half again as much as the placement of BM_lower_validate/8/64.)
inline constexpr std::size_t lanes_min_items = 8192;
inline constexpr std::uint64_t lanes_above_per_mille = 5;

}  // namespace detail

/// Assigns offsets (pass 4b) with detail::place_items() (and, on long programs where that
/// arena exceeds the live set by more than detail::lanes_above_per_mille, with
/// detail::place_stashes_in_lanes()) and sets arena_bytes and live_peak_bytes; `life` is
/// buffer_lifetimes(p).
inline void assign_offsets(rank_program& p, const std::vector<lifetime>& life, std::uint64_t alignment_bytes = 256,
                           std::size_t max_beam_width = 96) {
    detail::live_extent live;
    const std::vector<detail::placement_item> items = detail::placement_items(p, life, alignment_bytes, live);
    std::vector<std::uint64_t> offset;
    std::uint64_t arena = detail::place_items(items, live, max_beam_width, offset);
    if (max_beam_width > 0 && items.size() >= detail::lanes_min_items &&
        arena > live.aligned_bytes + live.aligned_bytes / 1000 * detail::lanes_above_per_mille) {
        std::vector<std::uint64_t> lanes;
        const std::uint64_t in_lanes = detail::place_stashes_in_lanes(items, p.buffers, lanes);
        if (in_lanes < arena) arena = in_lanes, offset.swap(lanes);
    }
    for (buffer& b : p.buffers) b.offset_bytes = 0;
    for (std::size_t i = 0; i < items.size(); ++i) p.buffers[items[i].slot].offset_bytes = offset[i];
    p.arena_bytes = arena;
    p.live_peak_bytes = live.raw_bytes;  // = live_peak_bytes(p, life): empty buffers add nothing
}

/// assign_offsets() computing the lifetimes itself.
inline void assign_offsets(rank_program& p, std::uint64_t alignment_bytes = 256, std::size_t max_beam_width = 96) {
    assign_offsets(p, buffer_lifetimes(p), alignment_bytes, max_beam_width);
}

/// Pass 4: frees, then offsets (the lifetimes computed once).
inline void plan_buffers(rank_program& p, std::uint64_t alignment_bytes = 256) {
    const std::vector<lifetime> life = insert_frees(p);
    assign_offsets(p, life, alignment_bytes);
}

}  // namespace pipeplan::plan
