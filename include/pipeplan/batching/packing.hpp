// pipeplan/batching/packing.hpp — several short samples in one row of a micro-batch.
//
// A packed row holds samples one after another, separated by `separator_tokens`; its length is
// Σ raw lengths + separator_tokens · (samples − 1) and never exceeds the row's target length
// (the micro-batch's padded length). Two packers: first-fit (used inside the exact split: samples arrive
// longest first, so it is first-fit-decreasing) and sequential (Megatron-style concatenation in
// dataset order, used by the pack-then-fixed-mbs baseline).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/batching/sample.hpp"
#include "pipeplan/core/error.hpp"

namespace pipeplan::batching {

/// Packed rows of each micro-batch of a split and the lengths its rows are padded to (a packed
/// micro-batch keeps this meaning wherever it goes: split results, plan_microbatches, plans).
struct packed_layout {
    /// Per micro-batch: sample ids of each row; empty = one row per sample (not packed).
    std::vector<std::vector<std::vector<int>>> rows;
    std::vector<int> row_tokens;      ///< per micro-batch: the row length (0 / absent = its longest sample)
    std::vector<int> row_dec_tokens;  ///< per micro-batch: the decoder row length (0 / absent = its longest)
};

/// Packing inside the exact split's micro-batches (decoder-only models).
struct packing_options {
    bool enabled = false;      ///< pack where it lowers a micro-batch's cost
    int separator_tokens = 0;  ///< tokens between two samples of a row (>= 0)
};

/// Tokens a row occupies: Σ raw lengths + separators between its samples.
[[nodiscard]] inline long long row_tokens(std::span<const int> row, std::span<const sample_shape> shapes,
                                          int separator_tokens) {
    long long total = 0;
    for (int id : row) total += shapes[static_cast<std::size_t>(id)].raw_tokens;
    if (!row.empty()) total += static_cast<long long>(separator_tokens) * static_cast<long long>(row.size() - 1);
    return total;
}

/// Incremental first-fit packer into rows of `capacity_tokens`.
class first_fit_packer {
public:
    first_fit_packer(int capacity_tokens, int separator_tokens)
        : capacity_(capacity_tokens), sep_(separator_tokens) {
        if (separator_tokens < 0) throw invalid_argument("packing separator tokens must be >= 0");
    }
    /// Places an item of `tokens` in the first row it fits (a new row otherwise); returns the row
    /// index, or -1 when the item is longer than a whole row.
    int add(int tokens) {
        if (tokens > capacity_) return -1;
        for (std::size_t r = 0; r < used_.size(); ++r) {
            if (used_[r] + sep_ + tokens <= capacity_) {
                used_[r] += sep_ + tokens;
                return static_cast<int>(r);
            }
        }
        used_.push_back(tokens);
        return static_cast<int>(used_.size() - 1);
    }
    [[nodiscard]] int rows() const noexcept { return static_cast<int>(used_.size()); }
    void clear() noexcept { used_.clear(); }

private:
    long long capacity_;
    long long sep_;
    std::vector<long long> used_;
};

/// First-fit rows (sample ids) for `ids` in the given order. Throws invalid_argument when a
/// sample is longer than `capacity_tokens`.
[[nodiscard]] inline std::vector<std::vector<int>> pack_first_fit(std::span<const int> ids,
                                                                  std::span<const sample_shape> shapes,
                                                                  int capacity_tokens, int separator_tokens) {
    first_fit_packer p(capacity_tokens, separator_tokens);
    std::vector<std::vector<int>> rows;
    for (int id : ids) {
        const int r = p.add(shapes[static_cast<std::size_t>(id)].raw_tokens);
        if (r < 0)
            throw invalid_argument("sample " + std::to_string(id) + " is longer than the packing row (" +
                                   std::to_string(capacity_tokens) + " tokens)");
        if (static_cast<std::size_t>(r) == rows.size()) rows.emplace_back();
        rows[static_cast<std::size_t>(r)].push_back(id);
    }
    return rows;
}

/// Sequential rows: samples concatenated in the given order, a new row whenever the next one
/// does not fit (encoder-decoder, `dec_capacity_tokens` > 0: a row has an encoder part of
/// `capacity_tokens` and a decoder part of `dec_capacity_tokens`, and a sample must fit both).
/// Throws invalid_argument when a sample is longer than a row.
[[nodiscard]] inline std::vector<std::vector<int>> pack_sequential(std::span<const int> ids,
                                                                   std::span<const sample_shape> shapes,
                                                                   int capacity_tokens, int separator_tokens,
                                                                   int dec_capacity_tokens = 0) {
    if (separator_tokens < 0) throw invalid_argument("packing separator tokens must be >= 0");
    std::vector<std::vector<int>> rows;
    long long used = 0, used_dec = 0;
    for (int id : ids) {
        const auto& sh = shapes[static_cast<std::size_t>(id)];
        const long long len = sh.raw_tokens, dec = dec_capacity_tokens > 0 ? sh.raw_dec_tokens : 0;
        if (len > capacity_tokens || dec > dec_capacity_tokens)
            throw invalid_argument("sample " + std::to_string(id) + " (" + std::to_string(len) +
                                   (dec_capacity_tokens > 0 ? " + " + std::to_string(dec) + " decoder" : std::string()) +
                                   " tokens) is longer than the packing row (" + std::to_string(capacity_tokens) +
                                   (dec_capacity_tokens > 0 ? " + " + std::to_string(dec_capacity_tokens) + " decoder" : std::string()) +
                                   " tokens)");
        const bool full = used + separator_tokens + len > capacity_tokens ||
                          (dec_capacity_tokens > 0 && used_dec + separator_tokens + dec > dec_capacity_tokens);
        if (rows.empty() || full) {
            rows.emplace_back();
            used = len;
            used_dec = dec;
        } else {
            used += separator_tokens + len;
            used_dec += separator_tokens + dec;
        }
        rows.back().push_back(id);
    }
    return rows;
}

}  // namespace pipeplan::batching
