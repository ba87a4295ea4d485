// Model-state memory of mixed-precision Adam under ZeRO stages 0-3 (cost/model_state.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "pipeplan/cost/model_state.hpp"

using pipeplan::model_state_from_fp16_mb;
using pipeplan::model_state_from_params;

namespace {
void check(const pipeplan::model_state_mb& m, double w, double g, double o) {
    CHECK(m.weights_mb == doctest::Approx(w));
    CHECK(m.gradients_mb == doctest::Approx(g));
    CHECK(m.optimizer_mb == doctest::Approx(o));
    CHECK(m.total_mb == doctest::Approx(w + g + o));
}
}  // namespace

TEST_CASE("model state: 16 bytes per parameter before sharding") {
    // 100 MB of fp16 weights = 50e6 parameters: 2 B weight, 2 B grad, 12 B optimizer each.
    for (int stage = 0; stage <= 3; ++stage) check(model_state_from_fp16_mb(100, stage, 1), 100, 100, 600);
    check(model_state_from_fp16_mb(100, 0, 8), 100, 100, 600);  // stage 0 ignores dp
    CHECK(model_state_from_fp16_mb(100, 0, 1).total_mb == doctest::Approx(8 * 100));
}

TEST_CASE("model state: ZeRO stages shard optimizer, then gradients, then weights") {
    // dp 4, 100 MB fp16 weights (50e6 parameters):
    //   stage 1: 100 + 100 + 600/4             = 350 MB  (2 + 2 + 12/4 B/param)
    //   stage 2: 100 + 100/4 + 600/4           = 275 MB  (2 + 14/4)
    //   stage 3: 100/4 + 100/4 + 600/4         = 200 MB  (16/4)
    check(model_state_from_fp16_mb(100, 1, 4), 100, 100, 150);
    check(model_state_from_fp16_mb(100, 2, 4), 100, 25, 150);
    check(model_state_from_fp16_mb(100, 3, 4), 25, 25, 150);
    // Monotone in the stage, and stage 3 is exactly 16/dp bytes per parameter.
    double prev = std::numeric_limits<double>::infinity();
    for (int stage = 0; stage <= 3; ++stage) {
        const double t = model_state_from_fp16_mb(100, stage, 16).total_mb;
        CHECK(t < prev);
        prev = t;
    }
    CHECK(model_state_from_fp16_mb(100, 3, 16).total_mb == doctest::Approx(800.0 / 16));
}

TEST_CASE("model state: from a parameter count") {
    // 1e9 parameters: 2000 MB fp16 weights; 16 GB unsharded; ZeRO-3 over 8 ranks 2 GB.
    check(model_state_from_params(1e9, 0, 8), 2000, 2000, 12000);
    check(model_state_from_params(1e9, 3, 8), 250, 250, 1500);
    CHECK(model_state_from_params(1e9, 2, 2).total_mb == doctest::Approx(2000 + 1000 + 6000));
    check(model_state_from_params(0, 3, 8), 0, 0, 0);
}

TEST_CASE("model state: invalid stage, dp or size") {
    CHECK_THROWS_AS((void)model_state_from_fp16_mb(100, 4, 1), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)model_state_from_fp16_mb(100, -1, 1), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)model_state_from_fp16_mb(100, 1, 0), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)model_state_from_fp16_mb(-1, 1, 1), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)model_state_from_fp16_mb(std::nan(""), 1, 1), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)model_state_from_params(-5, 0, 1), pipeplan::invalid_argument);
    CHECK_THROWS_WITH_AS((void)model_state_from_fp16_mb(100, 7, 1), doctest::Contains("valid: 0, 1, 2, 3"),
                         pipeplan::invalid_argument);
}
