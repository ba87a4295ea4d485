// pipeplan/cost/analytic.hpp — the analytic (roofline) transformer cost model.
//
// The built-in default when no profile exists. From a transformer_shape and hardware_traits it
// prices every component of a layer_query:
//
// Time. Each component is a list of kernels (GEMMs, batched attention GEMMs, elementwise ops,
// tensor-parallel all-reduces) with FLOPs and bytes moved per GPU. A kernel takes its roofline
//     t_k = max(flops_k / (peak_tensor_flops · e_compute), bytes_k / (memory_bandwidth · e_memory))
// a collective takes link_bytes_k / (link_bandwidth · e_link) (ring all-reduce:
// 2·(tp-1)/tp · payload), and a phase costs
//     max(n_kernels · overhead_ms_per_kernel, sum_k t_k)
// The first term is the host-side floor: the framework issues kernels asynchronously at a
// fixed cost each, so small micro-batches take a constant time (the A100 profiles show a flat
// ~1.5 ms per layer below ~2k tokens) and larger ones are GPU-bound. Per-kernel rooflines
// rather than one per layer:
// at small micro-batches the weight-streaming GEMMs and all elementwise ops are memory-bound
// while large GEMMs are compute-bound, and a single max() over the layer hides that.
// FLOPs count matrix multiplications only (tensor-core work, 2 per multiply-add); elementwise
// ops are priced by their bytes. Backward: every GEMM becomes a data-gradient and a
// weight-gradient GEMM (2x forward FLOPs; weight gradients accumulate into fp32 main grads,
// 8 bytes per weight), every elementwise op its backward; recomputation adds forward kernels to
// the backward phase: selective re-runs the attention core (QK^T, softmax, dropout, ·V), full
// re-runs the whole forward. Attention is the unfused (Megatron-LM 2022) implementation.
//
// Memory (bytes, per GPU, fp16 activations; Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", tensor parallelism without sequence parallelism).
// Per attention block with query length q, key length k, a_t = a/tp heads, g_t KV heads, width d:
//     replicated:  norm input 2qbh + attention input 2qbh + dropout mask qbh
//     sharded:     Q 2qb·a_t·d + K,V 4kb·g_t·d + projection input 2qb·a_t·d
//     scores:      b·a_t·q·k·(2 softmax output + 1 dropout mask + 2 dropout output)
// per MLP block (length s, F_t = F/tp, m up-projections):
//     replicated:  norm input 2sbh + MLP input 2sbh + dropout mask sbh
//     sharded:     activation input 2sb·m·F_t + activation output 2sb·F_t
// (masks only when the model has dropout). For GPT's shape this is exactly the paper's
// s·b·h·(10 + 24/t + 5·a·s/(h·t)) (34 + 5as/h at t = 1). A decoder layer is a self-attention
// block (d, d) + a cross-attention block (d, s) + an MLP block (d); the encoder output that feeds
// every decoder layer's cross-attention K/V is shared and not counted per layer.
//   stored (none)      = the sum above
//   stored (selective) = the sum without the scores terms
//   stored (full)      = the layer input only, 2·s·b·h (decoder: 2·d·b·h)
//   working            = rematerialised activations (selective: the scores terms; full: the
//                        whole no-recompute sum) + the largest backward gradient buffer pair
//                        (2 x the attention-score matrix, 2·2·b·a_t·q·k, or 2 x the FFN
//                        intermediate, 2·2·s·b·m·F_t, whichever is larger)
//   peak               = stored + working
// Embedding: stores token ids (8 B each) and its dropout mask; postprocess (final norm, LM head,
// vocab-parallel cross-entropy) stores norm and head inputs (4·n·h) and the fp32 softmax
// (4·n·V_t), working = fp16 logits + their fp32 gradient (6·n·V_t).
//
// Every factor (efficiencies, overhead, memory scales) is a parameter per component and phase
// (time) or per component and recomputation mode (memory), so calibrate.hpp can fit them to a
// profile. MB = 10^6 bytes; times in ms.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/estimate.hpp"
#include "pipeplan/core/names.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/hardware.hpp"
#include "pipeplan/cost/transformer_shape.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan {

