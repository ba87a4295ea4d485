// pipeplan/partition/transformer.hpp — a transformer as a sequence of priced layers, as a layer
// graph, and Merak-style sharding of it into pipeline stages.
//
// `transformer_layers` prices, for one micro-batch shape, the embedding, every layer (a
// decoder-only model's layers, or T5's encoder then decoder layers; T5's decoder gets its own
// embedding lookup) and the LM head with any cost model. `transformer_layer_graph` turns that
// into a chain graph so PipeDream's optimizer partitions language models with the same code.
//
// Sharding (Merak, HPDL-Group/Merak: Merak/core/pipeline/layers_partition.py) splits the L
// layers into S contiguous non-empty stages; the embedding rides with the first layer (and T5's
// decoder embedding with the first decoder layer), the LM head with the last. Methods:
//   parameters  — Merak's default: min-max of the stages' parameter bytes (exact);
//   layers      — equal layer counts, the remainder to the first stages (pipeplan's uniform
//                 layout when S divides L);
//   time        — exact min-max of the stages' forward + backward time.
// The exact min-max is a dynamic program over (stage, last layer): O(S L²); ties go to the partition whose
// earlier stages end earliest.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/transformer_shape.hpp"
#include "pipeplan/cost/types.hpp"
#include "pipeplan/partition/layer_graph.hpp"

