// pipeplan/cost/table.hpp — dense precomputed cost tables for planners that query a cost model
// many times over the same (mbs, sequence length) points (e.g. the micro-batch splitter).
//
//   auto t = pipeplan::tabulate(model, {.comp = component::encoder, .tp = 2}, 64, {128, 256, 512});
//   const pipeplan::layer_cost& c = t.at(8, 1);   // mbs 8, seqlen 256
//
// Works with any pipeplan::cost_model; statuses (out of range, unsupported) are kept per cell.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan {

/// layer_cost for mbs 1..max_mbs() × seqlens_tokens() of one component under fixed tp,
/// recomputation and decoder length. Row-major: all lengths of mbs 1, then mbs 2, ...
class cost_table {
public:
    cost_table() = default;
    cost_table(layer_query base, int max_mbs, std::vector<int> seqlens_tokens, std::vector<layer_cost> cells)
        : base_(base), max_mbs_(max_mbs), seqlens_(std::move(seqlens_tokens)), cells_(std::move(cells)) {
        if (cells_.size() != static_cast<std::size_t>(max_mbs_) * seqlens_.size())
            throw invalid_argument("cost_table: cell count does not match max_mbs x lengths");
    }

    /// The query every cell was built from (mbs and seqlen_tokens vary per cell).
    [[nodiscard]] const layer_query& base() const noexcept { return base_; }
    [[nodiscard]] int max_mbs() const noexcept { return max_mbs_; }
    [[nodiscard]] const std::vector<int>& seqlens_tokens() const noexcept { return seqlens_; }

    /// The cost at micro-batch size `mbs` (1..max_mbs) and length seqlens_tokens()[seqlen_index].
    /// Precondition: contains(mbs, seqlen_index) (not checked on this hot path).
    [[nodiscard]] const layer_cost& at(int mbs, std::size_t seqlen_index) const noexcept {
        return cells_[static_cast<std::size_t>(mbs - 1) * seqlens_.size() + seqlen_index];
    }
    /// True when at(mbs, seqlen_index) is a valid cell.
    [[nodiscard]] bool contains(int mbs, std::size_t seqlen_index) const noexcept {
        return mbs >= 1 && mbs <= max_mbs_ && seqlen_index < seqlens_.size();
    }

private:
    layer_query base_{};
    int max_mbs_ = 0;
    std::vector<int> seqlens_;
    std::vector<layer_cost> cells_;
};

/// Evaluates `model` at every mbs in 1..max_mbs and every length in `seqlens_tokens` (the
/// encoder / decoder-only length; `base` fixes component, tp, recomputation and decoder length).
/// Throws invalid_argument when max_mbs < 1 or a length < 1.
template <cost_model M>
[[nodiscard]] cost_table tabulate(const M& model, const layer_query& base, int max_mbs,
                                  std::vector<int> seqlens_tokens) {
    if (max_mbs < 1) throw invalid_argument("tabulate: max_mbs must be >= 1, got " + std::to_string(max_mbs));
    for (int s : seqlens_tokens)
        if (s < 1) throw invalid_argument("tabulate: sequence lengths must be >= 1, got " + std::to_string(s));
    std::vector<layer_cost> cells;
    cells.reserve(static_cast<std::size_t>(max_mbs) * seqlens_tokens.size());
    layer_query q = base;
    for (int mbs = 1; mbs <= max_mbs; ++mbs)
        for (int s : seqlens_tokens) {
            q.mbs = mbs;
            q.seqlen_tokens = s;
            cells.push_back(model.evaluate(q));
        }
    return cost_table(base, max_mbs, std::move(seqlens_tokens), std::move(cells));
}

}  // namespace pipeplan
