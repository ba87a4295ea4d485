// pipeplan/batching/stage_cost.hpp — what one micro-batch costs the pipeline.
//
// A micro-batch's `t` is the time the bottleneck device spends on its forward and backward
// passes (over all the device's C chunks), `stored` the activation memory a device keeps for it
// until its backward, `peak` the device's peak activation memory while running it. Two
// accounting modes (docs/batching.md):
//
// pipeplan (default) — the real layout: device d runs the chunks k with k mod S = d; its time is
//   the sum over its layers (and embedding / LM head where it holds them) of forward + backward;
//   stored is the sum of stored activations; peak = stored + the largest (peak − stored) of a
//   component it holds (the other layers' activations are held while one layer runs). t, stored
//   and peak are the maxima over devices. Embedding / LM-head fields the model has no data for
//   (status unsupported) are not priced; an out-of-range answer makes the shape unpriceable.
//   Model states: per device, its layers' fp16 parameters plus the embedding (also on the LM-head
//   chunk, which keeps a tied copy), × 16 B/param with ZeRO sharding (cost/model_state.hpp).
//
// dynapipe — the published DynaPipe planner's accounting (`_get_time_and_memory_for_microbatch`
//   in DynaPipe's dynapipe/data_opt/dp_helper.cpp): stage time = L × (fwd + bwd) of one layer +
//   the LM head's fwd + bwd counted on every (decoder) stage; encoder-decoder: the max of the
//   encoder- and decoder-stage times (C = 1) or their sum × C/2 (C > 1); decoder-only with
//   C > 1: C × the stage time (t is per device; DynaPipe's code would halve it). Per-layer
//   stored s = max(encoder, decoder) (C = 1) or (encoder + decoder) × C/2 (C > 1); per-layer
//   peak p = max(encoder peak, decoder peak); stored = L × s, peak = p + (L − 1) × s.
//   Profiles should be read as DynaPipe reads them (profile_mode_for()). Model states:
//   (embedding + L × max(encoder, decoder layer parameters)) × 16 B/param, ZeRO-sharded.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "pipeplan/batching/pipeline_config.hpp"
#include "pipeplan/batching/sample.hpp"
#include "pipeplan/core/estimate.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/model_state.hpp"
#include "pipeplan/cost/profile_grid.hpp"
#include "pipeplan/cost/types.hpp"

namespace pipeplan::batching {

/// The profile interpolation mode an accounting reads profiles with: `dynapipe` accounting
/// always reads them as DynaPipe does (interpolation_mode::dynapipe: maximum of repeats, linear
/// extrapolation below the grid, never-measured cells infeasible — DynaPipe's interpolation is
/// linear, so `linear` and `recommended` requests become it); `pipeplan` accounting uses
/// `requested`.
[[nodiscard]] constexpr interpolation_mode profile_mode_for(accounting_mode accounting,
                                                            interpolation_mode requested) noexcept {
    return accounting == accounting_mode::dynapipe ? interpolation_mode::dynapipe : requested;
}

/// The cost of one micro-batch to the pipeline (see the file comment).
struct microbatch_cost {
    double time_ms = 0;    ///< t: the bottleneck device's forward + backward time
    double stored_mb = 0;  ///< activations a device keeps until the backward (max over devices)
    double peak_mb = 0;    ///< peak activation memory of a device (max over devices)
    friend constexpr bool operator==(const microbatch_cost&, const microbatch_cost&) noexcept = default;
};

/// Prices micro-batch shapes for one model, pipeline configuration and accounting mode.
template <cost_model Model>
class stage_cost_evaluator {
public:
    /// Validates the configuration (invalid_argument) and keeps a reference to `model`.
    stage_cost_evaluator(const Model& model, pipeline_config config, accounting_mode mode)
        : model_(&model), config_(std::move(config)), mode_(mode), enc_dec_(model.is_encoder_decoder()) {
        config_.validate(enc_dec_);
        const auto chunks = config_.layout(enc_dec_);
        devices_.assign(static_cast<std::size_t>(config_.stages), device_load{});
        for (std::size_t k = 0; k < chunks.size(); ++k) {
            auto& d = devices_[static_cast<std::size_t>(config_.device_of_chunk(static_cast<int>(k)))];
            const auto& c = chunks[k];
            d.count[0] += c.encoder_layers;
            d.count[1] += c.decoder_layers;
            d.count[2] += c.embedding ? 1 : 0;
            d.count[3] += c.postprocess ? 1 : 0;
            d.head_copies += (c.postprocess && !c.embedding) ? 1 : 0;
        }
        for (const auto& d : devices_)
            for (std::size_t c = 0; c < 4; ++c) used_[c] = used_[c] || d.count[c] > 0;
        if (mode_ == accounting_mode::dynapipe) {
            used_ = {true, enc_dec_, false, true};
        }
    }

    [[nodiscard]] const pipeline_config& config() const noexcept { return config_; }
    [[nodiscard]] accounting_mode mode() const noexcept { return mode_; }
    [[nodiscard]] bool encoder_decoder() const noexcept { return enc_dec_; }
    [[nodiscard]] const Model& model() const noexcept { return *model_; }

