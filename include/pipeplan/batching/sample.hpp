// pipeplan/batching/sample.hpp — the samples of a global batch and their padded shapes.
//
// A sample has `input_tokens` and `target_tokens`. For a decoder-only model its sequence length
// is their sum; for an encoder-decoder model the encoder length is `input_tokens` and the
// decoder length is `target_tokens` plus the decoder's extra start/end tokens. Lengths are
// truncated at an optional maximum and rounded up to a multiple (default 8); a micro-batch is
// padded to (number of sequences, longest rounded length[, longest rounded decoder length]).
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/batching/errors.hpp"
#include "pipeplan/core/error.hpp"

namespace pipeplan::batching {

/// One training sample of a global batch (token counts as the tokenizer produced them).
struct sample {
    int input_tokens = 0;   ///< prompt / encoder input tokens (>= 0)
    int target_tokens = 0;  ///< target / decoder output tokens (>= 0)
    friend constexpr bool operator==(const sample&, const sample&) noexcept = default;
};

/// How raw token counts become padded sequence lengths.
struct length_rules {
    int round_to_tokens = 8;         ///< lengths are rounded up to a multiple of this (>= 1)
    int max_seqlen_tokens = 0;       ///< truncation of the (encoder / decoder-only) length; 0 = none
    int max_dec_seqlen_tokens = 0;   ///< truncation of the decoder length; 0 = none
    int decoder_extra_tokens = 2;    ///< start/end tokens added to an encoder-decoder's decoder
};

/// A sample's lengths after truncation and rounding.
struct sample_shape {
    int seqlen_tokens = 0;      ///< rounded (encoder or decoder-only) length
    int dec_seqlen_tokens = 0;  ///< rounded decoder length; 0 for a decoder-only model
    int raw_tokens = 0;         ///< truncated, unrounded length (what packing places in a row)
    int raw_dec_tokens = 0;     ///< truncated, unrounded decoder length (incl. extra tokens); 0 decoder-only
    friend constexpr bool operator==(const sample_shape&, const sample_shape&) noexcept = default;
};

/// The padded shape of one micro-batch: `mbs` rows of `seqlen_tokens` (and `dec_seqlen_tokens`).
struct microbatch_shape {
    int mbs = 1;
    int seqlen_tokens = 0;
    int dec_seqlen_tokens = 0;
    friend constexpr auto operator<=>(const microbatch_shape&, const microbatch_shape&) noexcept = default;
};

/// `tokens` rounded up to a multiple of `multiple` (>= 1).
[[nodiscard]] constexpr std::int64_t round_up_tokens(std::int64_t tokens, std::int64_t multiple) noexcept {
    return multiple <= 1 ? tokens : (tokens + multiple - 1) / multiple * multiple;
}

/// The largest sequence length pipeplan accepts at all (2^30 tokens), so sums never overflow.
inline constexpr std::int64_t max_supported_tokens = std::int64_t{1} << 30;

/// Throws invalid_argument when the rules are outside their domain.
inline void validate(const length_rules& r) {
    if (r.round_to_tokens < 1)
        throw invalid_argument("length rounding " + std::to_string(r.round_to_tokens) +
                               " is invalid (must be >= 1)");
    if (r.max_seqlen_tokens < 0 || r.max_dec_seqlen_tokens < 0)
        throw invalid_argument("maximum sequence lengths must be >= 0 (0 = no truncation)");
    if (r.decoder_extra_tokens < 0)
        throw invalid_argument("decoder extra tokens must be >= 0");
}

namespace detail {
[[nodiscard]] inline int clip_and_round(std::int64_t raw, int max_tokens, int round_to, int& raw_out) {
    if (max_tokens > 0 && raw > max_tokens) raw = max_tokens;
    raw_out = static_cast<int>(raw);
    std::int64_t r = round_up_tokens(raw, round_to);
    if (max_tokens > 0 && r > max_tokens) r = max_tokens;
    return static_cast<int>(r);
}
}  // namespace detail

/// The padded shape of every sample (same order). Throws sample_error (an invalid_argument) for a
/// negative token count, an empty sequence, or a length above max_supported_tokens; the message
/// and sample_error::sample() name the 0-based sample id.
[[nodiscard]] inline std::vector<sample_shape> padded_shapes(std::span<const sample> batch,
                                                             const length_rules& rules,
                                                             bool encoder_decoder) {
    validate(rules);
    std::vector<sample_shape> out;
    out.reserve(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
        const sample& s = batch[i];
        const auto bad = [&](const std::string& why) {
            return sample_error(static_cast<long long>(i), "sample " + std::to_string(i) + ": " + why);
        };
        if (s.input_tokens < 0 || s.target_tokens < 0)
            throw bad("token counts must be >= 0 (input_tokens " + std::to_string(s.input_tokens) +
                      ", target_tokens " + std::to_string(s.target_tokens) + ")");
        sample_shape sh;
        int raw = 0;
        if (encoder_decoder) {
            if (s.input_tokens < 1) throw bad("an encoder-decoder sample needs input_tokens >= 1");
            if (s.input_tokens > max_supported_tokens || s.target_tokens > max_supported_tokens)
                throw bad("length exceeds 2^30 tokens");
            sh.seqlen_tokens = detail::clip_and_round(s.input_tokens, rules.max_seqlen_tokens,
                                                      rules.round_to_tokens, raw);
            sh.raw_tokens = raw;
            int raw_dec = 0;
            sh.dec_seqlen_tokens = detail::clip_and_round(
                std::int64_t{s.target_tokens} + rules.decoder_extra_tokens,
                rules.max_dec_seqlen_tokens, rules.round_to_tokens, raw_dec);
            sh.raw_dec_tokens = raw_dec;
            if (sh.dec_seqlen_tokens < 1) throw bad("decoder length is 0 (target_tokens 0 and no extra tokens)");
        } else {
            const std::int64_t len = std::int64_t{s.input_tokens} + s.target_tokens;
            if (len < 1) throw bad("sequence length is 0 (input_tokens + target_tokens)");
            if (len > max_supported_tokens) throw bad("length exceeds 2^30 tokens");
            sh.seqlen_tokens = detail::clip_and_round(len, rules.max_seqlen_tokens,
                                                      rules.round_to_tokens, raw);
            sh.raw_tokens = raw;
        }
        out.push_back(sh);
    }
    return out;
}

/// The padded shape of the micro-batch made of `ids` (indices into `shapes`); packed micro-batches
/// (several samples per row) are shaped by the packing code instead.
[[nodiscard]] inline microbatch_shape shape_of(std::span<const int> ids, std::span<const sample_shape> shapes) {
    microbatch_shape m{static_cast<int>(ids.size()), 0, 0};
    for (int id : ids) {
        const auto& s = shapes[static_cast<std::size_t>(id)];
        m.seqlen_tokens = std::max(m.seqlen_tokens, s.seqlen_tokens);
        m.dec_seqlen_tokens = std::max(m.dec_seqlen_tokens, s.dec_seqlen_tokens);
    }
    return m;
}

}  // namespace pipeplan::batching
