// Shared fixtures of the runtime tier's tests: the tiny CPU model's test configurations and the
// sample ids of a whole batch (model.cpp, training.cpp, streams.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "pipeplan/runtime/cpu/tiny_model.hpp"

namespace pipeplan::test {

/// A model small enough for central finite differences over every parameter (3 blocks).
inline runtime::cpu::model_config gradient_check_model() {
    return {.vocab = 11, .hidden = 5, .ffn = 7, .blocks = 3, .seed = 42};
}

/// The model the pipeline tests train: 16 blocks, enough for S = 8 with 2 chunks.
inline runtime::cpu::model_config pipeline_test_model() {
    return {.vocab = 16, .hidden = 6, .ffn = 8, .blocks = 16, .seed = 7};
}

/// Sample ids 0..n-1: every sample of a batch, for the reference step.
inline std::vector<std::uint64_t> all_ids(std::size_t n) {
    std::vector<std::uint64_t> ids(n);
    std::iota(ids.begin(), ids.end(), std::uint64_t{0});
    return ids;
}

}  // namespace pipeplan::test