/// Time factors of one (component, phase). Defaults: large fp16 GEMMs on A100 reach about
/// 75% of peak tensor throughput and streaming kernels about 80% of HBM bandwidth; NCCL
/// all-reduce about 70% of the NVLink bandwidth; the host issues a kernel every 20 µs (eager
/// PyTorch dispatch; it bounds the time of a phase from below).
struct time_factors {
    double compute_efficiency = 0.75;      ///< fraction of peak_tensor_flops reached (> 0)
    double memory_efficiency = 0.80;       ///< fraction of memory bandwidth reached (> 0)
    double link_efficiency = 0.70;         ///< fraction of link bandwidth reached (> 0)
    double overhead_ms_per_kernel = 0.020; ///< host time to issue one kernel (>= 0)
};

/// Memory factors of one (component, recompute mode). Defaults 1: the formulas as documented.
struct memory_factors {
    double stored_scale = 1.0;        ///< stored_mb = stored_scale · stored formula
    double peak_stored_scale = 1.0;   ///< peak_mb = peak_stored_scale · stored formula
    double peak_working_scale = 1.0;  ///<          + peak_working_scale · working formula
};

/// All factors of an analytic model, indexed by component and phase / recompute mode.
struct analytic_factors {
    std::array<std::array<time_factors, 2>, 4> time{};
    std::array<std::array<memory_factors, 3>, 4> memory{};

    [[nodiscard]] time_factors& at(component c, time_phase p) noexcept {
        return time[static_cast<std::size_t>(c)][static_cast<std::size_t>(p)];
    }
    [[nodiscard]] const time_factors& at(component c, time_phase p) const noexcept {
        return time[static_cast<std::size_t>(c)][static_cast<std::size_t>(p)];
    }
    [[nodiscard]] memory_factors& at(component c, recompute_mode r) noexcept {
        return memory[static_cast<std::size_t>(c)][static_cast<std::size_t>(r)];
    }
    [[nodiscard]] const memory_factors& at(component c, recompute_mode r) const noexcept {
        return memory[static_cast<std::size_t>(c)][static_cast<std::size_t>(r)];
    }
    /// The same time factors everywhere (memory factors default).
    [[nodiscard]] static analytic_factors uniform(const time_factors& t,
                                                  const memory_factors& m = {}) noexcept {
        analytic_factors f;
        for (auto& row : f.time) row.fill(t);
        for (auto& row : f.memory) row.fill(m);
        return f;
    }
};

/// One phase's time split into terms at unit efficiency, for one set of decisions (which
/// kernels are compute- or memory-bound, whether the phase is host-bound):
///   host-bound:  time_ms = kernels · overhead_ms_per_kernel
///   otherwise:   time_ms = compute_ms / e_compute + memory_ms / e_memory + link_ms / e_link
/// compute_ms sums the compute-bound kernels' flops / peak, memory_ms the memory-bound kernels'
/// bytes / bandwidth, link_ms the collectives' bytes / link bandwidth. The decisions are taken
/// under the factors passed to analytic_cost_model::terms(); for fixed decisions the time is
/// linear in (1/e_compute, 1/e_memory, 1/e_link, overhead), which calibrate.hpp exploits.
struct time_terms {
    double compute_ms = 0;
    double memory_ms = 0;
    double link_ms = 0;
    double kernels = 0;       ///< kernels issued (collectives included)
    bool host_bound = false;  ///< issuing the kernels takes longer than running them

    /// The GPU time under `f` (the roofline sum).
    [[nodiscard]] double device_ms(const time_factors& f) const noexcept {
        return compute_ms / f.compute_efficiency + memory_ms / f.memory_efficiency + link_ms / f.link_efficiency;
    }
    /// The host time under `f`.
    [[nodiscard]] double host_ms(const time_factors& f) const noexcept { return kernels * f.overhead_ms_per_kernel; }
    /// The time these terms give under `f`.
    [[nodiscard]] double time_ms(const time_factors& f) const noexcept {
        return host_bound ? host_ms(f) : device_ms(f);
    }
};

/// Activation memory formulas of one query before the memory factors (MB).
struct activation_terms {
    double stored_mb = 0;   ///< activations kept until the backward
    double working_mb = 0;  ///< transient working memory (see the header comment)
};

