// pipeplan/batching/baselines.hpp — the usual ways of forming micro-batches, for comparison.
//
// Each returns the same split_result as the exact split (same cost accounting, same memory ladder: the
// first rung under which all of its micro-batches fit) and exposes its knob so a caller can
// grid-search it:
//   * split_fixed_mbs:    `mbs` consecutive samples per micro-batch, padded to the longest, in
//                         dataset order or sorted by length;
//   * split_token_budget: samples in sorted order added to a micro-batch while its padded token
//                         count (mbs × longest length, + mbs × longest decoder length) stays
//                         within `tokens_per_mb` (a longer sample forms its own micro-batch);
//   * split_pack_fixed:   Megatron-LM style: samples concatenated in dataset order into rows of
//                         `pack_length_tokens` (separators between), then `mbs` rows per
//                         micro-batch, each row padded to the full length and priced as one
//                         sequence of that length (the profiles' attention spans the whole row,
//                         as Megatron's packed rows without attention-mask resets). Encoder-
//                         decoder: a row has an encoder part and a decoder part (the batch's
//                         longest decoder sample, rounded); a sample fits both.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/batching/ordering.hpp"
#include "pipeplan/batching/packing.hpp"
#include "pipeplan/batching/split_context.hpp"

namespace pipeplan::batching {

/// The order of the fixed-size baseline.
enum class fixed_order : std::uint8_t {
    dataset = 0,  ///< as given
    sorted = 1,   ///< by length descending (encoder-decoder: lexicographic)
};

/// `mbs` consecutive samples per micro-batch (the last may be smaller). Throws invalid_argument
/// for mbs < 1 and split_error when a micro-batch fits under no rung.
template <cost_model Model>
[[nodiscard]] split_result split_fixed_mbs(const Model& model, std::span<const sample> batch,
                                           const pipeline_config& config, int mbs,
                                           fixed_order order = fixed_order::dataset,
                                           const split_options& options = {}) {
    if (mbs < 1) throw invalid_argument("fixed micro-batch size " + std::to_string(mbs) + " is invalid (must be >= 1)");
    const split_context<Model> ctx(model, batch, config, options);
    const bool enc_dec = ctx.evaluator().encoder_decoder();
    const auto ids = order_samples(ctx.shapes(), enc_dec,
                                   order == fixed_order::dataset ? ordering_method::dataset
                                                                 : ordering_method::lexicographic);
    std::vector<std::vector<int>> out;
    for (std::size_t b = 0; b < ids.size(); b += static_cast<std::size_t>(mbs)) {
        const std::size_t e = std::min(ids.size(), b + static_cast<std::size_t>(mbs));
        out.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(b), ids.begin() + static_cast<std::ptrdiff_t>(e));
    }
    return ctx.assemble_first_fitting(order == fixed_order::dataset ? "fixed" : "fixed-sorted", std::move(out));
}

/// Greedy token budget over the sorted order (options.order; `automatic` = sorted /
/// lexicographic). Throws invalid_argument for tokens_per_mb < 1 and split_error when a
/// micro-batch fits under no rung.
template <cost_model Model>
[[nodiscard]] split_result split_token_budget(const Model& model, std::span<const sample> batch,
                                              const pipeline_config& config, long long tokens_per_mb,
                                              const split_options& options = {}) {
    if (tokens_per_mb < 1)
        throw invalid_argument("tokens per micro-batch " + std::to_string(tokens_per_mb) + " is invalid (must be >= 1)");
    const split_context<Model> ctx(model, batch, config, options);
    const bool enc_dec = ctx.evaluator().encoder_decoder();
    const ordering_method om = options.order == ordering_method::automatic
                                   ? (enc_dec ? ordering_method::lexicographic : ordering_method::sorted)
                                   : options.order;
    const auto ids = order_samples(ctx.shapes(), enc_dec, om);
    std::vector<std::vector<int>> out;
    long long e = 0, d = 0;
    for (int id : ids) {
        const auto& s = ctx.shapes()[static_cast<std::size_t>(id)];
        const long long ne = std::max<long long>(e, s.seqlen_tokens), nd = std::max<long long>(d, s.dec_seqlen_tokens);
        const long long m = out.empty() ? 0 : static_cast<long long>(out.back().size());
        if (out.empty() || m == 0 || (m + 1) * (ne + nd) > tokens_per_mb) {
            out.emplace_back();
            e = s.seqlen_tokens;
            d = s.dec_seqlen_tokens;
        } else {
            e = ne;
            d = nd;
        }
        out.back().push_back(id);
    }
    return ctx.assemble_first_fitting("tokens", std::move(out));
}

/// Megatron-LM style packing then a fixed number of rows per micro-batch. `pack_length_tokens`
/// = 0 uses options.lengths.max_seqlen_tokens, or else the longest padded sample; an
/// encoder-decoder row's decoder part is the longest padded decoder sample. Throws invalid_argument (mbs < 1, a sample longer
/// than a row) and split_error when a micro-batch fits under no rung.
template <cost_model Model>
[[nodiscard]] split_result split_pack_fixed(const Model& model, std::span<const sample> batch,
                                            const pipeline_config& config, int mbs, int pack_length_tokens = 0,
                                            int separator_tokens = 0, const split_options& options = {}) {
    if (mbs < 1) throw invalid_argument("fixed micro-batch size " + std::to_string(mbs) + " is invalid (must be >= 1)");
    if (pack_length_tokens < 0) throw invalid_argument("pack length must be >= 0 (0 = automatic)");
    const split_context<Model> ctx(model, batch, config, options);
    const bool enc_dec = ctx.evaluator().encoder_decoder();
    int len = pack_length_tokens, dec_len = 0;
    if (len == 0) len = options.lengths.max_seqlen_tokens;
    if (len == 0)
        for (const auto& s : ctx.shapes()) len = std::max(len, s.seqlen_tokens);
    if (enc_dec)  // the decoder part: the batch's longest (truncated, rounded) decoder sample
        for (const auto& s : ctx.shapes()) dec_len = std::max(dec_len, s.dec_seqlen_tokens);
    std::vector<int> ids(ctx.shapes().size());
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    const auto rows = pack_sequential(ids, ctx.shapes(), len, separator_tokens, dec_len);
    std::vector<std::vector<int>> out;
    packed_layout layout;
    for (std::size_t b = 0; b < rows.size(); b += static_cast<std::size_t>(mbs)) {
        const std::size_t e = std::min(rows.size(), b + static_cast<std::size_t>(mbs));
        std::vector<int> members;
        std::vector<std::vector<int>> rr;
        for (std::size_t k = b; k < e; ++k) {
            members.insert(members.end(), rows[k].begin(), rows[k].end());
            rr.push_back(rows[k]);
        }
        out.push_back(std::move(members));
        layout.rows.push_back(std::move(rr));
        layout.row_tokens.push_back(len);
        layout.row_dec_tokens.push_back(dec_len);
    }
    return ctx.assemble_first_fitting("packing", std::move(out), std::move(layout));
}

}  // namespace pipeplan::batching
