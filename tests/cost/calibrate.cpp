// Calibrating the analytic model to a reference cost model (cost/calibrate.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/calibrate.hpp"
#include "pipeplan/cost/profile.hpp"
#include "support.hpp"

using namespace pipeplan;

namespace {

const std::vector<recompute_mode> all_modes{recompute_mode::none, recompute_mode::selective, recompute_mode::full};

std::vector<int> powers_of_two(int from, int to) {
    std::vector<int> v;
    for (int x = from; x <= to; x *= 2) v.push_back(x);
    return v;
}

/// A reference that knows nothing: every query unsupported.
struct empty_model {
    [[nodiscard]] layer_cost evaluate(const layer_query&) const { return {}; }
    [[nodiscard]] estimate<double> parameter_mb(component, int, recompute_mode) const { return {}; }
    [[nodiscard]] bool is_encoder_decoder() const { return false; }
};
/// A reference that answers 1 ms / 1 MB for every query (no analytic factors can match it).
struct constant_model {
    [[nodiscard]] layer_cost evaluate(const layer_query&) const { return {1.0, 1.0, 1.0, 1.0}; }
    [[nodiscard]] estimate<double> parameter_mb(component, int, recompute_mode) const { return 1.0; }
    [[nodiscard]] bool is_encoder_decoder() const { return false; }
};
static_assert(cost_model<empty_model> && cost_model<constant_model>);

void check_recovered(const time_factors& got, const time_factors& want, bool link) {
    CHECK(got.compute_efficiency == doctest::Approx(want.compute_efficiency).epsilon(1e-9));
    CHECK(got.memory_efficiency == doctest::Approx(want.memory_efficiency).epsilon(1e-9));
    if (link) CHECK(got.link_efficiency == doctest::Approx(want.link_efficiency).epsilon(1e-9));
    CHECK(got.overhead_ms_per_kernel == doctest::Approx(want.overhead_ms_per_kernel).epsilon(1e-9));
}

}  // namespace

TEST_CASE("calibrate: error summaries") {
    const auto s = summarize_relative_errors({0.5, 0.1, 0.3, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0});
    CHECK(s.points == 10);
    CHECK(s.median == doctest::Approx(0.55));
    CHECK(s.p90 == doctest::Approx(0.9));  // nearest rank: the 9th of 10
    CHECK(s.max == doctest::Approx(1.0));
    CHECK(summarize_relative_errors({0.3}).p90 == doctest::Approx(0.3));
    CHECK(summarize_relative_errors({}).points == 0);
}

TEST_CASE("calibrate: recovers known factors from a synthetic reference (GPT, all tp and modes)") {
    const auto initial = make_analytic_model("gpt-6.7b");
    // The reference: the same shapes with other efficiencies per component and phase.
    analytic_factors truth = initial.factors();
    // Overheads large enough that the smallest configurations are host-bound (otherwise the
    // overhead would not be identifiable: any value below the GPU time fits).
    truth.at(component::encoder, time_phase::forward) = {0.55, 0.62, 0.45, 0.12};
    truth.at(component::encoder, time_phase::backward) = {0.48, 0.71, 0.60, 0.09};
    truth.at(component::postprocess, time_phase::forward) = {0.66, 0.35, 0.50, 0.3};
    truth.at(component::postprocess, time_phase::backward) = {0.70, 0.90, 0.80, 0.2};
    truth.at(component::encoder, recompute_mode::none) = {1.1, 3.0, 0.5};
    truth.at(component::encoder, recompute_mode::selective) = {1.05, 3.3, 0.4};
    truth.at(component::encoder, recompute_mode::full) = {1.6, 4.0, 0.8};
    const auto reference = initial.with_factors(truth);

    const std::vector<int> tps{1, 2, 4, 8};
    const auto pts = calibration_grid(false, tps, all_modes, powers_of_two(1, 64), powers_of_two(16, 8192));
    const auto result = calibrate(initial, reference, pts);
    const auto& f = result.model.factors();
    for (component c : {component::encoder, component::postprocess})
        for (time_phase p : all_time_phases) {
            CAPTURE(to_string(c));
            CAPTURE(to_string(p));
            check_recovered(f.at(c, p), truth.at(c, p), true);
        }
    for (recompute_mode r : all_modes) {
        const auto& got = f.at(component::encoder, r);
        const auto& want = truth.at(component::encoder, r);
        CHECK(got.stored_scale == doctest::Approx(want.stored_scale).epsilon(1e-9));
        CHECK(got.peak_stored_scale == doctest::Approx(want.peak_stored_scale).epsilon(1e-9));
        CHECK(got.peak_working_scale == doctest::Approx(want.peak_working_scale).epsilon(1e-9));
    }
    // Before: the default factors are off; after: exact.
    CHECK(result.report.time_before.median > 0.05);
    CHECK(result.report.time_after.max < 1e-9);
    CHECK(result.report.memory_after.max < 1e-9);
    CHECK(result.report.residuals.size() == result.report.time_after.points + result.report.memory_after.points);
    CHECK(result.report.skipped_values == 0);  // the analytic reference answers everything
}

