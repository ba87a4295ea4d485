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
    runtime::cpu::model_config c;
    c.vocab = 11;
    c.hidden = 5;
    c.ffn = 7;
    c.blocks = 3;
    c.seed = 42;
    return c;
}

/// The model the pipeline tests train: 16 blocks, enough for S = 8 with 2 chunks.
inline runtime::cpu::model_config pipeline_test_model() {
    runtime::cpu::model_config c;
    c.vocab = 16;
    c.hidden = 6;
    c.ffn = 8;
    c.blocks = 16;
    c.seed = 7;
    return c;
}

/// Sample ids 0..n-1: every sample of a batch, for the reference step.
inline std::vector<std::uint64_t> all_ids(std::size_t n) {
    std::vector<std::uint64_t> ids(n);
    std::iota(ids.begin(), ids.end(), std::uint64_t{0});
    return ids;
}

}  // namespace pipeplan::test