    /// The cost of a micro-batch of padded shape `s` under recomputation `r`; a status other
    /// than ok when the model cannot price it (e.g. beyond the profiled range).
    [[nodiscard]] estimate<microbatch_cost> evaluate(const microbatch_shape& s, recompute_mode r) const {
        std::array<part, 4> p{};
        for (std::size_t c = 0; c < 4; ++c) {
            if (!used_[c]) continue;
            p[c] = price(static_cast<component>(c), s, r);
            if (p[c].status != estimate_status::ok) return estimate<microbatch_cost>::failed(p[c].status);
        }
        microbatch_cost out;
        if (mode_ == accounting_mode::pipeplan) {
            for (const auto& d : devices_) {
                double t = 0, st = 0, excess = 0;
                for (std::size_t c = 0; c < 4; ++c) {
                    if (d.count[c] == 0) continue;
                    t += d.count[c] * p[c].fb_ms;
                    st += d.count[c] * p[c].stored_mb;
                    excess = std::max(excess, p[c].peak_mb - p[c].stored_mb);
                }
                out.time_ms = std::max(out.time_ms, t);
                out.stored_mb = std::max(out.stored_mb, st);
                out.peak_mb = std::max(out.peak_mb, st + excess);
            }
            return out;
        }
        const double L = config_.layers_per_stage;
        const double C = config_.virtual_chunks;
        const part& enc = p[0];
        const part& head = p[3];
        if (!enc_dec_) {
            out.time_ms = C * (L * enc.fb_ms + head.fb_ms);
            out.stored_mb = L * enc.stored_mb;
            out.peak_mb = enc.peak_mb + (L - 1) * enc.stored_mb;
        } else {
            const part& dec = p[1];
            const double enc_t = L * enc.fb_ms;
            const double dec_t = L * dec.fb_ms + head.fb_ms;
            const bool one_chunk = config_.virtual_chunks == 1;
            out.time_ms = one_chunk ? std::max(enc_t, dec_t) : (enc_t + dec_t) * C / 2;
            const double layer_stored_mb =
                one_chunk ? std::max(enc.stored_mb, dec.stored_mb) : (enc.stored_mb + dec.stored_mb) * C / 2;
            out.stored_mb = L * layer_stored_mb;
            out.peak_mb = std::max(enc.peak_mb, dec.peak_mb) + (L - 1) * layer_stored_mb;
        }
        return out;
    }

    /// Model-state memory (MB) of the most loaded device under recomputation `r` (parameters
    /// may depend on it in a profile); unsupported when a layer's parameters are unknown.
    [[nodiscard]] estimate<double> model_state_mb(recompute_mode r) const {
        const auto param = [&](component c, bool required) -> estimate<double> {
            const estimate<double> e = model_->parameter_mb(c, config_.tp, r);
            if (e.ok() || required) return e;
            return 0.0;
        };
        const auto emb = param(component::embedding, false);
        if (!emb.ok()) return emb;
        double fp16_mb = 0;
        if (mode_ == accounting_mode::dynapipe) {
            const auto enc = param(component::encoder, true);
            if (!enc.ok()) return enc;
            double layer = enc.value();
            if (enc_dec_) {
                const auto dec = param(component::decoder, true);
                if (!dec.ok()) return dec;
                layer = std::max(layer, dec.value());
            }
            fp16_mb = emb.value() + config_.layers_per_stage * layer;
        } else {
            for (const auto& d : devices_) {
                double mb = (d.count[2] + d.head_copies) * emb.value();
                for (std::size_t c = 0; c < 2; ++c) {
                    if (d.count[c] == 0) continue;
                    const auto l = param(static_cast<component>(c), true);
                    if (!l.ok()) return l;
                    mb += d.count[c] * l.value();
                }
                fp16_mb = std::max(fp16_mb, mb);
            }
        }
        return model_state_from_fp16_mb(fp16_mb, config_.zero_stage, config_.dp).total_mb;
    }

private:
    struct part {
        double fb_ms = 0, stored_mb = 0, peak_mb = 0;
        estimate_status status = estimate_status::ok;
    };
    struct device_load {
        std::array<int, 4> count{};  // encoder layers, decoder layers, embeddings, heads
        int head_copies = 0;         // LM-head chunks without their own embedding
    };

    [[nodiscard]] part price(component c, const microbatch_shape& s, recompute_mode r) const {
        layer_query q;
        q.comp = c;
        q.mbs = s.mbs;
        q.seqlen_tokens = s.seqlen_tokens;
        q.dec_seqlen_tokens = s.dec_seqlen_tokens;
        q.tp = config_.tp;
        q.recompute = r;
        const layer_cost lc = model_->evaluate(q);
        const bool layer = c == component::encoder || c == component::decoder;
        part out;
        const auto take = [&](const estimate<double>& e, double& into) {
            if (e.ok()) into = e.value();
            else if (layer || e.status() != estimate_status::unsupported)
                out.status = std::max(out.status, e.status());
        };
        double f = 0, b = 0;
        take(lc.forward_ms, f);
        take(lc.backward_ms, b);
        take(lc.stored_mb, out.stored_mb);
        take(lc.peak_mb, out.peak_mb);
        out.fb_ms = f + b;
        if (!lc.peak_mb.ok()) out.peak_mb = out.stored_mb;  // no transient data: no excess
        return out;
    }

    const Model* model_;
    pipeline_config config_;
    accounting_mode mode_;
    bool enc_dec_;
    std::vector<device_load> devices_;
    std::array<bool, 4> used_{};
};

}  // namespace pipeplan::batching
