// pipeplan/runtime/cpu/tiny_model.hpp — a small real language model in Eigen (double precision)
// that the CPU backend trains with pipeline plans, and its plain single-thread reference.
//
// The model: a token embedding, `blocks` pre-norm MLP blocks
//     x ← x + W2·tanh(W1·(g ⊙ rmsnorm(x)) + b1) + b2
// and a softmax cross-entropy head (logits = W_out·x + b_out) predicting each token's successor.
// Tensors hold one token per column (hidden × tokens). A micro-batch of n samples is padded to
// its longest sample (padded_tokens = n · padded_len) and masked: padded positions carry token 0
// and contribute nothing to the loss. The loss is the sum of token losses divided by the number
// of real tokens of the whole (global) batch, so micro-batch and data-parallel losses and
// gradients simply add up.
//
// Stages: the blocks are split evenly over the virtual stages (stage_layout); stage 0 also owns
// the embedding, the last stage the head. A stage_module runs one stage's forward (storing its
// activations, or checkpointing only its input), recomputation, input-gradient backward and
// weight-gradient backward on one micro-batch; the whole backward is the two in sequence.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/random.hpp"

namespace pipeplan::runtime::cpu {

using matrix = Eigen::MatrixXd;
using column = Eigen::VectorXd;

/// Sizes of the tiny model and the seed of its parameters and tokens.
struct model_config {
    std::size_t vocab = 32;
    std::size_t hidden = 8;
    std::size_t ffn = 16;
    std::size_t blocks = 4;
    double norm_eps = 1e-6;
    std::uint64_t seed = 1;
};

struct block_params {
    column g;   ///< rmsnorm gain [hidden]
    matrix w1;  ///< [ffn × hidden]
    column b1;  ///< [ffn]
    matrix w2;  ///< [hidden × ffn]
    column b2;  ///< [hidden]
};

/// Every parameter (or gradient, or optimizer moment) of the model, in the same shapes.
struct model_params {
    matrix embed;  ///< [hidden × vocab]: one column per token id
    std::vector<block_params> blocks;
    matrix w_out;  ///< [vocab × hidden]
    column b_out;  ///< [vocab]
};

/// Zero tensors of the model's shapes.
[[nodiscard]] inline model_params zero_params(const model_config& c) {
    model_params p;
    p.embed = matrix::Zero(static_cast<Eigen::Index>(c.hidden), static_cast<Eigen::Index>(c.vocab));
    p.blocks.resize(c.blocks);
    const auto h = static_cast<Eigen::Index>(c.hidden), f = static_cast<Eigen::Index>(c.ffn);
    for (auto& b : p.blocks) {
        b.g = column::Zero(h);
        b.w1 = matrix::Zero(f, h);
        b.b1 = column::Zero(f);
        b.w2 = matrix::Zero(h, f);
        b.b2 = column::Zero(h);
    }
    p.w_out = matrix::Zero(static_cast<Eigen::Index>(c.vocab), h);
    p.b_out = column::Zero(static_cast<Eigen::Index>(c.vocab));
    return p;
}

/// Deterministic initial parameters (seeded by c.seed): uniform weights scaled by 1/√fan-in,
/// gains near 1.
[[nodiscard]] inline model_params init_params(const model_config& c) {
    if (c.vocab < 2 || c.hidden == 0 || c.ffn == 0 || c.blocks == 0)
        throw invalid_argument("tiny model: vocab >= 2, hidden, ffn and blocks >= 1 are needed");
    model_params p = zero_params(c);
    splitmix64 rng(c.seed * 0x2545F4914F6CDD1Dull + 17);
    const auto fill = [&](auto& t, double scale, double offset) {
        for (Eigen::Index i = 0; i < t.size(); ++i)
            t.data()[i] = offset + scale * (2.0 * static_cast<double>(rng() >> 11) / 9007199254740992.0 - 1.0);
    };
    fill(p.embed, 1.0, 0.0);
    const double sh = 1.0 / std::sqrt(static_cast<double>(c.hidden)), sf = 1.0 / std::sqrt(static_cast<double>(c.ffn));
    for (auto& b : p.blocks) {
        fill(b.g, 0.1, 1.0);
        fill(b.w1, sh, 0.0);
        fill(b.b1, 0.1, 0.0);
        fill(b.w2, sf, 0.0);
        fill(b.b2, 0.1, 0.0);
    }
    fill(p.w_out, sh, 0.0);
    fill(p.b_out, 0.1, 0.0);
    return p;
}

/// Which part of the model one virtual stage owns: blocks [first_block, end_block), plus the
/// embedding on stage 0 and the head on the last stage.
struct stage_layout {
    std::size_t first_block = 0;
    std::size_t end_block = 0;
    bool embedding = false;
    bool head = false;
};

/// The blocks split evenly over `stages` virtual stages (the first blocks % stages stages get
/// one more). Throws pipeplan::invalid_argument when there are fewer blocks than stages.
[[nodiscard]] inline std::vector<stage_layout> split_layers(std::size_t blocks, std::size_t stages) {
    if (stages == 0 || blocks < stages)
        throw invalid_argument("tiny model: " + std::to_string(blocks) + " blocks cannot fill " +
                               std::to_string(stages) + " stages (one block per stage at least)");
    std::vector<stage_layout> out(stages);
    std::size_t b = 0;
    for (std::size_t s = 0; s < stages; ++s) {
        const std::size_t n = blocks / stages + (s < blocks % stages ? 1 : 0);
        out[s] = stage_layout{b, b + n, s == 0, s + 1 == stages};
        b += n;
    }
    return out;
}

/// Calls f(t...) for every parameter tensor a stage owns, with the same tensor of each of
/// `p...` (parameters, gradients, optimizer moments: all model_params of one shape), in a fixed
/// order: embedding, blocks (g w1 b1 w2 b2), head (w_out b_out).
template <class F, class... P>
void for_each_tensor(const stage_layout& l, F&& f, P&... p) {
    if (l.embedding) f(p.embed...);
    for (std::size_t b = l.first_block; b < l.end_block; ++b) {
        f(p.blocks[b].g...);
        f(p.blocks[b].w1...);
        f(p.blocks[b].b1...);
        f(p.blocks[b].w2...);
        f(p.blocks[b].b2...);
    }
    if (l.head) {
        f(p.w_out...);
        f(p.b_out...);
    }
}

/// Every tensor of the model (the layout of a single stage that owns everything).
[[nodiscard]] inline stage_layout whole_model(const model_params& p) {
    return stage_layout{0, p.blocks.size(), true, true};
}

/// The token of sample `id` at `position` (deterministic in the seed; never the pad token 0).
[[nodiscard]] inline int sample_token(const model_config& c, std::uint64_t id, std::size_t position) {
    splitmix64 rng((c.seed + 1) * 0x9E3779B97F4A7C15ull ^ (id << 24) ^ static_cast<std::uint64_t>(position));
    return 1 + static_cast<int>(rng.below(c.vocab - 1));
}

/// One micro-batch's inputs, padded: column j = sample j / padded_len, position j % padded_len.
struct microbatch_data {
    std::size_t samples = 0;
    std::size_t padded_len = 0;
    std::vector<int> tokens;     ///< input token per column (0 = pad)
    std::vector<int> targets;    ///< next token per column (0 = pad)
    std::vector<double> mask;    ///< 1 for real positions, 0 for padding
    [[nodiscard]] std::size_t columns() const noexcept { return samples * padded_len; }
};

/// The micro-batch of samples `ids` with sequence lengths `lengths_tokens`, padded to
/// `padded_len` (0 = the longest sample). Throws when a sample is longer than padded_len.
[[nodiscard]] inline microbatch_data make_microbatch(const model_config& c, const std::vector<std::uint64_t>& ids,
                                                     const std::vector<std::size_t>& lengths_tokens,
                                                     std::size_t padded_len = 0) {
    if (ids.size() != lengths_tokens.size() || ids.empty())
        throw invalid_argument("make_microbatch: one length per sample id, and at least one sample");
    std::size_t longest = 0;
    for (auto l : lengths_tokens) longest = std::max(longest, l);
    if (longest == 0) throw invalid_argument("make_microbatch: every sample needs at least one token");
    if (padded_len == 0) padded_len = longest;
    if (longest > padded_len)
        throw invalid_argument("make_microbatch: a sample of " + std::to_string(longest) +
                               " tokens does not fit the padded length " + std::to_string(padded_len));
    microbatch_data m;
    m.samples = ids.size();
    m.padded_len = padded_len;
    m.tokens.assign(m.columns(), 0);
    m.targets.assign(m.columns(), 0);
    m.mask.assign(m.columns(), 0.0);
    for (std::size_t s = 0; s < ids.size(); ++s)
        for (std::size_t p = 0; p < lengths_tokens[s]; ++p) {
            const std::size_t j = s * padded_len + p;
            m.tokens[j] = sample_token(c, ids[s], p);
            m.targets[j] = sample_token(c, ids[s], p + 1);
            m.mask[j] = 1.0;
        }
    return m;
}

/// What a stage keeps of one micro-batch between its forward, backward and weight backward.
struct stage_cache {
    struct block_state {
        matrix n;                 ///< rmsnorm(x) (before the gain)
        Eigen::RowVectorXd inv_r; ///< 1 / rms(x) per column
        matrix y;                 ///< g ⊙ n
        matrix a;                 ///< tanh(W1 y + b1)
        matrix dv, du, dy;        ///< gradients stashed by the input backward for the weight backward
    };
    matrix input;                 ///< the stage input (kept by stored and checkpointed forwards)
    bool stored = false;          ///< full activations present (F or R ran; not only f)
    bool input_grad_done = false; ///< backward (input gradient) ran; backward_weight is due
    std::vector<block_state> blocks;
    matrix head_x, probs;         ///< head input and softmax output (last stage)
    matrix d_logits;              ///< stashed for the head's weight gradient
    matrix d_embed_out;           ///< stashed for the embedding's weight gradient (stage 0)
};

/// One virtual stage of the tiny model over shared parameters and gradient accumulators.
class stage_module {
public:
    stage_module(const model_config& c, const model_params& params, model_params& grads, stage_layout layout)
        : c_(&c), p_(&params), g_(&grads), l_(layout) {}

