// runtime/cuda/src/kernels.cu — the CUDA backend's kernels (see kernels.hpp). Simple,
// deterministic kernels: every output element is produced by one thread summing in a fixed
// order, so runs are bit-reproducible and the gradient check compares like with like.
#include <cstring>
#include <string>

#include "pipeplan/runtime/cuda/check.hpp"
#include "pipeplan/runtime/cuda/kernels.hpp"
#include "pipeplan/runtime/matrix_product.hpp"

namespace pipeplan::runtime::cuda::kernels {
namespace {

constexpr unsigned threads = 256;

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + threads - 1) / threads); }

void launched(const char* what) { check(cudaGetLastError(), what); }

struct member_table {
    const void* p[max_members];
};

template <class T>
__global__ void sum_to_all_kernel(member_table m, unsigned n, std::size_t count) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= count) return;
    T s = static_cast<const T*>(m.p[0])[i];
    for (unsigned k = 1; k < n; ++k) s += static_cast<const T*>(m.p[k])[i];
    for (unsigned k = 0; k < n; ++k) const_cast<T*>(static_cast<const T*>(m.p[k]))[i] = s;
}

template <class T>
__global__ void sum_chunk_kernel(member_table m, unsigned n, std::size_t offset, std::size_t count, T* out) {
    const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= count) return;
    T s = static_cast<const T*>(m.p[0])[offset + i];
    for (unsigned k = 1; k < n; ++k) s += static_cast<const T*>(m.p[k])[offset + i];
    out[i] = s;
}

member_table table_of(const void* const* members, std::size_t n, plan::dtype type) {
    if (n == 0 || n > max_members)
        throw invalid_argument("cuda collective: " + std::to_string(n) + " members (1.." + std::to_string(max_members) + ")");
    if (type != plan::dtype::fp64 && type != plan::dtype::fp32)
        throw invalid_argument("cuda collective: sums fp64 and fp32, not " + std::string(plan::to_string(type)));
    member_table t{};
    for (std::size_t k = 0; k < n; ++k) t.p[k] = members[k];
    return t;
}

/// Every matrix product of the test MLP: one thread per output element (matrix_product.hpp).
template <class Map>
__global__ void product_kernel(Map m, const double* a, const double* b, double* out) {
    const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e < matrix::elements(m)) matrix::product_element(m, a, b, out, e);
}

template <class Map>
void launch_product(const Map& m, const double* a, const double* b, double* out, cudaStream_t s) {
    const std::size_t n = matrix::elements(m);
    if (n > 0) product_kernel<<<blocks_for(n), threads, 0, s>>>(m, a, b, out);
}

__global__ void head_kernel(const double* y, double* dy, double* loss, const std::uint32_t* lengths, std::size_t samples,
                            std::size_t seqlen, std::size_t h, double scale) {
    __shared__ double part[threads];
    double acc = 0;
    const std::size_t n = h * samples * seqlen;
    for (std::size_t e = threadIdx.x; e < n; e += blockDim.x) {
        const std::size_t c = e / h;
        const bool real = c % seqlen < lengths[c / seqlen];
        dy[e] = real ? scale * y[e] : 0.0;
        if (real) acc += y[e] * y[e];
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) loss[0] = 0.5 * scale * part[0];
}

__global__ void delta_kernel(const double* y, const double* dy, double* delta, std::size_t n) {
    const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e < n) delta[e] = dy[e] * (1.0 - y[e] * y[e]);
}

__global__ void sgd_kernel(double* w, const double* g, double lr, std::size_t n) {
    const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e < n) w[e] -= lr * g[e];
}

}  // namespace

void sum_to_all(void* const* members, std::size_t n_members, std::size_t count, plan::dtype type, cudaStream_t s) {
    const member_table t = table_of(members, n_members, type);
    if (count == 0) return;
    if (type == plan::dtype::fp64)
        sum_to_all_kernel<double><<<blocks_for(count), threads, 0, s>>>(t, unsigned(n_members), count);
    else
        sum_to_all_kernel<float><<<blocks_for(count), threads, 0, s>>>(t, unsigned(n_members), count);
    launched("sum_to_all");
}

void sum_chunk(const void* const* members, std::size_t n_members, std::size_t chunk, std::size_t count, void* out,
               plan::dtype type, cudaStream_t s) {
    const member_table t = table_of(members, n_members, type);
    if (count == 0) return;
    if (type == plan::dtype::fp64)
        sum_chunk_kernel<double><<<blocks_for(count), threads, 0, s>>>(t, unsigned(n_members), chunk * count, count,
                                                                      static_cast<double*>(out));
    else
        sum_chunk_kernel<float><<<blocks_for(count), threads, 0, s>>>(t, unsigned(n_members), chunk * count, count,
                                                                     static_cast<float*>(out));
    launched("sum_chunk");
}

void block_forward(const double* w, const double* x, double* y, std::size_t hidden, std::size_t columns, cudaStream_t s) {
    if (hidden * columns == 0) return;
    launch_product(matrix::forward_map{hidden, columns}, w, x, y, s);
    launched("block_forward");
}

void head(const double* y, double* dy, double* loss_out, const std::uint32_t* lengths, std::size_t samples,
          std::size_t seqlen, std::size_t hidden, double scale, cudaStream_t s) {
    head_kernel<<<1, threads, 0, s>>>(y, dy, loss_out, lengths, samples, seqlen, hidden, scale);
    launched("head");
}

void block_backward(const double* w, const double* x, const double* y, const double* dy, double* delta, double* dw,
                    double* dx, std::size_t hidden, std::size_t columns, cudaStream_t s) {
    const std::size_t n = hidden * columns;
    if (n == 0) return;
    delta_kernel<<<blocks_for(n), threads, 0, s>>>(y, dy, delta, n);
    if (dw != nullptr) launch_product(matrix::weight_grad_map{hidden, columns}, delta, x, dw, s);
    if (dx != nullptr) launch_product(matrix::input_grad_map{hidden, columns}, w, delta, dx, s);
    launched("block_backward");
}

void block_weight_grad(const double* delta, const double* x, double* dw, std::size_t hidden, std::size_t columns,
                       cudaStream_t s) {
    if (hidden * columns == 0) return;
    launch_product(matrix::weight_grad_map{hidden, columns}, delta, x, dw, s);
    launched("block_weight_grad");
}

void sgd(double* w, const double* g, double lr, std::size_t n, cudaStream_t s) {
    if (n == 0) return;
    sgd_kernel<<<blocks_for(n), threads, 0, s>>>(w, g, lr, n);
    launched("sgd");
}

}  // namespace pipeplan::runtime::cuda::kernels
