// pipeplan/cost/types.hpp — the vocabulary of cost queries: components, recomputation modes,
// a layer query and its answer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/estimate.hpp"
#include "pipeplan/core/names.hpp"

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

[[nodiscard]] constexpr auto enum_names(component) noexcept {
    return name_table<component, 4>{"component",
                                    {{{component::encoder, "encoder"},
                                      {component::decoder, "decoder"},
                                      {component::embedding, "embedding"},
                                      {component::postprocess, "postprocess"}}}};
}
[[nodiscard]] constexpr auto enum_names(recompute_mode) noexcept {
    return name_table<recompute_mode, 3>{
        "recompute mode",
        {{{recompute_mode::none, "none"}, {recompute_mode::selective, "selective"}, {recompute_mode::full, "full"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(component c) noexcept { return name_of(c); }
[[nodiscard]] constexpr std::string_view to_string(recompute_mode r) noexcept { return name_of(r); }

/// Parses a component name; throws invalid_argument listing the valid names.
[[nodiscard]] inline component parse_component(std::string_view s) { return parse_name<component>(s); }
/// Parses a recomputation mode; throws invalid_argument listing the valid names.
[[nodiscard]] inline recompute_mode parse_recompute(std::string_view s) { return parse_name<recompute_mode>(s); }

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

/// Forward or backward pass (the backward includes recomputation).
enum class time_phase : std::uint8_t { forward = 0, backward = 1 };
inline constexpr std::array<time_phase, 2> all_time_phases{time_phase::forward, time_phase::backward};
[[nodiscard]] constexpr auto enum_names(time_phase) noexcept {
    return name_table<time_phase, 2>{"phase", {{{time_phase::forward, "forward"}, {time_phase::backward, "backward"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(time_phase p) noexcept { return name_of(p); }

/// The activation-memory kinds of a profile's activation table (its `kind` column).
enum class memory_kind : std::uint8_t { stored = 0, peak = 1 };
[[nodiscard]] constexpr auto enum_names(memory_kind) noexcept {
    return name_table<memory_kind, 2>{"kind", {{{memory_kind::stored, "stored"}, {memory_kind::peak, "peak"}}}};
}

/// The four quantities a cost model answers per query (layer_cost's fields, in order): the one
/// metric enum of the cost tier (profiles, calibration, error reports).
enum class cost_metric : std::uint8_t { forward_ms = 0, backward_ms = 1, stored_mb = 2, peak_mb = 3 };
inline constexpr std::array<cost_metric, 4> all_cost_metrics{cost_metric::forward_ms, cost_metric::backward_ms,
                                                             cost_metric::stored_mb, cost_metric::peak_mb};
[[nodiscard]] constexpr auto enum_names(cost_metric) noexcept {
    return name_table<cost_metric, 4>{"metric",
                                      {{{cost_metric::forward_ms, "forward_ms"},
                                        {cost_metric::backward_ms, "backward_ms"},
                                        {cost_metric::stored_mb, "stored_mb"},
                                        {cost_metric::peak_mb, "peak_mb"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(cost_metric m) noexcept { return name_of(m); }
[[nodiscard]] constexpr bool is_time_metric(cost_metric m) noexcept {
    return m == cost_metric::forward_ms || m == cost_metric::backward_ms;
}
/// The field of a layer_cost for a metric.
[[nodiscard]] constexpr const estimate<double>& metric_of(const layer_cost& c, cost_metric m) noexcept {
    switch (m) {
        case cost_metric::forward_ms: return c.forward_ms;
        case cost_metric::backward_ms: return c.backward_ms;
        case cost_metric::stored_mb: return c.stored_mb;
        case cost_metric::peak_mb: break;
    }
    return c.peak_mb;
}


}  // namespace pipeplan
