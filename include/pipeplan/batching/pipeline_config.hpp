// pipeplan/batching/pipeline_config.hpp — the pipeline a batch is split for.
//
// S pipeline stages (devices), each holding C virtual chunks (interleaving, Narayanan et al.
// 2021): chunk k of the S·C chunks, in pipeline order, lives on device k mod S. Each chunk holds
// some encoder layers (GPT's layer too) and/or decoder layers, and possibly the embedding and the
// LM head + loss ("postprocess"). `uniform()` builds the usual layout; a caller may give any.
// Also: data- and tensor-parallel degrees, ZeRO stage and device memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"

namespace pipeplan::batching {

/// How micro-batch stage times and memory are derived from layer costs (docs/batching.md).
enum class accounting_mode : std::uint8_t {
    pipeplan = 0,  ///< the real per-device layer assignment; the bottleneck device's time
    dynapipe = 1,  ///< the published DynaPipe planner's accounting, for number-for-number comparison
};

[[nodiscard]] constexpr auto enum_names(accounting_mode) noexcept {
    return name_table<accounting_mode, 2>{
        "accounting mode", {{{accounting_mode::pipeplan, "pipeplan"}, {accounting_mode::dynapipe, "dynapipe"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(accounting_mode m) noexcept { return name_of(m); }
/// Parses "pipeplan" or "dynapipe"; throws invalid_argument otherwise.
[[nodiscard]] inline accounting_mode parse_accounting_mode(std::string_view s) { return parse_name<accounting_mode>(s); }

/// What one virtual chunk (a pipeline stage when C = 1) holds.
struct stage_layout {
    int encoder_layers = 0;    ///< encoder layers (a decoder-only model's layers too)
    int decoder_layers = 0;    ///< encoder-decoder decoder layers
    bool embedding = false;    ///< holds the (input) embedding
    bool postprocess = false;  ///< holds the LM head and the loss
    friend constexpr bool operator==(const stage_layout&, const stage_layout&) noexcept = default;
};

/// The pipeline configuration.
struct pipeline_config {
    int stages = 1;            ///< S: pipeline devices
    int virtual_chunks = 1;    ///< C: chunks per device (interleaved schedule when > 1)
    /// The chunks placed as a V (C = 2: device d holds chunks d and 2S - 1 - d, the V schedules'
    /// placement) instead of interleaved (chunk k on device k mod S).
    bool v_shape = false;
    int layers_per_stage = 1;  ///< layers per chunk (uniform layout; dynapipe accounting)
    /// Explicit layout of the S·C chunks in pipeline order; empty = uniform(...).
    std::vector<stage_layout> chunks;
    int dp = 1;                ///< data-parallel degree
    int tp = 1;                ///< tensor-parallel degree
    int zero_stage = 0;        ///< ZeRO stage 0..3 (model-state sharding over dp)
    double device_memory_mb = 0;  ///< memory of one device (MB)
    friend bool operator==(const pipeline_config&, const pipeline_config&) = default;

    /// The layout used: `chunks` if given, else the uniform one. Decoder-only: every chunk holds
    /// `layers_per_stage` layers, the first the embedding, the last the LM head. Encoder-decoder:
    /// the first half of the chunks hold encoder layers, the second half decoder layers; the
    /// first chunk and the first decoder chunk hold an embedding, the last the LM head.
    [[nodiscard]] std::vector<stage_layout> layout(bool encoder_decoder) const {
        if (!chunks.empty()) return chunks;
        const int n = stages * virtual_chunks;
        std::vector<stage_layout> out(static_cast<std::size_t>(n > 0 ? n : 0));
        for (int k = 0; k < n; ++k) {
            auto& c = out[static_cast<std::size_t>(k)];
            if (!encoder_decoder || k < n / 2) c.encoder_layers = layers_per_stage;
            else c.decoder_layers = layers_per_stage;
            c.embedding = k == 0 || (encoder_decoder && k == n / 2);
            c.postprocess = k == n - 1;
        }
        return out;
    }

    /// Device holding chunk k.
    [[nodiscard]] int device_of_chunk(int k) const noexcept {
        const int r = k % stages;
        return v_shape && (k / stages) % 2 == 1 ? stages - 1 - r : r;
    }

    /// Throws invalid_argument naming the first field outside its domain.
    void validate(bool encoder_decoder) const {
        const auto bad = [](const std::string& field, long long v, const std::string& rule) {
            return invalid_argument("pipeline configuration: " + field + " = " + std::to_string(v) +
                                    " is invalid (" + rule + ")");
        };
        if (stages < 1) throw bad("stages", stages, "must be >= 1");
        if (virtual_chunks < 1) throw bad("virtual_chunks", virtual_chunks, "must be >= 1");
        if (v_shape && virtual_chunks != 2)
            throw bad("virtual_chunks", virtual_chunks, "a V placement (v_shape) has 2 chunks per device");
        if (layers_per_stage < 1) throw bad("layers_per_stage", layers_per_stage, "must be >= 1");
        if (dp < 1) throw bad("dp", dp, "must be >= 1");
        if (tp < 1) throw bad("tp", tp, "must be >= 1");
        if (zero_stage < 0 || zero_stage > 3) throw bad("zero_stage", zero_stage, "valid: 0, 1, 2, 3");
        if (!(device_memory_mb > 0))
            throw invalid_argument("pipeline configuration: device_memory_mb = " +
                                   std::to_string(device_memory_mb) + " is invalid (must be > 0)");
        const long long n = static_cast<long long>(stages) * virtual_chunks;
        if (!chunks.empty()) {
            if (static_cast<long long>(chunks.size()) != n)
                throw bad("chunks.size()", static_cast<long long>(chunks.size()),
                          "must equal stages * virtual_chunks = " + std::to_string(n));
            for (const auto& c : chunks)
                if (c.encoder_layers < 0 || c.decoder_layers < 0)
                    throw invalid_argument("pipeline configuration: negative layer count in a chunk");
        } else if (encoder_decoder && n % 2 != 0) {
            throw bad("stages * virtual_chunks", n,
                      "an encoder-decoder model's uniform layout needs an even number of chunks");
        }
    }
};

/// The layout of chunks holding `layers[k]` layers each, in pipeline order (non-uniform stages,
/// e.g. a time-balanced sharding from partition/transformer.hpp; `split --layers L0,L1,...`).
/// Chunk 0 holds the embedding, the last chunk the LM head. Encoder-decoder: the first
/// `encoder_layers` layers (-1: half of them) are encoder layers, the rest decoder layers (a
/// chunk may hold both), and the chunk holding the first decoder layer also holds the decoder's
/// embedding. Throws invalid_argument for an empty list, a count < 1, or an encoder-decoder
/// split that leaves either side empty.
[[nodiscard]] inline std::vector<stage_layout> layout_from_layer_counts(const std::vector<int>& layers,
                                                                        bool encoder_decoder, int encoder_layers = -1) {
    if (layers.empty()) throw invalid_argument("layers per stage: the list is empty");
    long long total = 0;
    for (std::size_t k = 0; k < layers.size(); ++k) {
        if (layers[k] < 1)
            throw invalid_argument("layers per stage: entry " + std::to_string(k) + " = " + std::to_string(layers[k]) +
                                   " is invalid (must be >= 1)");
        total += layers[k];
    }
    long long enc = encoder_decoder ? (encoder_layers < 0 ? total / 2 : encoder_layers) : total;
    if (encoder_decoder && (enc < 1 || enc >= total))
        throw invalid_argument("layers per stage: " + std::to_string(enc) + " encoder layers of " +
                               std::to_string(total) + " leave the encoder or the decoder empty");
    std::vector<stage_layout> out(layers.size());
    long long first = 0;  // index of the chunk's first layer
    for (std::size_t k = 0; k < layers.size(); ++k) {
        const long long last = first + layers[k];  // one past
        out[k].encoder_layers = static_cast<int>(std::max(0LL, std::min(last, enc) - first));
        out[k].decoder_layers = layers[k] - out[k].encoder_layers;
        out[k].embedding = k == 0 || (encoder_decoder && first <= enc && enc < last && k > 0);
        out[k].postprocess = k + 1 == layers.size();
        first = last;
    }
    return out;
}

/// The V layout of `one_per_device`, a layout of one chunk per device (S chunks, pipeline order):
/// each device's layers in two halves, the first as chunk d (down the V), the second as chunk
/// 2S − 1 − d (back up), with the embeddings, the LM head and the encoder/decoder boundary where
/// layout_from_layer_counts() puts them on the 2S halves. nullopt unless every device holds an
/// even number of layers and `one_per_device` is layout_from_layer_counts()'s layout of its
/// counts (the same encoder layers), i.e. the halves hold what the layout's layers hold.
[[nodiscard]] inline std::optional<std::vector<stage_layout>> v_layout_of(const std::vector<stage_layout>& one_per_device) {
    const std::size_t S = one_per_device.size();
    std::vector<int> counts(S), halves(2 * S);
    int encoder = 0;
    bool decoder = false;
    for (std::size_t d = 0; d < S; ++d) {
        const stage_layout& c = one_per_device[d];
        counts[d] = c.encoder_layers + c.decoder_layers;
        if (counts[d] < 2 || counts[d] % 2 != 0) return std::nullopt;
        halves[d] = halves[2 * S - 1 - d] = counts[d] / 2;
        encoder += c.encoder_layers;
        decoder = decoder || c.decoder_layers > 0;
    }
    try {
        if (layout_from_layer_counts(counts, decoder, encoder) != one_per_device) return std::nullopt;
        return layout_from_layer_counts(halves, decoder, encoder);
    } catch (const invalid_argument&) {
        return std::nullopt;  // e.g. no layers at all
    }
}

}  // namespace pipeplan::batching
