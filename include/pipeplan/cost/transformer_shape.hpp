// pipeplan/cost/transformer_shape.hpp — the shape of a transformer and built-in model presets.
//
// Pure data (like hardware.hpp): the analytic cost model derives FLOPs, bytes and memory from a
// `transformer_shape`. Parameter counts follow Megatron-LM's layout (the profiles were measured
// with it): column-parallel QKV / FFN-up, row-parallel output / FFN-down, biases and norm
// weights of row-parallel layers replicated over the tensor-parallel ranks, the vocabulary
// padded to a multiple of 128·tp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"

namespace pipeplan {

/// The FFN's nonlinearity. `swiglu` is gated (two up-projections, LLaMA); the others have one.
enum class ffn_activation : std::uint8_t { gelu = 0, relu = 1, swiglu = 2 };
/// LayerNorm (weight + bias, 2h parameters) or RMSNorm (weight only, h parameters).
enum class norm_kind : std::uint8_t { layernorm = 0, rmsnorm = 1 };

[[nodiscard]] constexpr auto enum_names(ffn_activation) noexcept {
    return name_table<ffn_activation, 3>{
        "FFN activation", {{{ffn_activation::gelu, "gelu"}, {ffn_activation::relu, "relu"}, {ffn_activation::swiglu, "swiglu"}}}};
}
[[nodiscard]] constexpr auto enum_names(norm_kind) noexcept {
    return name_table<norm_kind, 2>{"norm", {{{norm_kind::layernorm, "layernorm"}, {norm_kind::rmsnorm, "rmsnorm"}}}};
}

/// Hyper-parameters of a (decoder-only or encoder-decoder) transformer.
struct transformer_shape {
    std::string_view name;         ///< e.g. "gpt-6.7b" (not owned: must outlive the shape)
    int layers = 0;                ///< decoder-only: layers; encoder-decoder: encoder layers
    int decoder_layers = 0;        ///< encoder-decoder: decoder layers; 0 for decoder-only
    int hidden = 0;                ///< model width h
    int heads = 0;                 ///< attention (query) heads a
    int kv_heads = 0;              ///< key/value heads g (GQA; == heads for multi-head attention)
    int head_dim = 0;              ///< per-head width d (usually h/a; T5-11B: 128 with h = 1024)
    int ffn_hidden = 0;            ///< FFN inner width F
    int vocab = 0;                 ///< vocabulary size before padding
    int max_positions = 0;         ///< learned absolute position embeddings (0: rotary/relative)
    ffn_activation activation = ffn_activation::gelu;
    norm_kind norm = norm_kind::layernorm;
    bool linear_bias = true;       ///< linear layers carry biases
    bool dropout = true;           ///< dropout layers present (their masks are stored)
    bool tied_embeddings = true;   ///< LM head shares the word embedding
    bool encoder_decoder = false;  ///< T5-style model (component::decoder has cross-attention)

    /// Number of FFN up-projections (2 for a gated activation).
    [[nodiscard]] constexpr int ffn_up_projections() const noexcept {
        return activation == ffn_activation::swiglu ? 2 : 1;
    }
    /// Parameters of one norm layer.
    [[nodiscard]] constexpr double norm_params() const noexcept {
        return norm == norm_kind::layernorm ? 2.0 * hidden : 1.0 * hidden;
    }
    /// Vocabulary padded as Megatron-LM pads it: a multiple of 128·tp.
    [[nodiscard]] constexpr double padded_vocab(int tp) const noexcept {
        const long long m = 128LL * tp;
        return static_cast<double>((static_cast<long long>(vocab) + m - 1) / m * m);
    }
};

/// Built-in presets (published configurations):
/// - gpt-6.7b (GPT-3 6.7B; the profiles' GPT model): 32 layers, h 4096, 32 heads, FFN 16384,
///   vocab 50257, 2048 learned positions, GeLU, LayerNorm, biases, dropout, tied embeddings.
/// - t5-11b (the profiles' T5 as Megatron-LM builds it: biases, LayerNorm, GeLU, learned
///   positions up to 8192): 24+24 layers, h 1024, 128 heads of 128, FFN 65536, vocab 32128.
/// - llama-2-7b: 32 layers, h 4096, 32 heads, FFN 11008, vocab 32000.
/// - llama-2-70b: 80 layers, h 8192, 64 heads, 8 KV heads (GQA), FFN 28672, vocab 32000.
/// - llama-3-8b: 32 layers, h 4096, 32 heads, 8 KV heads, FFN 14336, vocab 128256.
/// LLaMA models: SwiGLU, RMSNorm, no biases, no dropout, rotary positions, untied LM head.
inline constexpr std::array<transformer_shape, 5> transformer_presets{{
    {"gpt-6.7b", 32, 0, 4096, 32, 32, 128, 16384, 50257, 2048, ffn_activation::gelu,
     norm_kind::layernorm, true, true, true, false},
    {"t5-11b", 24, 24, 1024, 128, 128, 128, 65536, 32128, 8192, ffn_activation::gelu,
     norm_kind::layernorm, true, true, true, true},
    {"llama-2-7b", 32, 0, 4096, 32, 32, 128, 11008, 32000, 0, ffn_activation::swiglu,
     norm_kind::rmsnorm, false, false, false, false},
    {"llama-2-70b", 80, 0, 8192, 64, 8, 128, 28672, 32000, 0, ffn_activation::swiglu,
     norm_kind::rmsnorm, false, false, false, false},
    {"llama-3-8b", 32, 0, 4096, 32, 8, 128, 14336, 128256, 0, ffn_activation::swiglu,
     norm_kind::rmsnorm, false, false, false, false},
}};

/// The preset names, comma-separated.
[[nodiscard]] inline std::string transformer_preset_names() {
    std::string s;
    for (const auto& p : transformer_presets) {
        if (!s.empty()) s.append(", ");
        s.append(p.name);
    }
    return s;
}

/// The preset called `name`; throws invalid_argument listing the valid names.
[[nodiscard]] inline const transformer_shape& find_transformer_shape(std::string_view name) {
    for (const auto& p : transformer_presets)
        if (p.name == name) return p;
    std::string msg;
    msg.append("unknown model preset '").append(name).append("' (valid: ");
    msg.append(transformer_preset_names()).append(")");
    throw invalid_argument(msg);
}

}  // namespace pipeplan
