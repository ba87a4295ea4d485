// pipeplan/schedule/v_block.hpp — the building blocks of V-Half and V-Min (Qi et al., "Pipeline
// Parallelism with Controllable Memory", arXiv 2405.15362) and the device orders they make.
//
// A building block lays one micro-batch's four F and B ops (two chunks placed as a V, split
// backward) on unit time slots of every device. Following the paper:
//   1. Repeat: micro-batch j's block is shifted by 6j slots (a micro-batch brings 6 one-slot ops
//      to each device: F, B, W of two chunks); a device's four slots differ modulo 6, so blocks
//      never collide, and each period leaves two slots for W.
//   2. Fill: each free slot runs a pending W (the n-th W after the n-th B).
//   3. Reorder: the ops of the warm-up (before device 0's first first-chunk B) and of the
//      cool-down (after the last micro-batch's first forward), in slot order, move to the earliest
//      free slot after their inputs that keeps every device's held activations (a forward adds
//      one chunk, its W frees it) within the block's peak; then the slots are squeezed (each op
//      as early as its inputs and its device allow). This runs once with the W placed, then
//      again on the F and B alone (W freeing in the free slots), which are squeezed again.
//   4. Order: each device runs its F and B in slot order and a pending W in each free slot (the
//      second chunk's first), then the W left.
// The lifespan of a block (slots from a chunk's F to its B) sets the memory: V-Min holds
// ⌊(S + 4)/3⌋ micro-batches' activations at its peak (⅓ of 1F1B's S), V-Half ⌊(S + 2)/2⌋ (½).
// The orders depend on S and M only; the simulator times them with real durations.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/schedule/op.hpp"

namespace pipeplan::schedule {

/// Slots of one micro-batch's building block on one device d of S: its first-chunk forward
/// (stage d), second-chunk forward (stage 2S − 1 − d), second-chunk B and first-chunk B. The
/// four must differ modulo 6 and follow the data flow (a forward after the previous stage's,
/// a B after the next stage's).
struct v_block_slots {
    std::size_t f0 = 0, f1 = 0, b1 = 0, b0 = 0;
    friend bool operator==(const v_block_slots&, const v_block_slots&) = default;
};

/// V-Min's block: F0 = d, F1 = 2S − 1 − d, B1 = 2S + g + d, B0 = 4S + g − 1 − d, with g = 2 when
/// 3 divides S (2S ≡ 0 mod 6 would put F0 and B1 on one slot), else 0.
[[nodiscard]] inline std::vector<v_block_slots> v_min_block(std::size_t S) {
    const std::size_t g = S % 3 == 0 ? 2 : 0;
    std::vector<v_block_slots> out(S);
    for (std::size_t d = 0; d < S; ++d) out[d] = {d, 2 * S - 1 - d, 2 * S + g + d, 4 * S + g - 1 - d};
    return out;
}

/// V-Half's block: first-chunk forwards two slots apart down the devices, F0 = 2d,
/// F1 = 3S − 2 − d, B1 = 3S + g − 1 + 2d, B0 = 6S + g − 2 − d, with g = 3 when S is even (F1 and
/// B0 would share a slot modulo 6), else 0.
[[nodiscard]] inline std::vector<v_block_slots> v_half_block(std::size_t S) {
    const std::size_t g = S % 2 == 0 ? 3 : 0;
    std::vector<v_block_slots> out(S);
    for (std::size_t d = 0; d < S; ++d) out[d] = {2 * d, 3 * S - 2 - d, 3 * S + g - 1 + 2 * d, 6 * S + g - 2 - d};
    return out;
}

namespace detail {

// t[d][k][j]: the slot of device d's op of kind k for micro-batch j; k = 0 first-chunk F,
// 1 second-chunk F, 2 second-chunk B, 3 first-chunk B, 4 a W of either chunk (the j-th W of the
// device, after its j-th B). Each list rises with j.
using v_slot_table = std::vector<std::array<std::vector<std::size_t>, 5>>;

class v_block_builder {
public:
    v_block_builder(const std::vector<v_block_slots>& block, std::size_t M) : S_(block.size()), M_(M), t_(S_) {
        for (std::size_t d = 0; d < S_; ++d) {
            const std::size_t at[4] = {block[d].f0, block[d].f1, block[d].b1, block[d].b0};
            for (std::size_t k = 0; k < 4; ++k) {
                for (std::size_t l = 0; l < k; ++l)
                    if (at[k] % 6 == at[l] % 6)
                        throw invalid_argument("v_block_orders: device " + std::to_string(d) +
                                               "'s block slots collide modulo 6");
                t_[d][k].resize(M);
                for (std::size_t j = 0; j < M; ++j) t_[d][k][j] = at[k] + 6 * j;
            }
        }
    }

