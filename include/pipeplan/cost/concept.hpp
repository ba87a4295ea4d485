// pipeplan/cost/concept.hpp — the cost_model concept the planning tiers are templated on.
//
// Any type with these two queries is a cost model (profiles, the analytic roofline model, a
// user's own table, a mock in a test):
//   m.evaluate(layer_query)              -> layer_cost   (times in ms, memory in MB)
//   m.parameter_mb(component, tp, mode)  -> estimate<double>  (fp16 weights of one layer, MB)
//   m.is_encoder_decoder()               -> bool
// and, optionally (prepared_cost_model below), m.prepare(q, p) / m.evaluate(p, mbs),
// (row_cost_model) m.evaluate_row(p, first, n, out), and (canonical_cost_model)
// m.canonical_query(q).
#pragma once

#include <concepts>
#include <cstddef>

#include "pipeplan/cost/types.hpp"

namespace pipeplan {

template <class M>
concept cost_model = requires(const M& m, const layer_query& q, component c, int tp, recompute_mode r) {
    { m.evaluate(q) } -> std::convertible_to<layer_cost>;
    { m.parameter_mb(c, tp, r) } -> std::convertible_to<estimate<double>>;
    { m.is_encoder_decoder() } -> std::convertible_to<bool>;
};

/// A cost model that can also price one query at many micro-batch sizes with its lengths
/// looked up once: `m.prepare(q, p)` fills a `M::prepared_query` (q's mbs ignored) and
/// `m.evaluate(p, mbs)` equals `m.evaluate(q)` with q.mbs = mbs, bit for bit. Optional: the
/// exact split uses it where a model has it (profile_cost_model does) and evaluate(q) otherwise.
template <class M>
concept prepared_cost_model = cost_model<M> && requires(const M& m, const layer_query& q, typename M::prepared_query& p,
                                                        const typename M::prepared_query& cp, int mbs) {
    m.prepare(q, p);
    { m.evaluate(cp, mbs) } -> std::convertible_to<layer_cost>;
};

/// A prepared cost model that can also price a row of micro-batch sizes in one call:
/// `m.evaluate_row(p, first, n, out)` sets out[k] = m.evaluate(p, first + k) for k = 0 .. n − 1,
/// bit for bit. Optional: the exact split prices its table rows with it where a model has it
/// (profile_cost_model does) and size by size otherwise.
template <class M>
concept row_cost_model = prepared_cost_model<M> && requires(const M& m, const typename M::prepared_query& cp, int first,
                                                            std::size_t n, layer_cost* out) {
    m.evaluate_row(cp, first, n, out);
};

/// A cost model that says which lengths a query's prices depend on: `m.canonical_query(q)` is
/// q with each length its component's prices do not depend on set to 0 (e.g. a T5 encoder
/// layer's prices do not depend on the decoder length), and two queries with the same
/// canonical query are priced the same, bit for bit. Optional: the exact split prices such a
/// component once per canonical query and micro-batch size where a model has it
/// (profile_cost_model does).
template <class M>
concept canonical_cost_model = cost_model<M> && requires(const M& m, const layer_query& q) {
    { m.canonical_query(q) } -> std::convertible_to<layer_query>;
};

}  // namespace pipeplan
