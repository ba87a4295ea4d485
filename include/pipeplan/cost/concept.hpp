// pipeplan/cost/concept.hpp — the cost_model concept the planning tiers are templated on.
//
// Any type with these two queries is a cost model (profiles, the analytic roofline model, a
// user's own table, a mock in a test):
//   m.evaluate(layer_query)              -> layer_cost   (times in ms, memory in MB)
//   m.parameter_mb(component, tp, mode)  -> estimate<double>  (fp16 weights of one layer, MB)
//   m.is_encoder_decoder()               -> bool
#pragma once

#include <concepts>

#include "pipeplan/cost/types.hpp"

namespace pipeplan {

template <class M>
concept cost_model = requires(const M& m, const layer_query& q, component c, int tp, recompute_mode r) {
    { m.evaluate(q) } -> std::convertible_to<layer_cost>;
    { m.parameter_mb(c, tp, r) } -> std::convertible_to<estimate<double>>;
    { m.is_encoder_decoder() } -> std::convertible_to<bool>;
};

}  // namespace pipeplan