namespace analytic_detail {

/// One kernel: matrix FLOPs, bytes moved in device memory, bytes over the TP link (a
/// collective when link_bytes > 0).
struct kernel {
    double flops = 0;
    double bytes = 0;
    double link_bytes = 0;
};

/// Per-rank dimensions of a query (all as doubles: products of large ints overflow int).
struct dims {
    double b = 1, h = 0, a_t = 0, g_t = 0, d = 0, f_t = 0, m = 1, v_t = 0, tp = 1;
    bool dropout = true;
};

}  // namespace analytic_detail

/// The analytic roofline cost model (satisfies cost_model). Immutable after construction;
/// evaluate() is thread-safe and allocation-free.
class analytic_cost_model {
public:
    /// A model of `shape` on `hw` with `factors`. Throws invalid_argument when the shape has a
    /// non-positive size, heads not divisible by kv_heads, or a factor is out of domain
    /// (efficiencies must be > 0, possibly +inf; overhead and memory scales finite and >= 0).
    analytic_cost_model(const transformer_shape& shape, const hardware_traits& hw,
                        const analytic_factors& factors = {})
        : shape_(shape), hw_(hw), factors_(factors) {
        if (shape.layers < 1 || shape.hidden < 1 || shape.heads < 1 || shape.kv_heads < 1 ||
            shape.head_dim < 1 || shape.ffn_hidden < 1 || shape.vocab < 1 || shape.max_positions < 0 ||
            (shape.encoder_decoder && shape.decoder_layers < 1) || shape.heads % shape.kv_heads != 0)
            throw invalid_argument("transformer shape '" + std::string(shape.name) +
                                   "' is invalid (sizes must be positive, heads divisible by kv_heads)");
        if (!(hw.peak_tensor_flops > 0) || !(hw.memory_bandwidth_bytes_per_s > 0) ||
            !(hw.link_bandwidth_bytes_per_s > 0) || !std::isfinite(hw.peak_tensor_flops) ||
            !std::isfinite(hw.memory_bandwidth_bytes_per_s) || !std::isfinite(hw.link_bandwidth_bytes_per_s))
            throw invalid_argument("hardware '" + std::string(hw.name) +
                                   "' is invalid (peaks and bandwidths must be positive and finite)");
        for (const auto& row : factors.time)
            for (const auto& t : row)
                if (!(t.compute_efficiency > 0) || !(t.memory_efficiency > 0) || !(t.link_efficiency > 0) ||
                    !(t.overhead_ms_per_kernel >= 0) || !std::isfinite(t.overhead_ms_per_kernel))
                    throw invalid_argument(
                        "analytic time factors are invalid (efficiencies must be > 0, overhead finite >= 0)");
        for (const auto& row : factors.memory)
            for (const auto& m : row)
                if (!(m.stored_scale >= 0) || !(m.peak_stored_scale >= 0) || !(m.peak_working_scale >= 0) ||
                    !std::isfinite(m.stored_scale) || !std::isfinite(m.peak_stored_scale) ||
                    !std::isfinite(m.peak_working_scale))
                    throw invalid_argument("analytic memory factors are invalid (must be finite and >= 0)");
    }

    [[nodiscard]] const transformer_shape& shape() const noexcept { return shape_; }
    [[nodiscard]] const hardware_traits& hardware() const noexcept { return hw_; }
    [[nodiscard]] const analytic_factors& factors() const noexcept { return factors_; }
    /// A copy with other factors (validated as in the constructor).
    [[nodiscard]] analytic_cost_model with_factors(const analytic_factors& f) const {
        return analytic_cost_model(shape_, hw_, f);
    }
    [[nodiscard]] bool is_encoder_decoder() const noexcept { return shape_.encoder_decoder; }

    /// Forward/backward time and stored/peak activation memory of one layer (or the embedding
    /// / LM head) for one micro-batch. Throws invalid_argument for mbs, seqlen or tp < 1 (and a
    /// decoder length < 1 for an encoder-decoder model's decoder or postprocess). All fields
    /// are `unsupported` for component::decoder of a decoder-only model and when tp does not
    /// divide the heads, the FFN width, or (unless tp is a multiple of it) the KV heads.
    [[nodiscard]] layer_cost evaluate(const layer_query& q) const {
        check_query(q);
        if (!supported(q)) return {};
        const auto fwd = terms(q, time_phase::forward);
        const auto bwd = terms(q, time_phase::backward);
        const auto act = activation_raw(q);
        const auto& mf = factors_.at(q.comp, q.recompute);
        layer_cost c;
        c.forward_ms = fwd->time_ms(factors_.at(q.comp, time_phase::forward));
        c.backward_ms = bwd->time_ms(factors_.at(q.comp, time_phase::backward));
        c.stored_mb = mf.stored_scale * act.stored_mb;
        c.peak_mb = mf.peak_stored_scale * act.stored_mb + mf.peak_working_scale * act.working_mb;
        return c;
    }

