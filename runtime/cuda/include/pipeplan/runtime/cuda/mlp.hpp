// pipeplan/runtime/cuda/mlp.hpp — a small CUDA model driven by execution plans, for the GPU
// gradient check: `blocks` blocks x → tanh(W_b x) (W_b hidden × hidden, doubles), split over
// virtual stages as the tiny CPU model splits its blocks (cpu::split_layers), and a head with
// loss ½ Σ y² / N over the real tokens of the batch (N of them). Sample `id`'s token t has
// input features sin(0.37 (id + 1) + 0.11 t + 0.05 i), i < hidden. Plans come from
// cpu::plan_tiny with the same hidden size and block count (their buffers fit these tensors).
//
// How it meets the plan (handlers get device pointers and the compute stream):
//  - a store-mode forward stashes the input of each of its stage's blocks in the instruction's
//    stash buffer (block k's input at k · hidden · columns doubles) and writes the stage's
//    output to `out`; the first stage builds its input on the host and copies it in (no input
//    buffer); the last stage computes its micro-batch's loss on the device;
//  - a checkpoint-mode forward keeps only its input (the plan keeps that buffer alive); a
//    recompute refills a stash from it; a backward whose forward checkpointed and was not
//    recomputed rebuilds the block inputs itself, into memory the model holds until the
//    micro-batch's last backward part on that stage;
//  - a backward recomputes each block's output from its block input (scratch memory grown like
//    an arena, never per instruction) and writes the input gradient to `out`; a whole backward
//    adds the weight gradients too, an input-only one keeps every block's δ (held by the model,
//    as the CPU backend holds its caches) for the backward_weight that adds them later;
//  - overlap_f_b has no handler: its forward and backward, which follow it, run in order;
//  - reduce_gradients all-reduces the gradients of the rank's blocks (fp64) over its
//    data-parallel group; optimizer_step applies SGD.
// mlp_reference computes the same loss and gradients sample by sample (unpadded) on one stream.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/runtime/cpu/trainer.hpp"  // split_layers, plan_tokens
#include "pipeplan/runtime/cuda/device_arena.hpp"
#include "pipeplan/runtime/cuda/kernels.hpp"
#include "pipeplan/runtime/executor.hpp"

