// pipeplan/runtime/cpu/reference.hpp — the plain single-thread run of one batch of the tiny
// model (every sample alone, unpadded, the whole model on one stage) that pipeline runs are
// compared with, the optimizers both apply, and the comparison itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pipeplan/runtime/cpu/tiny_model.hpp"

namespace pipeplan::runtime::cpu {

/// Loss and parameter gradients of one batch.
struct step_result {
    double loss = 0;
    model_params grads;
};

/// The reference: loss and gradients of the batch (samples `ids` with `lengths_tokens`),
/// each sample run alone without padding; the loss is normalised by the batch's real tokens.
[[nodiscard]] inline step_result reference_step(const model_config& c, const model_params& params,
                                                const std::vector<std::uint64_t>& ids,
                                                const std::vector<std::size_t>& lengths_tokens) {
    if (ids.size() != lengths_tokens.size()) throw invalid_argument("reference_step: one length per sample id");
    double tokens = 0;
    for (auto l : lengths_tokens) tokens += static_cast<double>(l);
    step_result r{0.0, zero_params(c)};
    const stage_module whole(c, params, r.grads, whole_model(params));
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const microbatch_data mb = make_microbatch(c, {ids[i]}, {lengths_tokens[i]});
        stage_cache cache;
        double loss = 0;
        (void)whole.forward(mb, matrix(), cache, true, tokens, loss);
        (void)whole.backward(mb, cache, matrix(), tokens);
        r.loss += loss;
    }
    return r;
}

/// Plain SGD: p ← p − lr·g. step() updates the tensors of `layouts` (a rank's stages).
struct sgd {
    double lr = 0.1;
    void step(model_params& p, const model_params& g, std::span<const stage_layout> layouts) {
        for (const auto& l : layouts) for_each_tensor(l, [&](auto& pt, const auto& gt) { pt -= lr * gt; }, p, g);
    }
};

/// Adam (Kingma & Ba) with bias correction; its moments live per parameter tensor. One
/// step() is one time step for every tensor of `layouts` (a rank's stages).
struct adam {
    double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    model_params m, v;
    std::size_t t = 0;
    void step(model_params& p, const model_params& g, std::span<const stage_layout> layouts) {
        if (m.blocks.size() != p.blocks.size()) {
            m = zero_like(p);
            v = zero_like(p);
        }
        ++t;
        const double c1 = 1.0 - std::pow(beta1, static_cast<double>(t));
        const double c2 = 1.0 - std::pow(beta2, static_cast<double>(t));
        for (const auto& l : layouts)
            for_each_tensor(
                l,
                [&](auto& pt, const auto& gt, auto& mt, auto& vt) {
                    mt = beta1 * mt + (1.0 - beta1) * gt;
                    vt = beta2 * vt + (1.0 - beta2) * gt.cwiseProduct(gt);
                    pt.array() -= lr * (mt.array() / c1) / ((vt.array() / c2).sqrt() + eps);
                },
                p, g, m, v);
    }

private:
    static model_params zero_like(const model_params& p) {
        model_params z = p;
        for_each_tensor(whole_model(p), [](auto& t) { t.setZero(); }, z);
        return z;
    }
};

/// The largest, over the tensors of `l`, of ‖a − b‖ / ‖b‖ (‖a‖ when b is zero).
[[nodiscard]] inline double max_relative_error(const model_params& a, const model_params& b, const stage_layout& l) {
    double worst = 0;
    for_each_tensor(
        l,
        [&](const auto& x, const auto& y) {
            const double num = (x - y).norm(), den = y.norm();
            worst = std::max(worst, den > 0 ? num / den : num);
        },
        a, b);
    return worst;
}

}  // namespace pipeplan::runtime::cpu