namespace pipeplan::partition {

/// One priced part of a transformer.
struct transformer_part {
    component comp = component::encoder;
    double forward_ms = 0;
    double backward_ms = 0;
    double parameter_bytes = 0;
    double activation_bytes = 0;  ///< the hidden states it outputs (fp16)
    [[nodiscard]] double time_ms() const noexcept { return forward_ms + backward_ms; }
};

/// The priced parts, in pipeline order.
struct transformer_parts {
    std::vector<transformer_part> parts;  ///< embedding, layers (with T5's decoder embedding), head
    int encoder_layers = 0;
    int decoder_layers = 0;
    [[nodiscard]] int layers() const noexcept { return encoder_layers + decoder_layers; }
};

/// Parameters follow pipeplan's stage accounting (batching/stage_cost.hpp): every embedding
/// (T5's decoder one too) and the LM head hold the embedding's parameters (the head a tied copy).
/// Prices `shape`'s parts for the micro-batch of `q` (its mbs, lengths, tp, recomputation; its
/// component is ignored) with `model`. A part the model has no data for (the profiles' embedding
/// time) costs 0 ms; a layer it cannot price throws invalid_argument.
template <cost_model Model>
[[nodiscard]] transformer_parts transformer_layers(const Model& model, const transformer_shape& shape, layer_query q) {
    transformer_parts out;
    out.encoder_layers = shape.layers;
    out.decoder_layers = shape.encoder_decoder ? shape.decoder_layers : 0;
    const auto price = [&](component c, int seqlen_tokens) {
        q.comp = c;
        const layer_cost lc = model.evaluate(q);
        const bool layer = c == component::encoder || c == component::decoder;
        const auto take = [&](const estimate<double>& e, const char* what) {
            if (e.ok()) return e.value();
            if (layer)
                throw invalid_argument("transformer_layers: the cost model cannot price the " +
                                       std::string(to_string(c)) + " " + what + " at mbs " + std::to_string(q.mbs) +
                                       ", seqlen " + std::to_string(q.seqlen_tokens));
            return 0.0;
        };
        transformer_part p;
        p.comp = c;
        p.forward_ms = take(lc.forward_ms, "forward");
        p.backward_ms = take(lc.backward_ms, "backward");
        const auto params = model.parameter_mb(c == component::postprocess ? component::embedding : c, q.tp, q.recompute);
        p.parameter_bytes = params.ok() ? params.value() * 1e6 : 0.0;
        p.activation_bytes = 2.0 * q.mbs * seqlen_tokens * shape.hidden;
        return p;
    };
    const int dec_len = q.dec_seqlen_tokens;
    out.parts.push_back(price(component::embedding, q.seqlen_tokens));
    for (int i = 0; i < out.encoder_layers; ++i) out.parts.push_back(price(component::encoder, q.seqlen_tokens));
    if (out.decoder_layers > 0) {
        out.parts.push_back(price(component::embedding, dec_len));
        for (int i = 0; i < out.decoder_layers; ++i) out.parts.push_back(price(component::decoder, dec_len));
    }
    out.parts.push_back(price(component::postprocess, out.decoder_layers > 0 ? dec_len : q.seqlen_tokens));
    return out;
}

/// The parts as a chain layer graph (ids "embedding", "layer1".., "decoder_embedding", "head").
[[nodiscard]] inline layer_graph transformer_layer_graph(const transformer_parts& t) {
    layer_graph g;
    int layer = 0;
    for (std::size_t i = 0; i < t.parts.size(); ++i) {
        const auto& p = t.parts[i];
        layer_node n;
        if (p.comp == component::embedding) n.id = i == 0 ? "embedding" : "decoder_embedding";
        else if (p.comp == component::postprocess) n.id = "head";
        else n.id = "layer" + std::to_string(++layer);
        n.description = std::string(to_string(p.comp));
        n.forward_ms = p.forward_ms;
        n.backward_ms = p.backward_ms;
        n.activation_parts_bytes = {p.activation_bytes};
        n.parameter_bytes = p.parameter_bytes;
        const auto v = add_layer(g, std::move(n));
        if (v > 0) add_dependency(g, v - 1, v);
    }
    return g;
}

/// How to balance the stages.
enum class shard_method : std::uint8_t { parameters = 0, layers = 1, time = 2 };

[[nodiscard]] constexpr auto enum_names(shard_method) noexcept {
    return name_table<shard_method, 3>{
        "sharding method",
        {{{shard_method::parameters, "parameters"}, {shard_method::layers, "layers"}, {shard_method::time, "time"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(shard_method m) noexcept { return name_of(m); }
/// Parses "parameters", "layers" or "time"; throws invalid_argument listing them otherwise.
[[nodiscard]] inline shard_method parse_shard_method(std::string_view s) { return parse_name<shard_method>(s); }

/// A sharding: layers per stage and what each stage costs.
struct shard_result {
    shard_method method = shard_method::parameters;
    std::vector<int> layers_per_stage;        ///< transformer layers (embedding / head ride along)
    std::vector<double> stage_time_ms;        ///< forward + backward of one micro-batch
    std::vector<double> stage_parameter_bytes;
    [[nodiscard]] double bottleneck_ms() const {
        return stage_time_ms.empty() ? 0.0 : *std::max_element(stage_time_ms.begin(), stage_time_ms.end());
    }
};

namespace detail {

/// Per-layer weights with the embeddings folded into the next layer and the head into the last.
[[nodiscard]] inline std::vector<double> folded(const transformer_parts& t, double (*w)(const transformer_part&)) {
    std::vector<double> out;
    double carry = 0;
    for (const auto& p : t.parts) {
        if (p.comp == component::embedding) carry += w(p);
        else if (p.comp == component::postprocess) out.back() += w(p);
        else {
            out.push_back(w(p) + carry);
            carry = 0;
        }
    }
    return out;
}

/// Exact min-max contiguous partition of `w` into `S` non-empty parts; returns the counts.
[[nodiscard]] inline std::vector<int> min_max_partition(const std::vector<double>& w, int S) {
    const std::size_t L = w.size(), s_count = static_cast<std::size_t>(S);
    std::vector<double> prefix(L + 1, 0);
    for (std::size_t i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + w[i];
    const double inf = std::numeric_limits<double>::infinity();
    // best[s][j]: min over partitions of the first j layers into s parts of the max part.
    std::vector<std::vector<double>> best(s_count + 1, std::vector<double>(L + 1, inf));
    std::vector<std::vector<std::size_t>> cut(s_count + 1, std::vector<std::size_t>(L + 1, 0));
    best[0][0] = 0;
    for (std::size_t s = 1; s <= s_count; ++s)
        for (std::size_t j = s; j + (s_count - s) <= L; ++j)
            for (std::size_t i = s - 1; i < j; ++i) {
                const double v = std::max(best[s - 1][i], prefix[j] - prefix[i]);
                if (v < best[s][j]) {
                    best[s][j] = v;
                    cut[s][j] = i;
                }
            }
    std::vector<int> counts(s_count);
    for (std::size_t s = s_count, j = L; s > 0; --s) {
        const std::size_t i = cut[s][j];
        counts[s - 1] = static_cast<int>(j - i);
        j = i;
    }
    return counts;
}

}  // namespace detail

/// shard_method::layers' counts: `layers` transformer layers over `stages` stages in equal
/// counts, the remainder one each to the first stages (10 over 4: 3, 3, 2, 2). Throws
/// invalid_argument unless 1 <= stages <= layers.
[[nodiscard]] inline std::vector<int> equal_layer_counts(int layers, int stages) {
    if (stages < 1 || stages > layers)
        throw invalid_argument("sharding: " + std::to_string(stages) + " stages is invalid for " + std::to_string(layers) +
                               " layers (need 1 <= stages <= layers)");
    std::vector<int> counts;
    for (int s = 0; s < stages; ++s) counts.push_back(layers / stages + (s < layers % stages ? 1 : 0));
    return counts;
}

/// Shards `t` into `stages` stages by `method`. Throws invalid_argument when stages < 1 or
/// there are fewer layers than stages.
[[nodiscard]] inline shard_result shard_transformer(const transformer_parts& t, int stages, shard_method method) {
    const int L = t.layers();
    const std::vector<int> equal = equal_layer_counts(L, stages);  // checks 1 <= stages <= L
    const auto time = detail::folded(t, [](const transformer_part& p) { return p.time_ms(); });
    const auto params = detail::folded(t, [](const transformer_part& p) { return p.parameter_bytes; });
    shard_result r;
    r.method = method;
    if (method == shard_method::layers) {
        r.layers_per_stage = equal;
    } else {
        r.layers_per_stage = detail::min_max_partition(method == shard_method::time ? time : params, stages);
    }
    std::size_t i = 0;
    for (int n : r.layers_per_stage) {
        double ts = 0, ps = 0;
        for (int k = 0; k < n; ++k, ++i) {
            ts += time[i];
            ps += params[i];
        }
        r.stage_time_ms.push_back(ts);
        r.stage_parameter_bytes.push_back(ps);
    }
    return r;
}

}  // namespace pipeplan::partition
