// pipeplan/runtime/cuda/kernels.hpp — the device code the CUDA backend needs, as plain host
// functions that enqueue kernels on a stream (defined in runtime/cuda/src/kernels.cu, the only
// file nvcc compiles; everything else is host C++). Matrices are column-major doubles: a
// hidden × columns activation has one column per (sample, token) of a padded micro-batch,
// column = sample · seqlen + token.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "pipeplan/plan/instruction.hpp"

namespace pipeplan::runtime::cuda::kernels {

/// Most members one stream-transport collective sums (a data-parallel group on one GPU).
inline constexpr std::size_t max_members = 32;

/// Every member's `count` elements (fp64 or fp32) become their sum taken in member order (the
/// same bits for every member). Throws device_error on a launch failure, invalid_argument for
/// another dtype or more than max_members members.
void sum_to_all(void* const* members, std::size_t n_members, std::size_t count, plan::dtype type, cudaStream_t s);
/// out = Σ members[k][chunk · count, (chunk+1) · count) in member order (reduce-scatter's chunk).
void sum_chunk(const void* const* members, std::size_t n_members, std::size_t chunk, std::size_t count, void* out,
               plan::dtype type, cudaStream_t s);

// --- the test MLP: block b maps x to tanh(W_b x), W_b hidden × hidden --------------------

/// y = tanh(w · x): x and y hidden × columns.
void block_forward(const double* w, const double* x, double* y, std::size_t hidden, std::size_t columns, cudaStream_t s);
/// The head's loss and gradient of a micro-batch: loss_out[0] = ½ · scale · Σ over real columns
/// (token < lengths[sample]) of Σ y², and dy = scale · y on real columns, 0 on padding.
/// `lengths` is a device array of the micro-batch's sample lengths.
void head(const double* y, double* dy, double* loss_out, const std::uint32_t* lengths, std::size_t samples,
          std::size_t seqlen, std::size_t hidden, double scale, cudaStream_t s);
/// One block's backward from its input x, output y and output gradient dy: dw += δ xᵀ and
/// dx = wᵀ δ, δ = dy ⊙ (1 − y²) (written to `delta`, hidden × columns). A null `dw` skips the
/// weight gradient (a split backward's input part: block_weight_grad adds it later from δ), a
/// null `dx` the input gradient.
void block_backward(const double* w, const double* x, const double* y, const double* dy, double* delta, double* dw,
                    double* dx, std::size_t hidden, std::size_t columns, cudaStream_t s);
/// A split backward's weight part: dw += δ xᵀ (δ and x hidden × columns).
void block_weight_grad(const double* delta, const double* x, double* dw, std::size_t hidden, std::size_t columns,
                       cudaStream_t s);
/// w −= lr · g over n elements.
void sgd(double* w, const double* g, double lr, std::size_t n, cudaStream_t s);

}  // namespace pipeplan::runtime::cuda::kernels