    // Steps 2 and 3 of the file comment.
    void fill_and_reorder() {
        if (M_ == 0) return;
        put_pooled_w();
        reorder(true);
        squeeze();
        for (auto& dev : t_) dev[4].clear();
        reorder(false);
        put_pooled_w();
        squeeze();
        for (auto& dev : t_) dev[4].clear();
    }

    // Step 4 of the file comment.
    [[nodiscard]] device_orders orders() const {
        device_orders out(S_);
        for (std::size_t d = 0; d < S_; ++d) {
            std::vector<std::int64_t> at = occupancy(d, true);  // k·2M + j, −1 when free
            const auto s0 = static_cast<std::uint32_t>(d), s1 = static_cast<std::uint32_t>(2 * S_ - 1 - d);
            auto& o = out[d];
            o.reserve(6 * M_);
            std::uint32_t w_next[2] = {0, 0}, b_done[2] = {0, 0};  // [0]: second chunk, [1]: first
            const auto run_w = [&](std::size_t c) { o.push_back({op_kind::W, w_next[c]++, c == 0 ? s1 : s0}); };
            for (const std::int64_t a : at) {
                if (a < 0) {
                    if (w_next[0] < b_done[0]) run_w(0);
                    else if (w_next[1] < b_done[1]) run_w(1);
                    continue;
                }
                const auto k = static_cast<std::size_t>(a) / (2 * M_);
                const auto j = static_cast<std::uint32_t>(static_cast<std::size_t>(a) % (2 * M_));
                o.push_back({k < 2 ? op_kind::F : op_kind::B, j, k == 0 || k == 3 ? s0 : s1});
                if (k == 2) ++b_done[0];
                if (k == 3) ++b_done[1];
            }
            while (w_next[0] < b_done[0]) run_w(0);
            while (w_next[1] < b_done[1]) run_w(1);
        }
        return out;
    }

private:
    std::size_t S_, M_;
    v_slot_table t_;