TEST_CASE("calibrate: recovers factors of an encoder-decoder model (T5), tp 1 keeps the link factor") {
    const auto initial = make_analytic_model("t5-11b");
    const time_factors want{0.6, 0.5, 0.33, 0.1};
    const auto reference = initial.with_factors(analytic_factors::uniform(want, {1.2, 2.0, 0.9}));
    const std::vector<int> tps{1};
    const auto pts = calibration_grid(true, tps, all_modes, powers_of_two(1, 16), powers_of_two(16, 4096),
                                      powers_of_two(16, 1024));
    const auto result = calibrate(initial, reference, pts);
    for (component c : {component::encoder, component::decoder})
        for (time_phase p : all_time_phases) {
            CAPTURE(to_string(c));
            const auto& got = result.model.factors().at(c, p);
            check_recovered(got, want, false);
            // No all-reduce at tp 1: the link factor is not identifiable and keeps its value.
            CHECK(got.link_efficiency == initial.factors().at(c, p).link_efficiency);
        }
    // T5's LM head at tp 1 is not identifiable: above the host floor its compute and memory
    // terms are both proportional to the token count (collinear columns), so many factor sets
    // reproduce the reference exactly. The fit must still be exact:
    CHECK(result.report.time_after.max < 1e-9);
    CHECK(result.report.memory_after.max < 1e-9);
}

TEST_CASE("calibrate: options, infeasible references and errors") {
    const auto initial = make_analytic_model("gpt-6.7b");
    const std::vector<int> tps{1, 2};
    const auto pts = calibration_grid(false, tps, all_modes, powers_of_two(1, 8), powers_of_two(16, 2048));

    // A reference no roofline can match: the fit still returns valid, positive factors and
    // does not make the error worse than the initial model's.
    const auto r = calibrate(initial, constant_model{}, pts);
    CHECK(r.report.time_after.median <= r.report.time_before.median);
    CHECK(r.report.memory_after.median <= r.report.memory_before.median);
    for (component c : {component::encoder, component::postprocess})
        for (time_phase p : all_time_phases) {
            const auto& f = r.model.factors().at(c, p);
            CHECK(f.compute_efficiency > 0);
            CHECK(f.memory_efficiency > 0);
            CHECK(f.overhead_ms_per_kernel >= 0);
        }
    for (const auto& q : pts) {
        const auto c = r.model.evaluate(q);
        CHECK((c.forward_ms.value() > 0 && std::isfinite(c.forward_ms.value())));
    }

    // fit_time = false keeps the time factors; fit_memory = false the memory factors.
    calibration_options only_memory;
    only_memory.fit_time = false;
    const auto m = calibrate(initial, constant_model{}, pts, only_memory);
    CHECK(m.report.time_fits.empty());
    CHECK(m.model.factors().at(component::encoder, time_phase::forward).compute_efficiency ==
          initial.factors().at(component::encoder, time_phase::forward).compute_efficiency);
    CHECK_FALSE(m.report.memory_fits.empty());

    CHECK_THROWS_AS((void)calibrate(initial, empty_model{}, pts), invalid_argument);
    calibration_options bad;
    bad.max_roofline_iterations = 0;
    CHECK_THROWS_AS((void)calibrate(initial, constant_model{}, pts, bad), invalid_argument);
}

TEST_CASE("calibrate: on the real A100 profiles the error drops" * PIPEPLAN_NEEDS_DATA()) {
    const auto dir = *test::shared_data_dir() / "cost_models";
    for (const auto& [profile, preset] : {std::pair{"gpt_6.7b", "gpt-6.7b"}, std::pair{"t5_11b", "t5-11b"}}) {
        CAPTURE(profile);
        const auto reference = profile_cost_model::load(dir, profile, interpolation_mode::linear);
        const auto initial = make_analytic_model(preset);
        const std::vector<int> tps{1, 2};
        const auto pts = calibration_grid(initial.is_encoder_decoder(), tps, all_modes, powers_of_two(1, 2048),
                                          powers_of_two(16, 8192), powers_of_two(16, 2048));
        const auto r = calibrate(initial, reference, pts);
        const auto& rep = r.report;
        CHECK(rep.time_before.points > 500);
        CHECK(rep.memory_before.points > 500);
        CHECK(rep.time_after.median < rep.time_before.median);
        CHECK(rep.time_after.p90 < rep.time_before.p90);
        CHECK(rep.memory_after.median < rep.memory_before.median);
        CHECK(rep.memory_after.p90 < rep.memory_before.p90);
        // The fitted model is useful: median time error below 15%, memory below 10%.
        CHECK(rep.time_after.median < 0.15);
        CHECK(rep.memory_after.median < 0.10);
    }
}
