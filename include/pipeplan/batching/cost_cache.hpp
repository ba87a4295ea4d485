// pipeplan/batching/cost_cache.hpp — micro-batch costs kept across splits and iterations.
//
// The exact splitter prices padded shapes (mbs, E, D) row by row: for a fixed (E, D) and
// recomputation mode, mbs = 1, 2, ... until a size does not fit. The rows depend only on the
// evaluator (model, pipeline configuration, accounting), not on the memory rung nor on the batch,
// so a caller that splits many batches with one evaluator — the planner's two splits per
// iteration (preferred and available memory), and every later iteration — can keep them:
//
//   pipeplan::batching::shape_cost_cache cache;
//   auto a = exact_split(model, batch, config, options, nullptr, &cache);
//   auto b = exact_split(model, next_batch, config, options, nullptr, &cache);  // reuses a's costs
//
// Each row holds the costs of mbs = 1..n and whether mbs = n + 1 cannot be priced. A cache
// remembers the evaluator it was filled by (model address, the configuration's pricing fields,
// accounting) and empties itself when used with another one, or when it holds more than
// `max_costs` costs, so results never depend on what was cached: a split with a cache equals
// the split without one. A micro-batch's cost does not depend on the device memory, dp or the
// ZeRO stage (they enter the model states and the memory rungs, which are not cached), so a
// cache outlives the planner's memory re-plans, which lower the device memory.
// Not thread-safe: one cache per thread (or per planner).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/stage_cost.hpp"

namespace pipeplan::batching {

class shape_cost_cache {
public:
    /// Costs of one (E, D, recomputation): costs[m − 1] = cost at mbs m.
    struct row {
        std::vector<microbatch_cost> costs;
        bool end = false;  ///< mbs = costs.size() + 1 cannot be priced (nor, by assumption, larger)
    };

    explicit shape_cost_cache(std::size_t max_costs = std::size_t{1} << 20) : max_costs_(max_costs) {}

    /// Makes the cache usable with `ev`: empties it when it was filled by another evaluator
    /// setting, or when it has grown beyond its bound.
    template <class Model>
    void bind(const stage_cost_evaluator<Model>& ev) {
        const key_type k{static_cast<const void*>(&ev.model()), pricing_fields(ev.config()), ev.mode()};
        if (!owner_ || !(owner_->model == k.model && owner_->mode == k.mode && owner_->config == k.config) ||
            costs_ > max_costs_) {
            clear();
            owner_ = k;
        }
    }

    /// The row of (E, D, r) (created empty); the reference stays valid until clear().
    [[nodiscard]] row& at(int seqlen, int dec_seqlen, recompute_mode r) {
        return rows_[shape_key{seqlen, dec_seqlen, static_cast<int>(r)}];
    }

    /// The cost at mbs `m` of `rw` (the row of (E, D, r)), pricing the missing sizes up to m
    /// with `ev`; nullptr when m cannot be priced.
    template <class Model>
    const microbatch_cost* cost(row& rw, const stage_cost_evaluator<Model>& ev, int seqlen, int dec_seqlen,
                                recompute_mode r, int m) {
        return cost(rw, m, [&](int mbs) { return ev.evaluate(microbatch_shape{mbs, seqlen, dec_seqlen}, r); });
    }

    /// As above, pricing the missing sizes with `price(mbs)` (an estimate<microbatch_cost> of
    /// the row's shape at that mbs; e.g. stage_cost_evaluator::evaluate(prepared, mbs)).
    template <class Price>
    const microbatch_cost* cost(row& rw, int m, Price&& price) {
        while (!rw.end && static_cast<int>(rw.costs.size()) < m) {
            const auto e = price(static_cast<int>(rw.costs.size()) + 1);
            if (!e.ok()) {
                rw.end = true;
                break;
            }
            rw.costs.push_back(e.value_or(microbatch_cost{}));  // ok() checked above
            ++costs_;
        }
        if (static_cast<int>(rw.costs.size()) < m) return nullptr;
        return &rw.costs[static_cast<std::size_t>(m) - 1];
    }

    /// The costs of sizes m .. m + n − 1 of `rw` (fewer where a size cannot be priced: the span
    /// ends before it), pricing the missing sizes in one call of `price_row(first, count, out)`,
    /// which prices sizes first .. first + count − 1 into out[0 ..] and returns how many it
    /// priced before the first that cannot be (e.g. stage_cost_evaluator::evaluate_row).
    template <class PriceRow>
    std::span<const microbatch_cost> costs(row& rw, int m, int n, PriceRow&& price_row) {
        const auto want = static_cast<std::size_t>(m) + static_cast<std::size_t>(n) - 1;
        if (!rw.end && rw.costs.size() < want) {
            const std::size_t have = rw.costs.size();
            rw.costs.resize(want);
            const std::size_t priced = price_row(static_cast<int>(have) + 1, want - have, rw.costs.data() + have);
            rw.costs.resize(have + priced);
            rw.end = have + priced < want;
            costs_ += priced;
        }
        const std::size_t from = static_cast<std::size_t>(m) - 1;
        if (rw.costs.size() <= from) return {};
        return {rw.costs.data() + from, std::min(want, rw.costs.size()) - from};
    }

    /// Costs held.
    [[nodiscard]] std::size_t size() const noexcept { return costs_; }
    void clear() {
        rows_.clear();
        costs_ = 0;
        owner_.reset();
    }

private:
    /// The configuration without the fields a micro-batch's cost does not depend on.
    static pipeline_config pricing_fields(pipeline_config c) {
        c.device_memory_mb = 0;
        c.dp = 1;
        c.zero_stage = 0;
        return c;
    }
    struct key_type {
        const void* model = nullptr;
        pipeline_config config;
        accounting_mode mode = accounting_mode::pipeplan;
    };
    struct shape_key {
        int seqlen, dec_seqlen, recompute;
        friend bool operator==(const shape_key&, const shape_key&) noexcept = default;
    };
    struct shape_hash {
        std::size_t operator()(const shape_key& k) const noexcept {
            std::uint64_t h = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.seqlen)) << 32) |
                              static_cast<std::uint32_t>(k.dec_seqlen);
            h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.recompute)) * 0x9e3779b97f4a7c15ULL;
            h ^= h >> 29;
            h *= 0xbf58476d1ce4e5b9ULL;
            return static_cast<std::size_t>(h ^ (h >> 32));
        }
    };
    std::size_t max_costs_;
    std::size_t costs_ = 0;
    std::optional<key_type> owner_;
    std::unordered_map<shape_key, row, shape_hash> rows_;
};

}  // namespace pipeplan::batching
