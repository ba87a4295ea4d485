// The tiny model's gradients against finite differences, and the identities the pipeline
// runs rely on: padding + masking changes nothing, stages chain to the whole model, split
// backward = whole backward, checkpoint + recompute = stored forward.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "pipeplan/runtime/cpu/reference.hpp"
#include "runtime/tiny_fixture.hpp"

using namespace pipeplan::runtime::cpu;
using pipeplan::test::gradient_check_model;

namespace {

/// Loss of a whole-model forward over one padded micro-batch.
double loss_of(const model_config& c, const model_params& p, const microbatch_data& mb, double tokens) {
    model_params g = zero_params(c);
    const stage_module m(c, p, g, whole_model(p));
    stage_cache cache;
    double loss = 0;
    (void)m.forward(mb, matrix(), cache, false, tokens, loss);
    return loss;
}

}  // namespace

TEST_CASE("tiny model: gradients match central finite differences on a padded, masked micro-batch") {
    const auto c = gradient_check_model();
    const model_params p = init_params(c);
    const microbatch_data mb = make_microbatch(c, {3, 8, 5}, {4, 2, 6}, 7);  // padded to 7
    const double tokens = 12;
    model_params g = zero_params(c);
    const stage_module m(c, p, g, whole_model(p));
    stage_cache cache;
    double loss = 0;
    (void)m.forward(mb, matrix(), cache, true, tokens, loss);
    (void)m.backward(mb, cache, matrix(), tokens);
    CHECK(loss > 0);

    // Every parameter of every tensor, central differences (O(h^2) error).
    model_params probe = p;
    double worst = 0;
    std::size_t checked = 0;
    for_each_tensor(
        whole_model(p),
        [&](auto& pt, const auto& gt) {
            for (Eigen::Index i = 0; i < pt.size(); ++i) {
                const double x = pt.data()[i], h = 1e-5;
                pt.data()[i] = x + h;
                const double up = loss_of(c, probe, mb, tokens);
                pt.data()[i] = x - h;
                const double down = loss_of(c, probe, mb, tokens);
                pt.data()[i] = x;
                const double fd = (up - down) / (2 * h);
                worst = std::max(worst, std::abs(fd - gt.data()[i]) / std::max(1e-3, std::abs(fd)));
                ++checked;
            }
        },
        probe, g);
    CHECK(checked > 300);
    CHECK(worst < 1e-6);
}

TEST_CASE("tiny model: a padded micro-batch equals the reference's samples run alone") {
    const auto c = gradient_check_model();
    const model_params p = init_params(c);
    const std::vector<std::uint64_t> ids{0, 1, 2, 3};
    const std::vector<std::size_t> lens{5, 1, 3, 9};
    const step_result ref = reference_step(c, p, ids, lens);

    model_params g = zero_params(c);
    const stage_module m(c, p, g, whole_model(p));
    double loss = 0;
    for (std::size_t half = 0; half < 2; ++half) {  // two micro-batches, padded differently
        const auto mb = make_microbatch(c, {ids[2 * half], ids[2 * half + 1]}, {lens[2 * half], lens[2 * half + 1]}, 12);
        stage_cache cache;
        double l = 0;
        (void)m.forward(mb, matrix(), cache, true, 18, l);
        (void)m.backward(mb, cache, matrix(), 18);
        loss += l;
    }
    CHECK(std::abs(loss - ref.loss) <= 1e-12 * ref.loss);
    CHECK(max_relative_error(g, ref.grads, whole_model(p)) < 1e-12);
    // The pad token's embedding column never gets a gradient.
    CHECK(g.embed.col(0).norm() == 0.0);
}

TEST_CASE("tiny model: stages chain to the whole model; split backward and recompute are exact") {
    const auto c = gradient_check_model();
    const model_params p = init_params(c);
    const auto mb = make_microbatch(c, {7, 9}, {6, 3});
    const double tokens = 9;
    const step_result ref = reference_step(c, p, {7, 9}, {6, 3});

    for (int variant = 0; variant < 3; ++variant) {  // 0 stored, 1 checkpoint + R, 2 split backward
        CAPTURE(variant);
        model_params g = zero_params(c);
        const auto layouts = split_layers(c.blocks, 3);
        std::vector<stage_module> stages;
        for (const auto& l : layouts) stages.emplace_back(c, p, g, l);
        std::vector<stage_cache> caches(3);
        matrix x;
        double loss = 0;
        for (std::size_t s = 0; s < 3; ++s) x = stages[s].forward(mb, x, caches[s], variant != 1, tokens, loss);
        matrix d;
        for (std::size_t s = 3; s-- > 0;) {
            if (variant == 1) stages[s].recompute(mb, caches[s], tokens);
            if (variant == 2) {
                d = stages[s].backward_input(mb, caches[s], d, tokens);
            } else {
                d = stages[s].backward(mb, caches[s], d, tokens);
            }
        }
        if (variant == 2)
            for (std::size_t s = 0; s < 3; ++s) stages[s].backward_weight(mb, caches[s]);
        CHECK(std::abs(loss - ref.loss) <= 1e-12 * ref.loss);
        CHECK(max_relative_error(g, ref.grads, whole_model(p)) < 1e-12);
    }
}

TEST_CASE("tiny model: layer split, bad inputs, optimizers") {
    const auto l = split_layers(7, 3);
    REQUIRE(l.size() == 3);
    CHECK(l[0].first_block == 0);
    CHECK(l[0].end_block == 3);
    CHECK(l[2].end_block == 7);
    CHECK(l[0].embedding);
    CHECK(l[2].head);
    CHECK_FALSE(l[1].embedding);
    CHECK_THROWS_AS((void)split_layers(2, 3), pipeplan::invalid_argument);
    const auto c = gradient_check_model();
    CHECK_THROWS_AS((void)make_microbatch(c, {1}, {9}, 4), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)make_microbatch(c, {1, 2}, {9}), pipeplan::invalid_argument);

    // SGD and Adam move the loss down on a fixed batch.
    model_params p = init_params(c);
    const std::vector<std::uint64_t> ids{1, 2, 3};
    const std::vector<std::size_t> lens{4, 6, 2};
    const double start = reference_step(c, p, ids, lens).loss;
    model_params q = p;
    sgd s{0.5};
    adam a;
    a.lr = 0.05;
    for (int it = 0; it < 5; ++it) {
        s.step(p, reference_step(c, p, ids, lens).grads, std::vector{whole_model(p)});
        a.step(q, reference_step(c, q, ids, lens).grads, std::vector{whole_model(q)});
    }
    CHECK(reference_step(c, p, ids, lens).loss < start);
    CHECK(reference_step(c, q, ids, lens).loss < start);
}