    [[nodiscard]] const stage_layout& layout() const noexcept { return l_; }

    /// Forward of micro-batch `mb` given the stage input (ignored on stage 0, which embeds the
    /// tokens). Stores the full activations when `store`, else only the input (a checkpoint).
    /// Returns the stage output; on the last stage the returned matrix is empty and `loss`
    /// receives the micro-batch's loss (token losses / loss_tokens).
    matrix forward(const microbatch_data& mb, const matrix& input, stage_cache& cache, bool store, double loss_tokens,
                   double& loss) const {
        cache.input = l_.embedding ? matrix() : input;
        cache.stored = store;
        cache.input_grad_done = false;
        return run_forward(mb, cache, store, loss_tokens, loss);
    }

    /// Recomputes the full activations of a checkpointed forward (no-op when already stored).
    void recompute(const microbatch_data& mb, stage_cache& cache, double loss_tokens) const {
        if (cache.stored) return;
        double ignored = 0;
        run_forward(mb, cache, true, loss_tokens, ignored);
        cache.stored = true;
    }

    /// Input-gradient backward: from the gradient of the stage output (ignored on the last
    /// stage) returns the gradient of the stage input (empty on stage 0), and stashes what the
    /// weight backward needs. Recomputes first when the forward was checkpointed.
    matrix backward_input(const microbatch_data& mb, stage_cache& cache, const matrix& d_output,
                          double loss_tokens) const {
        recompute(mb, cache, loss_tokens);
        matrix dx = l_.head ? head_backward(mb, cache, loss_tokens) : d_output;
        for (std::size_t k = l_.end_block - l_.first_block; k-- > 0;) dx = block_backward(l_.first_block + k, cache.blocks[k], dx);
        cache.input_grad_done = true;
        if (l_.embedding) {
            cache.d_embed_out = std::move(dx);
            return matrix();
        }
        return dx;
    }

