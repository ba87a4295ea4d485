// pipeplan/cost/types.hpp — the vocabulary of cost queries: components, recomputation modes,
// a layer query and its answer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/estimate.hpp"

namespace pipeplan {

/// The parts of a transformer a cost model prices.
/// `encoder` is a self-attention layer (self-attention + MLP): T5's encoder layer and also a
/// decoder-only model's (GPT's) layer, which has the same shape — the profiles call both
/// "encoder". `decoder` is an encoder-decoder model's decoder layer (self- and cross-attention).
/// `postprocess` is the LM head with the loss.
enum class component : std::uint8_t { encoder = 0, decoder = 1, embedding = 2, postprocess = 3 };
inline constexpr std::array<component, 4> all_components{component::encoder, component::decoder,
                                                         component::embedding, component::postprocess};

/// Activation recomputation (Korthikanti et al. 2022): none, selective (attention core only), full.
enum class recompute_mode : std::uint8_t { none = 0, selective = 1, full = 2 };
inline constexpr std::array<recompute_mode, 3> all_recompute_modes{
    recompute_mode::none, recompute_mode::selective, recompute_mode::full};

[[nodiscard]] constexpr std::string_view to_string(component c) noexcept {
    switch (c) {
        case component::encoder: return "encoder";
        case component::decoder: return "decoder";
        case component::embedding: return "embedding";
        case component::postprocess: return "postprocess";
    }
    return "?";
}
[[nodiscard]] constexpr std::string_view to_string(recompute_mode r) noexcept {
    switch (r) {
        case recompute_mode::none: return "none";
        case recompute_mode::selective: return "selective";
        case recompute_mode::full: return "full";
    }
    return "?";
}

/// Parses a component name; throws invalid_argument listing the valid names.
[[nodiscard]] inline component parse_component(std::string_view s) {
    for (component c : all_components)
        if (to_string(c) == s) return c;
    throw invalid_argument("unknown component '" + std::string(s) +
                           "' (valid: encoder, decoder, embedding, postprocess)");
}
/// Parses a recomputation mode; throws invalid_argument listing the valid names.
[[nodiscard]] inline recompute_mode parse_recompute(std::string_view s) {
    for (recompute_mode r : all_recompute_modes)
        if (to_string(r) == s) return r;
    throw invalid_argument("unknown recompute mode '" + std::string(s) + "' (valid: none, selective, full)");
}

/// One query: a component at micro-batch size `mbs` (sequences), sequence length `seqlen_tokens`
/// (encoder length for encoder-decoder models) and decoder length `dec_seqlen_tokens` (0 for a
/// decoder-only model), under tensor-parallel degree `tp` and a recomputation mode.
struct layer_query {
    component comp = component::encoder;
    int mbs = 1;
    int seqlen_tokens = 0;
    int dec_seqlen_tokens = 0;
    int tp = 1;
    recompute_mode recompute = recompute_mode::none;
};

/// What one layer (or the embedding / LM head) costs for one micro-batch. Each field is an
/// estimate: a model without data for a metric (e.g. no activation profile of the LM head)
/// says so through the status rather than with a zero.
struct layer_cost {
    estimate<double> forward_ms;
    estimate<double> backward_ms;
    estimate<double> stored_mb;  ///< activations kept from the forward until the backward
    estimate<double> peak_mb;    ///< transient peak above memory held before the layer ran
};

}  // namespace pipeplan