    /// fp16 parameter memory (MB) of one layer / the embedding / the LM head on one TP rank.
    /// The postprocess component holds the final norm and the LM-head weight (with tied
    /// embeddings: the copy Megatron-LM keeps on the last pipeline stage). Recomputation does
    /// not change it. `unsupported` where evaluate() is; throws invalid_argument for tp < 1.
    [[nodiscard]] estimate<double> parameter_mb(component c, int tp, recompute_mode = recompute_mode::none) const {
        const auto n = parameter_count(c, tp);
        if (!n) return estimate<double>::unsupported();
        return *n * 2.0 / 1.0e6;
    }

    /// Parameters of one component on one TP rank (nullopt where unsupported).
    [[nodiscard]] std::optional<double> parameter_count(component c, int tp) const {
        if (tp < 1) throw invalid_argument("tensor-parallel degree " + std::to_string(tp) + " must be >= 1");
        if (!tp_divides(tp) || (c == component::decoder && !shape_.encoder_decoder)) return std::nullopt;
        const auto x = make_dims(1, tp);
        const double bias = shape_.linear_bias ? 1.0 : 0.0;
        const double attn = x.h * x.a_t * x.d + 2 * x.h * x.g_t * x.d + x.a_t * x.d * x.h +
                            bias * (x.a_t * x.d + 2 * x.g_t * x.d + x.h);
        const double mlp = x.h * x.m * x.f_t + x.f_t * x.h + bias * (x.m * x.f_t + x.h);
        const double norm = shape_.norm_params();
        switch (c) {
            case component::encoder: return attn + mlp + 2 * norm;
            case component::decoder: return 2 * attn + mlp + 3 * norm;
            case component::embedding: return x.v_t * x.h + shape_.max_positions * x.h;
            case component::postprocess: return x.v_t * x.h + norm;
        }
        return std::nullopt;
    }

    /// Matrix FLOPs of one phase on one GPU (backward includes recomputation); nullopt where
    /// unsupported. Throws as evaluate().
    [[nodiscard]] std::optional<double> flops(const layer_query& q, time_phase p) const {
        check_query(q);
        if (!supported(q)) return std::nullopt;
        double total = 0;
        for_each_kernel(q, p, [&](const analytic_detail::kernel& k) { total += k.flops; });
        return total;
    }

    /// The time terms of one phase with roofline decisions taken under `f` (nullopt where
    /// unsupported). time_terms::time_ms(f) of the result is the model's time under `f`.
    [[nodiscard]] std::optional<time_terms> terms(const layer_query& q, time_phase p,
                                                  const time_factors& f) const {
        check_query(q);
        if (!supported(q)) return std::nullopt;
        const double flop_ms = 1e3 / hw_.peak_tensor_flops;
        const double byte_ms = 1e3 / hw_.memory_bandwidth_bytes_per_s;
        const double link_ms = 1e3 / hw_.link_bandwidth_bytes_per_s;
        time_terms t;
        for_each_kernel(q, p, [&](const analytic_detail::kernel& k) {
            t.kernels += 1;
            if (k.link_bytes > 0) {
                t.link_ms += k.link_bytes * link_ms;
                return;
            }
            const double c = k.flops * flop_ms, m = k.bytes * byte_ms;
            if (c / f.compute_efficiency >= m / f.memory_efficiency)
                t.compute_ms += c;
            else
                t.memory_ms += m;
        });
        t.host_bound = t.host_ms(f) > t.device_ms(f);
        return t;
    }
    /// terms() under the model's own factors for (q.comp, p).
    [[nodiscard]] std::optional<time_terms> terms(const layer_query& q, time_phase p) const {
        return terms(q, p, factors_.at(q.comp, p));
    }

