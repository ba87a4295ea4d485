// pipeplan/runtime/matrix_product.hpp — the matrix products of the CUDA test model
// (runtime/cuda/src/kernels.cu: a block's forward, weight gradient and input gradient) as one
// element rule parameterised by an index map. The header is plain C++ that nvcc also compiles
// for the device (the functions are __host__ __device__ there), so the one kernel template in
// kernels.cu and the CPU tests use the same maps.
//
// Matrices are column-major doubles (element (r, c) of an m-row matrix at r + m·c). A map
// gives the output's rows() and columns(), the inner() length, where operand A's (r, k) and
// operand B's (k, c) live (a(r, k), b(k, c)), and how the sum is stored (store(p, s)):
//   out(r, c) ← store(Σ_k A[a(r, k)] · B[b(k, c)]), k ascending,
// one output element per thread and a fixed summation order, so runs are bit-reproducible.
#pragma once

#include <cstddef>

#include <math.h>

#if defined(__CUDACC__)
#define PIPEPLAN_HOST_DEVICE __host__ __device__
#else
#define PIPEPLAN_HOST_DEVICE
#endif

namespace pipeplan::runtime::matrix {

/// y = tanh(W x): W hidden × hidden, x and y hidden × cols.
struct forward_map {
    std::size_t h, cols;
    PIPEPLAN_HOST_DEVICE std::size_t rows() const { return h; }
    PIPEPLAN_HOST_DEVICE std::size_t columns() const { return cols; }
    PIPEPLAN_HOST_DEVICE std::size_t inner() const { return h; }
    PIPEPLAN_HOST_DEVICE std::size_t a(std::size_t r, std::size_t k) const { return r + h * k; }  // W(r, k)
    PIPEPLAN_HOST_DEVICE std::size_t b(std::size_t k, std::size_t c) const { return k + h * c; }  // x(k, c)
    PIPEPLAN_HOST_DEVICE void store(double* p, double s) const { *p = ::tanh(s); }
};

/// dW += δ xᵀ: δ and x hidden × cols, dW hidden × hidden (accumulated over micro-batches).
struct weight_grad_map {
    std::size_t h, cols;
    PIPEPLAN_HOST_DEVICE std::size_t rows() const { return h; }
    PIPEPLAN_HOST_DEVICE std::size_t columns() const { return h; }
    PIPEPLAN_HOST_DEVICE std::size_t inner() const { return cols; }
    PIPEPLAN_HOST_DEVICE std::size_t a(std::size_t r, std::size_t k) const { return r + h * k; }  // δ(r, k)
    PIPEPLAN_HOST_DEVICE std::size_t b(std::size_t k, std::size_t c) const { return c + h * k; }  // xᵀ(k, c) = x(c, k)
    PIPEPLAN_HOST_DEVICE void store(double* p, double s) const { *p += s; }
};

/// dx = Wᵀ δ: W hidden × hidden, δ and dx hidden × cols.
struct input_grad_map {
    std::size_t h, cols;
    PIPEPLAN_HOST_DEVICE std::size_t rows() const { return h; }
    PIPEPLAN_HOST_DEVICE std::size_t columns() const { return cols; }
    PIPEPLAN_HOST_DEVICE std::size_t inner() const { return h; }
    PIPEPLAN_HOST_DEVICE std::size_t a(std::size_t r, std::size_t k) const { return k + h * r; }  // Wᵀ(r, k) = W(k, r)
    PIPEPLAN_HOST_DEVICE std::size_t b(std::size_t k, std::size_t c) const { return k + h * c; }  // δ(k, c)
    PIPEPLAN_HOST_DEVICE void store(double* p, double s) const { *p = s; }
};

/// Number of output elements of `m`.
template <class Map>
PIPEPLAN_HOST_DEVICE std::size_t elements(const Map& m) {
    return m.rows() * m.columns();
}

/// Output element e (= r + rows·c) of the product: stores Σ_k A[a(r, k)] · B[b(k, c)] into out[e].
template <class Map>
PIPEPLAN_HOST_DEVICE void product_element(const Map& m, const double* a, const double* b, double* out, std::size_t e) {
    const std::size_t r = e % m.rows(), c = e / m.rows();
    double s = 0;
    for (std::size_t k = 0; k < m.inner(); ++k) s += a[m.a(r, k)] * b[m.b(k, c)];
    m.store(out + e, s);
}

/// The whole product on the host, element by element as the kernel's threads compute it.
template <class Map>
void product_on_host(const Map& m, const double* a, const double* b, double* out) {
    for (std::size_t e = 0; e < elements(m); ++e) product_element(m, a, b, out, e);
}

}  // namespace pipeplan::runtime::matrix