namespace pipeplan::runtime::cuda {

struct mlp_config {
    std::size_t hidden = 8;
    std::size_t blocks = 4;
    std::uint64_t seed = 1;
};

/// The initial weights: blocks × hidden × hidden, uniform in ±1/√hidden, seeded.
[[nodiscard]] inline std::vector<double> mlp_init(const mlp_config& c) {
    splitmix64 rng(c.seed);
    std::vector<double> w(c.blocks * c.hidden * c.hidden);
    const double a = 1.0 / std::sqrt(static_cast<double>(c.hidden));
    for (auto& x : w) x = a * (2.0 * static_cast<double>(rng() >> 11) * 0x1.0p-53 - 1.0);
    return w;
}

/// The input of `samples` (ids, lengths) padded to `seqlen` tokens: hidden × (samples · seqlen).
[[nodiscard]] inline std::vector<double> mlp_input(const mlp_config& c, const std::vector<std::uint64_t>& ids,
                                                   const std::vector<std::size_t>& lengths, std::size_t seqlen) {
    std::vector<double> x(c.hidden * ids.size() * seqlen, 0.0);
    for (std::size_t s = 0; s < ids.size(); ++s)
        for (std::size_t t = 0; t < lengths[s] && t < seqlen; ++t)
            for (std::size_t i = 0; i < c.hidden; ++i)
                x[i + c.hidden * (s * seqlen + t)] =
                    std::sin(0.37 * double(ids[s] + 1) + 0.11 * double(t) + 0.05 * double(i));
    return x;
}

/// Device memory for `n` doubles in a grow-only arena.
[[nodiscard]] inline double* doubles(device_arena& a, std::size_t n) {
    a.resize(n * sizeof(double));
    return reinterpret_cast<double*>(a.bytes().data());
}

/// What a gradient check compares.
struct mlp_result {
    double loss = 0;
    std::vector<double> grads;  ///< blocks × hidden × hidden
};

/// The loss and gradients of the whole batch, sample by sample without padding, on `s`.
[[nodiscard]] inline mlp_result mlp_reference(const mlp_config& c, const std::vector<double>& weights,
                                              const std::vector<std::size_t>& lengths_tokens, cudaStream_t s) {
    const std::size_t h = c.hidden, hh = h * h;
    double tokens = 0;
    std::size_t longest = 0;
    for (auto l : lengths_tokens) {
        tokens += double(l);
        longest = std::max(longest, l);
    }
    device_arena w_mem, g_mem, act_mem, tmp_mem, len_mem, loss_mem;
    double* w = doubles(w_mem, weights.size());
    double* g = doubles(g_mem, weights.size());
    double* acts = doubles(act_mem, (c.blocks + 1) * h * longest);  // block inputs, then the output
    double* tmp = doubles(tmp_mem, 4 * h * longest);                 // dy, delta, dx ping-pong
    double* loss = doubles(loss_mem, lengths_tokens.size());
    len_mem.resize(lengths_tokens.size() * sizeof(std::uint32_t));
    auto* lens = reinterpret_cast<std::uint32_t*>(len_mem.bytes().data());
    std::vector<std::uint32_t> lens_host(lengths_tokens.begin(), lengths_tokens.end());
    check(cudaMemcpyAsync(w, weights.data(), weights.size() * sizeof(double), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
    check(cudaMemsetAsync(g, 0, weights.size() * sizeof(double), s), "cudaMemsetAsync");
    check(cudaMemcpyAsync(lens, lens_host.data(), lens_host.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync");
    for (std::size_t id = 0; id < lengths_tokens.size(); ++id) {
        const std::size_t cols = lengths_tokens[id];
        const std::vector<double> x0 = mlp_input(c, {id}, {cols}, cols);
        check(cudaMemcpyAsync(acts, x0.data(), x0.size() * sizeof(double), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");  // x0 is a pageable local
        for (std::size_t b = 0; b < c.blocks; ++b)
            kernels::block_forward(w + b * hh, acts + b * h * cols, acts + (b + 1) * h * cols, h, cols, s);
        double *dy = tmp, *delta = tmp + h * cols, *dx = tmp + 2 * h * cols;
        kernels::head(acts + c.blocks * h * cols, dy, loss + id, lens + id, 1, cols, h, 1.0 / tokens, s);
        for (std::size_t b = c.blocks; b-- > 0;) {
            kernels::block_backward(w + b * hh, acts + b * h * cols, acts + (b + 1) * h * cols, dy, delta, g + b * hh,
                                    b > 0 ? dx : nullptr, h, cols, s);
            std::swap(dy, dx);
        }
    }
    mlp_result r;
    r.grads.resize(weights.size());
    std::vector<double> losses(lengths_tokens.size());
    check(cudaMemcpyAsync(r.grads.data(), g, r.grads.size() * sizeof(double), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    check(cudaMemcpyAsync(losses.data(), loss, losses.size() * sizeof(double), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    for (double l : losses) r.loss += l;
    return r;
}

/// One rank of the MLP: its weights and gradients on the device and its handlers.
class mlp_rank {
public:
    mlp_rank(mlp_config c, const std::vector<double>& weights, double lr = 0.1) : c_(c), lr_(lr) {
        if (weights.size() != c.blocks * c.hidden * c.hidden)
            throw invalid_argument("mlp_rank: " + std::to_string(weights.size()) + " weights for " +
                                   std::to_string(c.blocks) + " blocks of " + std::to_string(c.hidden) + "²");
        check(cudaMemcpy(doubles(w_, weights.size()), weights.data(), weights.size() * sizeof(double),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy");
        (void)doubles(g_, weights.size());
    }

    /// Prepares an iteration of `p` on the batch `lengths_tokens` (on the compute stream `s`).
    void begin(const plan::rank_plan& p, const std::vector<std::size_t>& lengths_tokens, cudaStream_t s) {
        plan_ = &p;
        lengths_ = &lengths_tokens;
        tokens_ = cpu::plan_tokens(p.header, lengths_tokens);
        layouts_ = cpu::split_layers(c_.blocks, p.header.virtual_stages());
        held_.clear();
        check(cudaMemsetAsync(g_.bytes().data(), 0, g_.bytes().size(), s), "cudaMemsetAsync");
        (void)doubles(loss_, p.header.microbatches.size());
        check(cudaMemsetAsync(loss_.bytes().data(), 0, loss_.bytes().size(), s), "cudaMemsetAsync");
        // Every micro-batch's sample lengths, at mb_offset_[mb].
        std::vector<std::uint32_t> lens;
        mb_offset_.clear();
        for (const auto& m : p.header.microbatches) {
            mb_offset_.push_back(lens.size());
            for (auto id : m.sample_ids) lens.push_back(static_cast<std::uint32_t>(lengths_tokens.at(id)));
        }
        lens_.resize(std::max<std::size_t>(1, lens.size()) * sizeof(std::uint32_t));
        check(cudaMemcpyAsync(lens_.bytes().data(), lens.data(), lens.size() * sizeof(std::uint32_t),
                              cudaMemcpyHostToDevice, s),
              "cudaMemcpyAsync");
        owned_.clear();
        for (std::size_t v = 0; v < layouts_.size(); ++v)
            if (p.header.device_of_stage(static_cast<std::uint32_t>(v)) == p.header.device_of_rank(p.program.rank))
                owned_.push_back(layouts_[v]);
    }

    [[nodiscard]] handler_registry handlers() {
        using plan::instr_kind;
        handler_registry h;
        h.on(instr_kind::load_microbatch, [](const plan::instruction&, step_context&) {});
        h.on(instr_kind::forward, [this](const plan::instruction& in, step_context& ctx) { forward(in, ctx); });
        h.on(instr_kind::recompute, [this](const plan::instruction& in, step_context& ctx) { recompute(in, ctx); });
        h.on(instr_kind::backward, [this](const plan::instruction& in, step_context& ctx) { backward(in, ctx); });
        h.on(instr_kind::backward_weight,
             [this](const plan::instruction& in, step_context& ctx) { backward_weight(in, ctx); });
        h.on(instr_kind::reduce_gradients, [this](const plan::instruction& in, step_context& ctx) {
            if (in.mode != static_cast<std::uint8_t>(plan::reduce_mode::all_reduce))
                throw error("the CUDA model keeps whole gradients (ZeRO < 2): it all-reduces, never reduce-scatters");
            for (const auto& l : owned_) ctx.all_reduce(owned_grads(l));
        });
        h.on(instr_kind::optimizer_step, [this](const plan::instruction&, step_context& ctx) {
            for (const auto& l : owned_) {
                const typed_buffer g = owned_grads(l);
                kernels::sgd(weights() + l.first_block * c_.hidden * c_.hidden, static_cast<const double*>(g.data), lr_,
                             g.count, stream(ctx));
            }
        });
        return h;
    }

    /// After the step finished: this rank's loss (micro-batches whose head ran here) and gradients.
    [[nodiscard]] mlp_result result() const {
        mlp_result r;
        r.grads.resize(c_.blocks * c_.hidden * c_.hidden);
        std::vector<double> losses(plan_->header.microbatches.size());
        check(cudaMemcpy(r.grads.data(), g_.data(), r.grads.size() * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
        check(cudaMemcpy(losses.data(), loss_.data(), losses.size() * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (double l : losses) r.loss += l;
        return r;
    }
    [[nodiscard]] const std::vector<cpu::stage_layout>& owned() const noexcept { return owned_; }

private:
    static cudaStream_t stream(const step_context& ctx) { return static_cast<cudaStream_t>(ctx.compute_stream()); }
    double* weights() { return reinterpret_cast<double*>(w_.bytes().data()); }
    double* grads() { return reinterpret_cast<double*>(g_.bytes().data()); }
    typed_buffer owned_grads(const cpu::stage_layout& l) {
        const std::size_t hh = c_.hidden * c_.hidden;
        return {grads() + l.first_block * hh, (l.end_block - l.first_block) * hh, plan::dtype::fp64};
    }

    /// The buffer of `slot` as doubles, checked to hold `n` of them.
    static double* tensor(step_context& ctx, std::uint32_t slot, std::size_t n, const char* what) {
        if (slot == plan::no_slot) throw error(std::string("the CUDA model needs a ") + what + " buffer");
        const auto b = ctx.buffer(slot);
        if (b.size() < n * sizeof(double))
            throw error(std::string(what) + " buffer " + std::to_string(slot) + " has " + std::to_string(b.size()) +
                        " bytes, the CUDA model needs " + std::to_string(n * sizeof(double)));
        return reinterpret_cast<double*>(b.data());
    }

    struct geometry {
        std::size_t samples, seqlen, cols, first_block, blocks;
        bool first, last;
    };
    geometry shape_of(const plan::instruction& in) const {
        const auto& m = plan_->header.microbatches.at(in.microbatch);
        const auto& l = layouts_.at(in.stage);
        if (l.end_block == l.first_block)
            throw error("stage " + std::to_string(in.stage) + " holds no block of the CUDA model (" +
                        std::to_string(c_.blocks) + " blocks over " + std::to_string(layouts_.size()) + " stages)");
        return {m.sample_ids.size(), m.shape.seqlen, m.sample_ids.size() * m.shape.seqlen, l.first_block,
                l.end_block - l.first_block, l.embedding, l.head};
    }

    /// What the model holds for a (micro-batch, stage) between its ops, beside the plan's buffers.
    struct held {
        bool stashed = false;  ///< a store-mode forward or a recompute filled the plan's stash
        bool rebuilt = false;  ///< `inputs` holds the block inputs, rebuilt from the checkpoint
        device_arena inputs;   ///< blocks × hidden × columns doubles
        device_arena deltas;   ///< every block's δ, from an input-only backward to its backward_weight
    };
    using held_key = std::pair<std::uint32_t, std::uint32_t>;  ///< (micro-batch, stage)
    static held_key key_of(const plan::instruction& in) { return {in.microbatch, in.stage}; }
    held& held_of(const plan::instruction& in, const char* what) {
        auto it = held_.find(key_of(in));
        if (it == held_.end())
            throw error(std::string(what) + " of micro-batch " + std::to_string(in.microbatch) + " on stage " +
                        std::to_string(in.stage) + " without a forward before it");
        return it->second;
    }

    /// Writes the stage's block inputs to `xs` (block k's at k · n): the stage input (built on
    /// the host for the first stage, else read from `input_slot`), then every block but the last.
    void fill_inputs(const plan::instruction& in, std::uint32_t input_slot, step_context& ctx, const geometry& g,
                     double* xs) {
        const std::size_t n = c_.hidden * g.cols, hh = c_.hidden * c_.hidden;
        const cudaStream_t s = stream(ctx);
        if (g.first) {
            const auto& m = plan_->header.microbatches.at(in.microbatch);
            std::vector<std::uint64_t> ids(m.sample_ids.begin(), m.sample_ids.end());
            std::vector<std::size_t> lens;
            for (auto id : m.sample_ids) lens.push_back(lengths_->at(id));
            const std::vector<double> x0 = mlp_input(c_, ids, lens, g.seqlen);
            // Pageable source: cudaMemcpyAsync returns once the bytes are staged.
            check(cudaMemcpyAsync(xs, x0.data(), n * sizeof(double), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
        } else {
            check(cudaMemcpyAsync(xs, tensor(ctx, input_slot, n, "input"), n * sizeof(double), cudaMemcpyDeviceToDevice,
                                  s),
                  "cudaMemcpyAsync");
        }
        for (std::size_t k = 0; k + 1 < g.blocks; ++k)
            kernels::block_forward(weights() + (g.first_block + k) * hh, xs + k * n, xs + (k + 1) * n, c_.hidden, g.cols,
                                   s);
    }

    void forward(const plan::instruction& in, step_context& ctx) {
        const geometry g = shape_of(in);
        const std::size_t n = c_.hidden * g.cols, hh = c_.hidden * c_.hidden;
        const bool store = in.mode == static_cast<std::uint8_t>(plan::forward_mode::store);
        auto [it, fresh] = held_.try_emplace(key_of(in));
        if (!fresh)
            throw error("a second forward of micro-batch " + std::to_string(in.microbatch) + " on stage " +
                        std::to_string(in.stage));
        it->second.stashed = store;
        // A checkpointing forward runs its blocks in the model's scratch: only its input is kept.
        double* xs = store ? tensor(ctx, in.stash, g.blocks * n, "stash") : doubles(chain_, g.blocks * n);
        fill_inputs(in, in.in, ctx, g, xs);
        double* scratch = doubles(scratch_, 5 * n);
        double* y = g.last ? scratch : tensor(ctx, in.out, n, "output");
        kernels::block_forward(weights() + (g.first_block + g.blocks - 1) * hh, xs + (g.blocks - 1) * n, y, c_.hidden,
                               g.cols, stream(ctx));
        if (g.last) head(in, g, scratch, scratch + n, stream(ctx));
    }

    void recompute(const plan::instruction& in, step_context& ctx) {
        held& h = held_of(in, "a recompute");
        const geometry g = shape_of(in);
        fill_inputs(in, in.in, ctx, g, tensor(ctx, in.stash, g.blocks * c_.hidden * g.cols, "stash"));
        h.stashed = true;
    }

    /// The block inputs a backward part reads: the plan's stash, else the ones rebuilt from the
    /// checkpoint (the forward's input, which the plan hands the backward as its stash).
    const double* block_inputs(const plan::instruction& in, step_context& ctx, const geometry& g, held& h) {
        const std::size_t n = c_.hidden * g.cols;
        if (h.stashed) return tensor(ctx, in.stash, g.blocks * n, "stash");
        if (!h.rebuilt) {
            fill_inputs(in, in.stash, ctx, g, doubles(h.inputs, g.blocks * n));
            h.rebuilt = true;
        }
        return reinterpret_cast<const double*>(h.inputs.bytes().data());
    }

    void head(const plan::instruction& in, const geometry& g, const double* y, double* dy, cudaStream_t s) {
        auto* lens = reinterpret_cast<const std::uint32_t*>(lens_.bytes().data()) + mb_offset_.at(in.microbatch);
        kernels::head(y, dy, reinterpret_cast<double*>(loss_.bytes().data()) + in.microbatch, lens, g.samples, g.seqlen,
                      c_.hidden, 1.0 / tokens_, s);
    }

    void backward(const plan::instruction& in, step_context& ctx) {
        held& h = held_of(in, "a backward");
        const bool whole = in.mode == static_cast<std::uint8_t>(plan::backward_mode::whole);
        const geometry g = shape_of(in);
        const std::size_t n = c_.hidden * g.cols, hh = c_.hidden * c_.hidden;
        const cudaStream_t s = stream(ctx);
        const double* xs = block_inputs(in, ctx, g, h);
        double* scratch = doubles(scratch_, 5 * n);
        double* deltas = whole ? nullptr : doubles(h.deltas, g.blocks * n);
        double *y = scratch, *delta = scratch + n, *dy = scratch + 2 * n, *dx = scratch + 3 * n;
        if (!g.last) dy = tensor(ctx, in.in, n, "gradient");
        for (std::size_t k = g.blocks; k-- > 0;) {
            const double* w = weights() + (g.first_block + k) * hh;
            kernels::block_forward(w, xs + k * n, y, c_.hidden, g.cols, s);  // recompute the output
            if (g.last && k + 1 == g.blocks) head(in, g, y, dy, s);
            double* out = k > 0 ? dx : (g.first ? nullptr : tensor(ctx, in.out, n, "input gradient"));
            kernels::block_backward(w, xs + k * n, y, dy, whole ? delta : deltas + k * n,
                                    whole ? grads() + (g.first_block + k) * hh : nullptr, out, c_.hidden, g.cols, s);
            if (k > 0) {
                dy = dx;
                dx = dx == scratch + 3 * n ? scratch + 4 * n : scratch + 3 * n;
            }
        }
        if (whole) held_.erase(key_of(in));
    }

    void backward_weight(const plan::instruction& in, step_context& ctx) {
        held& h = held_of(in, "a backward_weight");
        if (h.deltas.bytes().empty())
            throw error("a backward_weight of micro-batch " + std::to_string(in.microbatch) + " on stage " +
                        std::to_string(in.stage) + " without an input-only backward before it");
        const geometry g = shape_of(in);
        const std::size_t n = c_.hidden * g.cols, hh = c_.hidden * c_.hidden;
        const double* xs = block_inputs(in, ctx, g, h);
        const auto* deltas = reinterpret_cast<const double*>(h.deltas.bytes().data());
        for (std::size_t k = 0; k < g.blocks; ++k)
            kernels::block_weight_grad(deltas + k * n, xs + k * n, grads() + (g.first_block + k) * hh, c_.hidden, g.cols,
                                       stream(ctx));
        held_.erase(key_of(in));
    }

    mlp_config c_;
    double lr_;
    const plan::rank_plan* plan_ = nullptr;
    const std::vector<std::size_t>* lengths_ = nullptr;
    double tokens_ = 1;
    std::vector<cpu::stage_layout> layouts_, owned_;
    std::vector<std::size_t> mb_offset_;
    device_arena w_, g_, loss_, lens_, scratch_, chain_;
    std::map<held_key, held> held_;
};

}  // namespace pipeplan::runtime::cuda