    /// The activation-memory formulas (MB) before memory factors. Throws as evaluate();
    /// zeros where unsupported.
    [[nodiscard]] activation_terms activation_raw(const layer_query& q) const {
        check_query(q);
        if (!supported(q)) return {};
        const auto x = make_dims(q.mbs, q.tp);
        const double s = q.seqlen_tokens, dl = q.dec_seqlen_tokens;
        constexpr double mb = 1e-6;
        switch (q.comp) {
            case component::encoder: {
                const auto att = attention_bytes(x, s, s);
                const auto mlp = mlp_bytes(x, s);
                return layer_activation(q.recompute, att.linear + mlp.linear, att.scores,
                                        2 * s * x.b * x.h, std::max(att.grad, mlp.grad), mb);
            }
            case component::decoder: {
                const auto self = attention_bytes(x, dl, dl);
                const auto cross = attention_bytes(x, dl, s);
                const auto mlp = mlp_bytes(x, dl);
                return layer_activation(q.recompute, self.linear + cross.linear + mlp.linear,
                                        self.scores + cross.scores, 2 * dl * x.b * x.h,
                                        std::max({self.grad, cross.grad, mlp.grad}), mb);
            }
            case component::embedding: {
                const double n = x.b * (shape_.encoder_decoder ? s + dl : s);
                return {(8 * n + (x.dropout ? n * x.h : 0)) * mb, 2 * n * x.h * mb};
            }
            case component::postprocess: {
                const double n = x.b * (shape_.encoder_decoder ? dl : s);
                return {(4 * n * x.h + 4 * n * x.v_t) * mb, 6 * n * x.v_t * mb};
            }
        }
        return {};
    }

private:
    struct block_bytes {
        double linear = 0;  ///< terms linear in the sequence length
        double scores = 0;  ///< attention-score terms (dropped by selective recomputation)
        double grad = 0;    ///< largest backward gradient buffer pair of the block
    };

    static void check_query(const layer_query& q) {
        if (q.mbs < 1 || q.seqlen_tokens < 1 || q.tp < 1 || q.dec_seqlen_tokens < 0)
            throw invalid_argument("analytic cost query is invalid: mbs " + std::to_string(q.mbs) +
                                   ", seqlen " + std::to_string(q.seqlen_tokens) + ", dec_seqlen " +
                                   std::to_string(q.dec_seqlen_tokens) + ", tp " + std::to_string(q.tp) +
                                   " (mbs, seqlen and tp must be >= 1, dec_seqlen >= 0)");
    }
    bool needs_decoder_length(const layer_query& q) const noexcept {
        return shape_.encoder_decoder && (q.comp == component::decoder || q.comp == component::postprocess);
    }
    [[nodiscard]] bool tp_divides(int tp) const noexcept {
        return shape_.heads % tp == 0 && shape_.ffn_hidden % tp == 0 &&
               (shape_.kv_heads % tp == 0 || tp % shape_.kv_heads == 0);
    }
    [[nodiscard]] bool supported(const layer_query& q) const {
        if (needs_decoder_length(q) && q.dec_seqlen_tokens < 1)
            throw invalid_argument("analytic cost query for the " + std::string(to_string(q.comp)) +
                                   " of an encoder-decoder model needs dec_seqlen >= 1");
        return tp_divides(q.tp) && (q.comp != component::decoder || shape_.encoder_decoder);
    }

    [[nodiscard]] analytic_detail::dims make_dims(int mbs, int tp) const noexcept {
        analytic_detail::dims x;
        x.b = mbs;
        x.tp = tp;
        x.h = shape_.hidden;
        x.a_t = static_cast<double>(shape_.heads) / tp;
        // KV heads are replicated when tp exceeds them (each rank keeps one).
        x.g_t = shape_.kv_heads >= tp ? static_cast<double>(shape_.kv_heads) / tp : 1.0;
        x.d = shape_.head_dim;
        x.f_t = static_cast<double>(shape_.ffn_hidden) / tp;
        x.m = shape_.ffn_up_projections();
        x.v_t = shape_.padded_vocab(tp) / tp;
        x.dropout = shape_.dropout;
        return x;
    }

