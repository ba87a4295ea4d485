// runtime/matrix_product.hpp: the CUDA model's matrix index maps against textbook products.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "pipeplan/core/random.hpp"
#include "pipeplan/runtime/matrix_product.hpp"

using namespace pipeplan;
using namespace pipeplan::runtime;

TEST_CASE("matrix maps of the CUDA model: forward, weight and input gradient equal the textbook products") {
    // The kernel template of runtime/cuda/src/kernels.cu runs product_element() per thread; here
    // the same maps run on the host against products written with explicit (row, column)
    // indexing and transposes. Same products in the same order: equal to the bit.
    splitmix64 rng(11);
    const auto random = [&](std::size_t n) {
        std::vector<double> v(n);
        for (auto& x : v) x = 2.0 * static_cast<double>(rng() >> 11) * 0x1.0p-53 - 1.0;
        return v;
    };
    for (const std::size_t h : {1u, 3u, 8u})
        for (const std::size_t cols : {1u, 5u, 13u}) {
            CAPTURE(h);
            CAPTURE(cols);
            const auto at = [](std::size_t rows, std::size_t r, std::size_t c) { return r + rows * c; };  // column-major
            const std::vector<double> w = random(h * h), x = random(h * cols), delta = random(h * cols);
            // forward: y(i, c) = tanh(Σ_k W(i, k) x(k, c))
            std::vector<double> y(h * cols, -7.0), y_want(h * cols);
            matrix::product_on_host(matrix::forward_map{h, cols}, w.data(), x.data(), y.data());
            for (std::size_t i = 0; i < h; ++i)
                for (std::size_t c = 0; c < cols; ++c) {
                    double z = 0;
                    for (std::size_t k = 0; k < h; ++k) z += w[at(h, i, k)] * x[at(h, k, c)];
                    y_want[at(h, i, c)] = std::tanh(z);
                }
            CHECK(y == y_want);
            // weight gradient: dW(i, j) += Σ_c δ(i, c) x(j, c), accumulated onto what is there
            std::vector<double> dw = random(h * h), dw_want = dw;
            matrix::product_on_host(matrix::weight_grad_map{h, cols}, delta.data(), x.data(), dw.data());
            for (std::size_t i = 0; i < h; ++i)
                for (std::size_t j = 0; j < h; ++j) {
                    double s = 0;
                    for (std::size_t c = 0; c < cols; ++c) s += delta[at(h, i, c)] * x[at(h, j, c)];
                    dw_want[at(h, i, j)] += s;
                }
            CHECK(dw == dw_want);
            // input gradient: dx(j, c) = Σ_i W(i, j) δ(i, c), overwriting what is there
            std::vector<double> dx(h * cols, 5.0), dx_want(h * cols);
            matrix::product_on_host(matrix::input_grad_map{h, cols}, w.data(), delta.data(), dx.data());
            for (std::size_t j = 0; j < h; ++j)
                for (std::size_t c = 0; c < cols; ++c) {
                    double s = 0;
                    for (std::size_t i = 0; i < h; ++i) s += w[at(h, i, j)] * delta[at(h, i, c)];
                    dx_want[at(h, j, c)] = s;
                }
            CHECK(dx == dx_want);
            CHECK(matrix::elements(matrix::weight_grad_map{h, cols}) == h * h);
        }
}