    /// Weight-gradient backward: adds this micro-batch's parameter gradients to the
    /// accumulators and releases the cache.
    void backward_weight(const microbatch_data& mb, stage_cache& cache) const {
        if (!cache.input_grad_done) throw error("tiny model: backward_weight before backward on this micro-batch");
        for (std::size_t k = 0; k < cache.blocks.size(); ++k) {
            auto& st = cache.blocks[k];
            auto& gb = g_->blocks[l_.first_block + k];
            gb.w2.noalias() += st.dv * st.a.transpose();
            gb.b2 += st.dv.rowwise().sum();
            gb.w1.noalias() += st.du * st.y.transpose();
            gb.b1 += st.du.rowwise().sum();
            gb.g += st.dy.cwiseProduct(st.n).rowwise().sum();
        }
        if (l_.head) {
            g_->w_out.noalias() += cache.d_logits * cache.head_x.transpose();
            g_->b_out += cache.d_logits.rowwise().sum();
        }
        if (l_.embedding)
            for (std::size_t j = 0; j < mb.columns(); ++j)
                g_->embed.col(mb.tokens[j]) += cache.d_embed_out.col(static_cast<Eigen::Index>(j));
        cache = stage_cache{};
    }

    /// The whole backward: backward_input then backward_weight.
    matrix backward(const microbatch_data& mb, stage_cache& cache, const matrix& d_output, double loss_tokens) const {
        matrix dx = backward_input(mb, cache, d_output, loss_tokens);
        backward_weight(mb, cache);
        return dx;
    }

private:
    matrix run_forward(const microbatch_data& mb, stage_cache& cache, bool store, double loss_tokens, double& loss) const {
        matrix x = l_.embedding ? embed(mb) : cache.input;
        const std::size_t nb = l_.end_block - l_.first_block;
        if (store) cache.blocks.assign(nb, {});
        for (std::size_t k = 0; k < nb; ++k) x = block_forward(l_.first_block + k, x, store ? &cache.blocks[k] : nullptr);
        if (!l_.head) return x;
        matrix probs = softmax(p_->w_out * x, p_->b_out);
        loss = 0;
        for (std::size_t j = 0; j < mb.columns(); ++j)
            if (mb.mask[j] != 0.0) loss -= std::log(probs(mb.targets[j], static_cast<Eigen::Index>(j)));
        loss /= loss_tokens;
        if (store) {
            cache.head_x = std::move(x);
            cache.probs = std::move(probs);
        }
        return matrix();
    }