    // Activation bytes of an attention block with query length lq and key length lk.
    static block_bytes attention_bytes(const analytic_detail::dims& x, double lq, double lk) noexcept {
        const double mask = x.dropout ? 1.0 : 0.0;
        block_bytes r;
        r.linear = (2 + 2 + mask) * lq * x.b * x.h                 // norm input, attention input, mask
                   + 2 * lq * x.b * x.a_t * x.d                     // Q
                   + 4 * lk * x.b * x.g_t * x.d                     // K, V
                   + 2 * lq * x.b * x.a_t * x.d;                    // output-projection input
        r.scores = (2 + 3 * mask) * x.b * x.a_t * lq * lk;          // softmax out, mask, dropout out
        r.grad = 2 * 2 * x.b * x.a_t * lq * lk;
        return r;
    }
    // Activation bytes of an MLP block over length ls.
    static block_bytes mlp_bytes(const analytic_detail::dims& x, double ls) noexcept {
        const double mask = x.dropout ? 1.0 : 0.0;
        block_bytes r;
        r.linear = (2 + 2 + mask) * ls * x.b * x.h + 2 * ls * x.b * x.m * x.f_t + 2 * ls * x.b * x.f_t;
        r.grad = 2 * 2 * ls * x.b * x.m * x.f_t;
        return r;
    }
    static activation_terms layer_activation(recompute_mode r, double linear, double scores,
                                             double input, double grad, double mb) noexcept {
        switch (r) {
            case recompute_mode::none: return {(linear + scores) * mb, grad * mb};
            case recompute_mode::selective: return {linear * mb, (scores + grad) * mb};
            case recompute_mode::full: return {input * mb, (linear + scores + grad) * mb};
        }
        return {};
    }

    // --- kernels -------------------------------------------------------------------------
    // Calls f(kernel) for every kernel of phase p. `fwd` kernels of a block are emitted by a
    // generator called with a sink; the backward is derived from the same generator.
    enum class op : std::uint8_t { forward, backward, recompute };

    template <class F>
    static void gemm(op o, double M, double K, double N, bool weight, F& f) {
        using analytic_detail::kernel;
        const double fl = 2 * M * K * N;
        const double io = 2 * (M * K + K * N + M * N);
        if (o != op::backward) {
            f(kernel{fl, io, 0});
            return;
        }
        f(kernel{fl, io, 0});  // data gradient (or the first operand's gradient)
        // weight gradient: reads input and output gradient, accumulates into fp32 main grads
        f(kernel{fl, weight ? 2 * (M * K + M * N) + 8 * K * N : io, 0});
    }
    template <class F>
    static void batched_gemm(op o, double B, double M, double K, double N, F& f) {
        const double fl = 2 * B * M * K * N;
        const double io = 2 * B * (M * K + K * N + M * N);
        f(analytic_detail::kernel{fl, io, 0});
        if (o == op::backward) f(analytic_detail::kernel{fl, io, 0});
    }
    template <class F>
    static void elementwise(op o, double n, double fwd_bytes, double bwd_bytes, F& f) {
        f(analytic_detail::kernel{0, n * (o == op::backward ? bwd_bytes : fwd_bytes), 0});
    }
    template <class F>
    static void all_reduce(double tp, double payload_bytes, F& f) {
        if (tp > 1) f(analytic_detail::kernel{0, 0, 2 * (tp - 1) / tp * payload_bytes});
    }

    // An attention block: query length lq, key length lk; cross-attention projects Q from the
    // block input and K/V from the encoder output. `core_only` emits only the attention core.
    template <class F>
    static void attention_block(const analytic_detail::dims& x, op o, double lq, double lk, bool cross,
                                bool core_only, F& f) {
        const double mask = x.dropout ? 1.0 : 0.0;
        const double nq = lq * x.b * x.h;
        if (!core_only) {
            elementwise(o, nq, 4, 6, f);  // norm
            if (cross) {
                gemm(o, lq * x.b, x.h, x.a_t * x.d, true, f);      // Q
                gemm(o, lk * x.b, x.h, 2 * x.g_t * x.d, true, f);  // K, V
            } else {
                gemm(o, lq * x.b, x.h, (x.a_t + 2 * x.g_t) * x.d, true, f);  // QKV
            }
        }
        const double heads = x.b * x.a_t;
        const double scores = heads * lq * lk;
        batched_gemm(o, heads, lq, x.d, lk, f);  // Q K^T
        elementwise(o, scores, 4, 6, f);         // scale, mask, softmax
        if (x.dropout) elementwise(o, scores, 5, 5, f);
        batched_gemm(o, heads, lq, lk, x.d, f);  // probabilities · V
        if (core_only) return;
        gemm(o, lq * x.b, x.a_t * x.d, x.h, true, f);  // output projection
        all_reduce(x.tp, 2 * nq, f);
        elementwise(o, nq, 6 + mask, 4 + mask, f);  // bias, dropout, residual add
    }
    template <class F>
    static void mlp_block(const analytic_detail::dims& x, op o, double ls, bool gated, F& f) {
        const double mask = x.dropout ? 1.0 : 0.0;
        const double n = ls * x.b * x.h;
        elementwise(o, n, 4, 6, f);                                  // norm
        gemm(o, ls * x.b, x.h, x.m * x.f_t, true, f);                // up (and gate)
        elementwise(o, ls * x.b * x.f_t, gated ? 6 : 4, gated ? 10 : 6, f);  // activation
        gemm(o, ls * x.b, x.f_t, x.h, true, f);                      // down
        all_reduce(x.tp, 2 * n, f);
        elementwise(o, n, 6 + mask, 4 + mask, f);                    // bias, dropout, residual add
    }

