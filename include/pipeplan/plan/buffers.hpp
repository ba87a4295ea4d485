// pipeplan/plan/buffers.hpp — buffer planning (lowering pass 4): lifetimes, frees, offsets.
//
// A buffer is live from the first instruction that names it (in, out or stash) to the last
// one; plan_buffers() emits a `free(slot)` right after that last use (a workspace lives only
// during its op and is never freed explicitly). Offsets come from greedy best-fit assignment
// in the manner of TFLite's and XLA's planners: buffers in decreasing size (ties: earlier
// first use, then slot), each placed in the smallest gap left between the already placed
// buffers whose lifetimes overlap its own, or above them all when no gap fits. Offsets are
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

/// Assigns best-fit offsets (pass 4b) and sets arena_bytes and live_peak_bytes.
inline void assign_offsets(rank_program& p, std::uint64_t alignment_bytes = 256) {
    const std::vector<lifetime> life = buffer_lifetimes(p);
    const auto align = [&](std::uint64_t x) { return (x + alignment_bytes - 1) / alignment_bytes * alignment_bytes; };
    std::vector<std::uint32_t> order;
    for (std::uint32_t s = 0; s < p.buffers.size(); ++s) {
        p.buffers[s].offset_bytes = 0;
        if (life[s].used() && p.buffers[s].size_bytes > 0) order.push_back(s);
    }
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        const auto sa = p.buffers[a].size_bytes, sb = p.buffers[b].size_bytes;
        if (sa != sb) return sa > sb;
        return life[a].first != life[b].first ? life[a].first < life[b].first : a < b;
    });
    struct span {
        std::uint64_t begin, end;
    };
    std::vector<std::uint32_t> placed;
    std::vector<span> busy;
    std::uint64_t arena = 0;
    for (std::uint32_t s : order) {
        busy.clear();
        for (std::uint32_t q : placed)
            if (life[q].overlaps(life[s]))
                busy.push_back({p.buffers[q].offset_bytes, p.buffers[q].offset_bytes + align(p.buffers[q].size_bytes)});
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
        p.buffers[s].offset_bytes = found ? best : cursor;
        arena = std::max(arena, p.buffers[s].offset_bytes + need);
        placed.push_back(s);
    }
    p.arena_bytes = arena;
    p.live_peak_bytes = live_peak_bytes(p, life);
}

/// Pass 4: frees, then offsets.
inline void plan_buffers(rank_program& p, std::uint64_t alignment_bytes = 256) {
    insert_frees(p);
    assign_offsets(p, alignment_bytes);
}

}  // namespace pipeplan::plan
