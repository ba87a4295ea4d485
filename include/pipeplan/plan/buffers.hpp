// pipeplan/plan/buffers.hpp — buffer planning (lowering pass 4): lifetimes, frees, offsets.
//
// A buffer is live from the first instruction that names it (in, out or stash) to the last
// one; plan_buffers() emits a `free(slot)` right after that last use (a workspace lives only
// during its op and is never freed explicitly). Offsets come from greedy best-fit assignment
// in the manner of TFLite's and XLA's planners: buffers taken in some order, each placed in
// the smallest gap left between the already placed buffers whose lifetimes overlap its own,
// or above them all when no gap fits; several orders are tried (assign_offsets). Offsets are
// multiples of `alignment_bytes`. The arena is the highest end; `live_peak_bytes` — the
// largest total size of buffers live at one instruction — is a lower bound on any arena, and
// the planner's arena is never below it (offsets never overlap).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
    for (std::uint32_t i = 0; i < p.instructions.size(); ++i) {
        const instruction& ins = p.instructions[i];
        for (std::uint32_t s : {ins.in, ins.out, ins.stash, ins.work})
            if (s != no_slot && s < life.size()) {
                life[s].first = std::min(life[s].first, i);
                life[s].last = std::max(life[s].last, i);
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

/// Inserts a `free` after the last use of every non-workspace buffer (pass 4a).
inline void insert_frees(rank_program& p) {
    const std::vector<lifetime> life = buffer_lifetimes(p);
    std::vector<std::vector<std::uint32_t>> frees_after(p.instructions.size());
    for (std::uint32_t s = 0; s < life.size(); ++s)
        if (life[s].used() && p.buffers[s].role != buffer_role::workspace) frees_after[life[s].last].push_back(s);
    std::vector<instruction> out;
    out.reserve(p.instructions.size() + p.buffers.size());
    for (std::size_t i = 0; i < p.instructions.size(); ++i) {
        out.push_back(p.instructions[i]);
        for (std::uint32_t s : frees_after[i]) {
            instruction f;
            f.kind = instr_kind::free;
            f.in = s;
            f.mb = p.buffers[s].mb;
            f.stage = p.buffers[s].stage;
            out.push_back(f);
        }
    }
    p.instructions = std::move(out);
}

namespace detail {

/// Best-fit placement of the buffers in `order`; `overlapping[s]` lists the buffers whose
/// lifetimes meet s's. Returns the arena size; fills `offset`.
inline std::uint64_t place_best_fit(const rank_program& p, const std::vector<std::vector<std::uint32_t>>& overlapping,
                                    const std::vector<std::uint32_t>& order, std::uint64_t alignment_bytes,
                                    std::vector<std::uint64_t>& offset, std::vector<char>& placed) {
    const auto align = [&](std::uint64_t x) { return (x + alignment_bytes - 1) / alignment_bytes * alignment_bytes; };
    struct span {
        std::uint64_t begin, end;
    };
    offset.assign(p.buffers.size(), 0);
    placed.assign(p.buffers.size(), 0);
    std::vector<span> busy;
    std::uint64_t arena = 0;
    for (std::uint32_t s : order) {
        busy.clear();
        for (std::uint32_t q : overlapping[s])
            if (placed[q]) busy.push_back({offset[q], offset[q] + align(p.buffers[q].size_bytes)});
        std::sort(busy.begin(), busy.end(), [](const span& a, const span& b) { return a.begin < b.begin; });
        const std::uint64_t need = align(p.buffers[s].size_bytes);
        std::uint64_t best = 0, best_gap = UINT64_MAX, cursor = 0;
        bool found = false;
        for (const span& b : busy) {
            if (b.begin > cursor && b.begin - cursor >= need && b.begin - cursor < best_gap) {
                best = cursor;
                best_gap = b.begin - cursor;
                found = true;
            }
            cursor = std::max(cursor, b.end);
        }
        offset[s] = found ? best : cursor;
        arena = std::max(arena, offset[s] + need);
        placed[s] = 1;
    }
    return arena;
}

}  // namespace detail

/// Assigns offsets (pass 4b) and sets arena_bytes and live_peak_bytes: best-fit placement
/// under three orders — decreasing size (TFLite's greedy by size), decreasing size × lifetime
/// (greedy by breadth), and first use (a linear-scan allocator) — then a seeded local search
/// on the best order (`improve_steps` moves of one buffer to another position, kept when the
/// arena does not grow). Deterministic; the smallest arena found wins.
inline void assign_offsets(rank_program& p, std::uint64_t alignment_bytes = 256, std::size_t improve_steps = 32) {
    const std::vector<lifetime> life = buffer_lifetimes(p);
    std::vector<std::uint32_t> base;
    for (std::uint32_t s = 0; s < p.buffers.size(); ++s)
        if (life[s].used() && p.buffers[s].size_bytes > 0) base.push_back(s);
    std::vector<std::vector<std::uint32_t>> overlapping(p.buffers.size());
    {
        std::vector<std::uint32_t> by_first = base;
        std::sort(by_first.begin(), by_first.end(), [&](auto a, auto b) { return life[a].first < life[b].first; });
        for (std::size_t i = 0; i < by_first.size(); ++i)
            for (std::size_t k = i + 1; k < by_first.size() && life[by_first[k]].first <= life[by_first[i]].last; ++k) {
                overlapping[by_first[i]].push_back(by_first[k]);
                overlapping[by_first[k]].push_back(by_first[i]);
            }
    }
    const auto size = [&](std::uint32_t s) { return p.buffers[s].size_bytes; };
    const auto length = [&](std::uint32_t s) { return std::uint64_t(life[s].last - life[s].first + 1); };
    std::vector<std::vector<std::uint32_t>> orders(5, base);
    const auto tie = [&](std::uint32_t a, std::uint32_t b) { return life[a].first != life[b].first ? life[a].first < life[b].first : a < b; };
    std::sort(orders[0].begin(), orders[0].end(), [&](auto a, auto b) { return size(a) != size(b) ? size(a) > size(b) : tie(a, b); });
    std::sort(orders[1].begin(), orders[1].end(), [&](auto a, auto b) {
        const double x = double(size(a)) * double(length(a)), y = double(size(b)) * double(length(b));
        return x != y ? x > y : tie(a, b);
    });
    std::sort(orders[2].begin(), orders[2].end(), [&](auto a, auto b) { return life[a].first != life[b].first ? life[a].first < life[b].first : size(a) != size(b) ? size(a) > size(b) : a < b; });
    // long-lived buffers first (by first use), then the short-lived ones by size
    const auto long_lived = [&](std::uint32_t s) { return p.buffers[s].role == buffer_role::stash; };
    std::sort(orders[3].begin(), orders[3].end(), [&](auto a, auto b) {
        if (long_lived(a) != long_lived(b)) return long_lived(a);
        if (long_lived(a)) return tie(a, b);
        return size(a) != size(b) ? size(a) > size(b) : tie(a, b);
    });
    std::sort(orders[4].begin(), orders[4].end(), [&](auto a, auto b) {
        if (long_lived(a) != long_lived(b)) return long_lived(a);
        return size(a) != size(b) ? size(a) > size(b) : tie(a, b);
    });
    std::vector<std::uint64_t> offset, best_offset;
    std::vector<char> placed;
    std::uint64_t best = UINT64_MAX;
    std::vector<std::uint32_t> best_order;
    for (const auto& order : orders) {
        const std::uint64_t arena = detail::place_best_fit(p, overlapping, order, alignment_bytes, offset, placed);
        if (arena < best) {
            best = arena;
            best_offset = offset;
            best_order = order;
        }
    }
    // local search: move one buffer earlier in the order (placing it sooner)
    std::uint64_t state = 0x9E3779B97F4A7C15ull ^ base.size();
    const auto next = [&state](std::size_t n) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<std::size_t>((state >> 33) % n);
    };
    for (std::size_t step = 0; step < improve_steps && best_order.size() > 1; ++step) {
        std::vector<std::uint32_t> cand = best_order;
        const std::size_t i = 1 + next(cand.size() - 1), j = next(i);
        const std::uint32_t x = cand[i];
        cand.erase(cand.begin() + static_cast<std::ptrdiff_t>(i));
        cand.insert(cand.begin() + static_cast<std::ptrdiff_t>(j), x);
        const std::uint64_t arena = detail::place_best_fit(p, overlapping, cand, alignment_bytes, offset, placed);
        if (arena <= best) {
            best = arena;
            best_offset = offset;
            best_order = std::move(cand);
        }
    }
    for (std::uint32_t s = 0; s < p.buffers.size(); ++s) p.buffers[s].offset_bytes = best_offset.empty() ? 0 : best_offset[s];
    p.arena_bytes = base.empty() ? 0 : best;
    p.live_peak_bytes = live_peak_bytes(p, life);
}

/// Pass 4: frees, then offsets.
inline void plan_buffers(rank_program& p, std::uint64_t alignment_bytes = 256) {
    insert_frees(p);
    assign_offsets(p, alignment_bytes);
}

}  // namespace pipeplan::plan