    [[nodiscard]] matrix embed(const microbatch_data& mb) const {
        matrix x(static_cast<Eigen::Index>(c_->hidden), static_cast<Eigen::Index>(mb.columns()));
        for (std::size_t j = 0; j < mb.columns(); ++j) x.col(static_cast<Eigen::Index>(j)) = p_->embed.col(mb.tokens[j]);
        return x;
    }

    [[nodiscard]] matrix block_forward(std::size_t b, const matrix& x, stage_cache::block_state* st) const {
        const auto& w = p_->blocks[b];
        const double h = static_cast<double>(c_->hidden);
        Eigen::RowVectorXd inv_r = ((x.colwise().squaredNorm() / h).array() + c_->norm_eps).sqrt().inverse().matrix();
        matrix n = x * inv_r.asDiagonal();
        matrix y = w.g.asDiagonal() * n;
        matrix a = ((w.w1 * y).colwise() + w.b1).array().tanh().matrix();
        matrix out = (w.w2 * a).colwise() + w.b2;
        out += x;
        if (st) {
            st->n = std::move(n);
            st->inv_r = std::move(inv_r);
            st->y = std::move(y);
            st->a = std::move(a);
        }
        return out;
    }

    /// d(out) → d(x) of block b; stashes dv, du, dy for the weight gradient.
    [[nodiscard]] matrix block_backward(std::size_t b, stage_cache::block_state& st, const matrix& d_out) const {
        const auto& w = p_->blocks[b];
        st.dv = d_out;
        st.du = (w.w2.transpose() * st.dv).cwiseProduct((1.0 - st.a.array().square()).matrix());
        st.dy = w.w1.transpose() * st.du;
        const matrix dn = w.g.asDiagonal() * st.dy;
        const Eigen::RowVectorXd mean_dn_n = dn.cwiseProduct(st.n).colwise().sum() / static_cast<double>(c_->hidden);
        return d_out + (dn - st.n * mean_dn_n.asDiagonal()) * st.inv_r.asDiagonal();
    }

    /// Gradient of the loss w.r.t. the head input; stashes d_logits.
    [[nodiscard]] matrix head_backward(const microbatch_data& mb, stage_cache& cache, double loss_tokens) const {
        matrix d = cache.probs;
        for (std::size_t j = 0; j < mb.columns(); ++j) {
            const auto jj = static_cast<Eigen::Index>(j);
            if (mb.mask[j] == 0.0) {
                d.col(jj).setZero();
                continue;
            }
            d(mb.targets[j], jj) -= 1.0;
            d.col(jj) /= loss_tokens;
        }
        cache.d_logits = std::move(d);
        return p_->w_out.transpose() * cache.d_logits;
    }

    static matrix softmax(const matrix& logits_no_bias, const column& bias) {
        matrix z = logits_no_bias.colwise() + bias;
        const Eigen::RowVectorXd mx = z.colwise().maxCoeff();
        z = (z.rowwise() - mx).array().exp().matrix();
        const Eigen::RowVectorXd sum = z.colwise().sum();
        return z * sum.cwiseInverse().asDiagonal();
    }

    const model_config* c_;
    const model_params* p_;
    model_params* g_;
    stage_layout l_;
};

}  // namespace pipeplan::runtime::cpu