    template <class F>
    void layer_kernels(const layer_query& q, const analytic_detail::dims& x, op o, bool core_only,
                       F& f) const {
        const double s = q.seqlen_tokens, dl = q.dec_seqlen_tokens;
        const bool gated = shape_.activation == ffn_activation::swiglu;
        if (q.comp == component::encoder) {
            attention_block(x, o, s, s, false, core_only, f);
            if (!core_only) mlp_block(x, o, s, gated, f);
        } else {
            attention_block(x, o, dl, dl, false, core_only, f);
            attention_block(x, o, dl, s, true, core_only, f);
            if (!core_only) mlp_block(x, o, dl, gated, f);
        }
    }

    template <class F>
    void for_each_kernel(const layer_query& q, time_phase p, F&& f) const {
        const auto x = make_dims(q.mbs, q.tp);
        const op o = p == time_phase::forward ? op::forward : op::backward;
        const double s = q.seqlen_tokens, dl = q.dec_seqlen_tokens;
        switch (q.comp) {
            case component::encoder:
            case component::decoder:
                layer_kernels(q, x, o, false, f);
                if (p == time_phase::backward && q.recompute != recompute_mode::none)
                    layer_kernels(q, x, op::recompute, q.recompute == recompute_mode::selective, f);
                return;
            case component::embedding: {
                const double n = x.b * (shape_.encoder_decoder ? s + dl : s) * x.h;
                const double pos = shape_.max_positions > 0 ? 1.0 : 0.0;
                if (o == op::forward) {
                    elementwise(o, n, 4 + 2 * pos, 0, f);  // gather (+ position add)
                    all_reduce(x.tp, 2 * n, f);             // vocab-parallel partial sums
                    if (x.dropout) elementwise(o, n, 5, 5, f);
                } else {
                    if (x.dropout) elementwise(o, n, 5, 5, f);
                    elementwise(o, n, 0, 10 * (1 + pos), f);  // scatter-add into fp32 grads
                }
                return;
            }
            case component::postprocess: {
                const double tokens = x.b * (shape_.encoder_decoder ? dl : s);
                const double logits = tokens * x.v_t;
                elementwise(o, tokens * x.h, 4, 6, f);  // final norm
                gemm(o, tokens, x.h, x.v_t, true, f);   // LM head
                if (o == op::forward) {
                    elementwise(o, logits, 18, 0, f);       // vocab-parallel cross-entropy (fp32)
                    all_reduce(x.tp, 3 * 4 * tokens, f);    // max, sum-exp, target logit
                } else {
                    elementwise(o, logits, 0, 6, f);        // softmax - one-hot, cast to fp16
                    all_reduce(x.tp, 2 * tokens * x.h, f);  // input gradient of the column-parallel head
                }
                return;
            }
        }
    }

    transformer_shape shape_;
    hardware_traits hw_;
    analytic_factors factors_;
};

static_assert(cost_model<analytic_cost_model>);

/// The analytic model of a preset on a hardware preset with default factors. Throws
/// invalid_argument listing the valid names when either is unknown.
[[nodiscard]] inline analytic_cost_model make_analytic_model(std::string_view model_preset,
                                                             std::string_view hardware_preset = "a100-40gb") {
    const auto& shape = find_transformer_shape(model_preset);
    const auto& hw = find_hardware(hardware_preset);
    return analytic_cost_model(shape, hw);
}

}  // namespace pipeplan