    [[nodiscard]] std::size_t last_slot(std::size_t d) const {
        std::size_t m = 0;
        for (const auto& v : t_[d])
            if (!v.empty()) m = std::max(m, v.back());
        return m;
    }
    // What occupies each slot of device d up to its last: k·2M + j (a device runs 2M W), or −1
    // (free); W only when `fb_only` is false.
    [[nodiscard]] std::vector<std::int64_t> occupancy(std::size_t d, bool fb_only) const {
        std::vector<std::int64_t> at(last_slot(d) + 1, -1);
        for (std::size_t k = 0; k < (fb_only ? 4 : 5); ++k)
            for (std::size_t j = 0; j < t_[d][k].size(); ++j) at[t_[d][k][j]] = static_cast<std::int64_t>(k * 2 * M_ + j);
        return at;
    }
    // Step 2 for all devices: the j-th W in the first free slot after the j-th B, the rest after the last slot.
    void put_pooled_w() {
        for (std::size_t d = 0; d < S_; ++d) {
            t_[d][4].clear();
            const std::vector<std::int64_t> at = occupancy(d, true);
            std::size_t pending = 0;
            for (std::size_t i = 0; i < at.size(); ++i) {
                if (at[i] >= 0 && static_cast<std::size_t>(at[i]) / (2 * M_) >= 2) ++pending;
                if (at[i] < 0 && pending > 0) {
                    t_[d][4].push_back(i);
                    --pending;
                }
            }
            for (std::size_t i = at.size(); pending > 0; ++i, --pending) t_[d][4].push_back(i);
        }
    }
    // What a device holds after a prefix of its slots: chunk activations and, when W is implicit,
    // the B whose W has not run yet.
    struct held_state {
        std::int64_t cur = 0, pending = 0;
        friend bool operator==(const held_state&, const held_state&) = default;
    };
    // The state after slot content `a` (occupancy()): a forward adds one activation, a W (placed,
    // or with `implicit_w` run in a free slot while one is pending) frees one.
    [[nodiscard]] held_state step(held_state h, std::int64_t a, bool implicit_w) const {
        const std::int64_t k = a < 0 ? -1 : a / static_cast<std::int64_t>(2 * M_);
        if (k == 0 || k == 1) ++h.cur;
        else if (k == 4) --h.cur;
        else if (k == 2 || k == 3) ++h.pending;
        else if (implicit_w && h.pending > 0) {
            --h.pending;
            --h.cur;
        }
        return h;
    }
    // Moves the op in slot `from` of `at` to the free slot `to` < `from` when that keeps the held
    // activations within `cap`, and updates `after` (the state after each slot of `at`, whose
    // peak is within `cap`); returns whether it moved. The slots before `to` keep their states,
    // and from the first slot at or past `from` whose state equals the unmoved one's, so do the rest.
    bool try_move(std::vector<std::int64_t>& at, std::vector<held_state>& after, std::size_t to, std::size_t from,
                  std::int64_t cap, bool implicit_w) const {
        const auto run = [&](bool write) {
            held_state h = to == 0 ? held_state{} : after[to - 1];
            for (std::size_t i = to; i < at.size(); ++i) {
                h = step(h, i == to ? at[from] : i == from ? -1 : at[i], implicit_w);
                if (h.cur > cap) return false;
                if (i >= from && h == after[i]) return true;
                if (write) after[i] = h;
            }
            return true;
        };
        if (!run(false)) return false;
        (void)run(true);
        std::swap(at[to], at[from]);
        return true;
    }
    // The latest slot among the inputs of (d, k, j) (−1: none): the previous stage's op of its
    // kind, the op before it on its own (micro-batch, chunk path), its kind's previous micro-batch.
    [[nodiscard]] std::int64_t input_slot(std::size_t d, std::size_t k, std::size_t j) const {
        std::int64_t s = -1;
        const auto in = [&](std::size_t v) { s = std::max(s, static_cast<std::int64_t>(v)); };
        if ((k == 0 || k == 2) && d > 0) in(t_[d - 1][k][j]);
        if ((k == 1 || k == 3) && d + 1 < S_) in(t_[d + 1][k][j]);
        if (k >= 1 && k <= 3) in(t_[d][k - 1][j]);
        if (k == 4) in(nth_b_slot(d, j));
        if (j > 0) in(t_[d][k][j - 1]);
        return s;
    }
    // The slot of device d's j-th B (of either chunk; the two lists rise and never share a slot).
    [[nodiscard]] std::size_t nth_b_slot(std::size_t d, std::size_t j) const {
        const auto& b1 = t_[d][2];
        const auto& b0 = t_[d][3];
        for (std::size_t x = 0, y = 0;;) {  // B taken of each list, in slot order
            const bool second = x < b1.size() && (y == b0.size() || b1[x] < b0[y]);
            if (x + y == j) return second ? b1[x] : b0[y];
            ++(second ? x : y);
        }
    }
    // All ops (with W when `with_w`) in slot order, ties by device, kind, micro-batch:
    // (slot, device, kind, micro-batch). A counting sort by slot of the ops listed in tie order.
    [[nodiscard]] std::vector<std::tuple<std::size_t, std::size_t, std::size_t, std::size_t>> by_slot(bool with_w) const {
        const std::size_t kinds = with_w ? 5 : 4;
        std::size_t slots = 0;
        for (std::size_t d = 0; d < S_; ++d)
            for (std::size_t k = 0; k < kinds; ++k)
                if (!t_[d][k].empty()) slots = std::max(slots, t_[d][k].back() + 1);
        std::vector<std::size_t> first(slots + 1, 0);  // counts, then each slot's first place
        for (std::size_t d = 0; d < S_; ++d)
            for (std::size_t k = 0; k < kinds; ++k)
                for (const std::size_t slot : t_[d][k]) ++first[slot + 1];
        for (std::size_t i = 1; i <= slots; ++i) first[i] += first[i - 1];
        std::vector<std::tuple<std::size_t, std::size_t, std::size_t, std::size_t>> ops(first[slots]);
        for (std::size_t d = 0; d < S_; ++d)
            for (std::size_t k = 0; k < kinds; ++k)
                for (std::size_t j = 0; j < t_[d][k].size(); ++j) ops[first[t_[d][k][j]]++] = {t_[d][k][j], d, k, j};
        return ops;
    }
    // Step 3's move (warm-up only with the W placed) within the block's peak.
    void reorder(bool with_w) {
        std::vector<std::vector<std::int64_t>> at(S_);
        std::vector<std::vector<held_state>> after(S_);  // per device, the state after each slot
        std::int64_t cap = 0;
        for (std::size_t d = 0; d < S_; ++d) {
            at[d] = occupancy(d, !with_w);
            held_state h;
            for (const std::int64_t a : at[d]) {
                after[d].push_back(h = step(h, a, !with_w));
                cap = std::max(cap, h.cur);
            }
        }
        int phase = 0;  // 0 warm-up, 1 steady (from device 0's first first-chunk B), 2 cool-down (after a last F)
        for (const auto& [slot, d, k, j] : by_slot(with_w)) {
            if (phase == 0 && d == 0 && k == 3) phase = 1;
            if (phase == 1) {
                if (k == 0 && j + 1 == M_) phase = 2;
                continue;
            }
            if (phase == 0 && !with_w) continue;
            for (auto s = static_cast<std::size_t>(input_slot(d, k, j) + 1); s < slot; ++s) {
                if (at[d][s] >= 0) continue;
                if (try_move(at[d], after[d], s, slot, cap, !with_w)) {
                    t_[d][k][j] = s;
                    break;
                }
            }
        }
    }
    // Each op, in slot order, at the earliest slot after its inputs and its device's previous op.
    void squeeze() {
        std::vector<std::int64_t> free_from(S_, 0);
        v_slot_table end = t_;
        for (const auto& [slot, d, k, j] : by_slot(true)) {
            std::int64_t s = free_from[d];
            if ((k == 0 || k == 2) && d > 0) s = std::max(s, static_cast<std::int64_t>(end[d - 1][k][j]));
            if ((k == 1 || k == 3) && d + 1 < S_) s = std::max(s, static_cast<std::int64_t>(end[d + 1][k][j]));
            if (k >= 1 && k <= 3) s = std::max(s, static_cast<std::int64_t>(end[d][k - 1][j]));
            if (j > 0) s = std::max(s, static_cast<std::int64_t>(end[d][k][j - 1]));
            t_[d][k][j] = static_cast<std::size_t>(s);
            end[d][k][j] = static_cast<std::size_t>(s + 1);
            free_from[d] = s + 1;
        }
    }
};

}  // namespace detail

/// The device orders of `block` (one entry per device) for M micro-batches on a V of 2S stages
/// (the file comment's steps; step 3 only when `reorder`); throws invalid_argument when a
/// device's slots collide modulo 6. Step 3 tries slots one by one, each try replaying the
/// device's held activations from the tried slot until they rejoin the unmoved order's: 1.9 M
/// instructions for V-Half at S = 8, M = 64 and 5.0 M at S = 16, M = 65 (callgrind;
/// BM_VBlockOrders), against 0.04 ms without step 3; the order searches of V-Half and V-Min ask
/// for the same squeezed orders at every evaluation. So the last 8 results (reordered or not) are
/// kept per thread and reused for the same block, M and `reorder`.
[[nodiscard]] inline device_orders v_block_orders(const std::vector<v_block_slots>& block, std::size_t M,
                                                  bool reorder = true) {
    struct entry {
        std::vector<v_block_slots> block;
        std::size_t microbatches = 0;
        bool reordered = false;
        device_orders orders;
    };
    thread_local std::vector<entry> kept;
    for (const entry& e : kept)
        if (e.microbatches == M && e.reordered == reorder && e.block == block) return e.orders;
    detail::v_block_builder b(block, M);
    if (reorder) b.fill_and_reorder();
    if (kept.size() == 8) kept.erase(kept.begin());
    kept.push_back({block, M, reorder, b.orders()});
    return kept.back().orders;
}

}  // namespace pipeplan::schedule
