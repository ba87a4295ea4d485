// Profile cost model on small synthetic CSVs: interpolation arithmetic by hand, duplicates,
// ragged grids, range reporting, below-grid policies and every bad-input case.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/csv.hpp"
#include "pipeplan/cost/profile.hpp"
#include "pipeplan/cost/table.hpp"

using pipeplan::component;
using pipeplan::csv_table;
using pipeplan::estimate_status;
using pipeplan::input_error;
using pipeplan::interpolation_mode;
using pipeplan::interpolation_scheme;
using pipeplan::layer_query;
using pipeplan::profile_cost_model;
using pipeplan::recompute_mode;

namespace {

const std::string timing_header = "tp,recompute,component,phase,enc_seqlen,dec_seqlen,mbs,time_ms\n";
const std::string activation_header = "tp,recompute,component,kind,enc_seqlen,dec_seqlen,mbs,memory_mb\n";
const std::string state_header = "tp,recompute,component,memory_mb\n";

// A 2x2 GPT-like encoder grid (mbs {1,3} x s {16,32}), forward values 1, 2 (mbs 3) at s 16 and
// 3, 5 at s 32; backward = 2 x forward; stored memory = mbs * s / 16 MB; peak = 2 x stored.
std::string small_timing() {
    return timing_header +
           "1,none,encoder,forward,16,0,1,1\n"
           "1,none,encoder,forward,16,0,3,2\n"
           "1,none,encoder,forward,32,0,1,3\n"
           "1,none,encoder,forward,32,0,3,5\n"
           "1,none,encoder,backward,16,0,1,2\n"
           "1,none,encoder,backward,16,0,3,4\n"
           "1,none,encoder,backward,32,0,1,6\n"
           "1,none,encoder,backward,32,0,3,10\n";
}
std::string small_activation() {
    return activation_header +
           "1,none,encoder,stored,16,0,1,1\n"
           "1,none,encoder,stored,16,0,3,3\n"
           "1,none,encoder,stored,32,0,1,2\n"
           "1,none,encoder,stored,32,0,3,6\n"
           "1,none,encoder,peak,16,0,1,2\n"
           "1,none,encoder,peak,16,0,3,6\n"
           "1,none,encoder,peak,32,0,1,4\n"
           "1,none,encoder,peak,32,0,3,12\n";
}
std::string small_state() { return state_header + "1,none,encoder,100\n1,none,embedding,50\n"; }

profile_cost_model make(const std::string& timing, const std::string& activation = activation_header,
                        const std::string& state = state_header,
                        interpolation_mode mode = interpolation_mode::linear) {
    return profile_cost_model::from_csv(csv_table::parse(timing, "timing.csv"),
                                        csv_table::parse(activation, "activation.csv"),
                                        csv_table::parse(state, "model_state.csv"), mode, "test");
}

layer_query q(int mbs, int s, component c = component::encoder, int d = 0, int tp = 1,
              recompute_mode r = recompute_mode::none) {
    return {.comp = c, .mbs = mbs, .seqlen_tokens = s, .dec_seqlen_tokens = d, .tp = tp, .recompute = r};
}

// Runs `f` and returns the input_error it throws (fails the test if it throws nothing).
template <class F>
input_error catch_input_error(F&& f) {
    try {
        f();
    } catch (const input_error& e) {
        return e;
    }
    FAIL("expected pipeplan::input_error");
    return input_error("", 0, "", "");
}

}  // namespace

TEST_CASE("interpolation_mode: names round-trip and unknown names list the choices") {
    for (auto m : pipeplan::all_interpolation_modes)
        CHECK(pipeplan::parse_interpolation_mode(pipeplan::to_string(m)) == m);
    CHECK(pipeplan::parse_interpolation_mode("default") == interpolation_mode::recommended);
    CHECK(pipeplan::parse_interpolation_mode("recommended") == interpolation_mode::recommended);
    CHECK(pipeplan::parse_interpolation_mode("linear") == interpolation_mode::linear);
    CHECK(pipeplan::parse_interpolation_mode("dynapipe") == interpolation_mode::dynapipe);
    try {
        (void)pipeplan::parse_interpolation_mode("cubic");
        FAIL("no exception");
    } catch (const pipeplan::invalid_argument& e) {
        const std::string msg = e.what();
        CHECK(msg.find("cubic") != std::string::npos);
        CHECK(msg.find("linear, dynapipe, default") != std::string::npos);
    }
}

TEST_CASE("profile: exact values at the profiled points in every mode") {
    for (auto mode : pipeplan::all_interpolation_modes) {
        const auto m = make(small_timing(), small_activation(), small_state(), mode);
        CAPTURE(pipeplan::to_string(mode));
        const auto c = m.evaluate(q(3, 32));
        CHECK(c.forward_ms.value() == 5.0);
        CHECK(c.backward_ms.value() == 10.0);
        CHECK(c.stored_mb.value() == 6.0);
        CHECK(c.peak_mb.value() == 12.0);
        CHECK(m.evaluate(q(1, 16)).forward_ms.value() == 1.0);
        CHECK(m.evaluate(q(3, 16)).forward_ms.value() == 2.0);
        CHECK(m.evaluate(q(1, 32)).forward_ms.value() == 3.0);
    }
}

TEST_CASE("profile: linear mode between grid points (hand computed)") {
    const auto m = make(small_timing(), small_activation(), small_state());
    // mbs 2 is halfway between 1 and 3, s 24 halfway between 16 and 32: mean of the corners.
    CHECK(m.evaluate(q(2, 24)).forward_ms.value() == doctest::Approx((1 + 2 + 3 + 5) / 4.0));
    CHECK(m.evaluate(q(2, 24)).backward_ms.value() == doctest::Approx((2 + 4 + 6 + 10) / 4.0));
    // Along one axis: s 20 is a quarter of the way from 16 to 32.
    CHECK(m.evaluate(q(1, 20)).forward_ms.value() == doctest::Approx(0.75 * 1 + 0.25 * 3));
    CHECK(m.evaluate(q(2, 16)).forward_ms.value() == doctest::Approx(1.5));
    // Weights (mbs 2: 1/2, 1/2; s 28: 1/4, 3/4) on stored memory 1, 3 / 2, 6.
    CHECK(m.evaluate(q(2, 28)).stored_mb.value() == doctest::Approx(0.25 * (0.5 * 1 + 0.5 * 3) + 0.75 * (0.5 * 2 + 0.5 * 6)));
    // dynapipe mode is the same multilinear interpolation inside the grid.
    const auto d = m.with_mode(interpolation_mode::dynapipe);
    CHECK(d.evaluate(q(2, 24)).forward_ms.value() == doctest::Approx(2.75));
}

TEST_CASE("profile: 3-D decoder grid and postprocess keyed by the decoder length") {
    // f = mbs + enc/16 + dec/16 is multilinear, so trilinear interpolation reproduces it.
    std::string t = timing_header;
    for (int mbs : {1, 2})
        for (int enc : {16, 32})
            for (int dec : {16, 32})
                for (const char* phase : {"forward", "backward"})
                    t += "1,none,decoder," + std::string(phase) + "," + std::to_string(enc) + "," +
                         std::to_string(dec) + "," + std::to_string(mbs) + "," +
                         std::to_string(mbs + enc / 16.0 + dec / 16.0) + "\n";
    t += "1,none,postprocess,forward,0,16,1,1\n1,none,postprocess,forward,0,32,1,2\n";
    const auto m = make(t);
    CHECK(m.is_encoder_decoder());
    CHECK(m.evaluate(q(1, 24, component::decoder, 20)).forward_ms.value() == doctest::Approx(1 + 1.5 + 1.25));
    CHECK(m.evaluate(q(2, 30, component::decoder, 18)).backward_ms.value() ==
          doctest::Approx(2 + 30 / 16.0 + 18 / 16.0));
    // The LM head of an encoder-decoder model depends on the decoder length only.
    CHECK(m.evaluate(q(1, 5000, component::postprocess, 24)).forward_ms.value() == doctest::Approx(1.5));
    CHECK(m.evaluate(q(1, 16, component::postprocess, 64)).forward_ms.status() ==
          estimate_status::out_of_profiled_range);
    // A decoder query without a decoder length is not a valid query.
    CHECK(m.evaluate(q(1, 16, component::decoder, 0)).forward_ms.status() == estimate_status::unsupported);
    CHECK_FALSE(make(small_timing()).is_encoder_decoder());
}

TEST_CASE("profile: repeated measurements are aggregated by their median") {
    std::string t = timing_header;
    // Odd count: 1, 10, 2 -> 2; even count 1, 2, 3, 10 -> 2.5 (mean of the middle two).
    t += "1,none,encoder,forward,16,0,1,1\n1,none,encoder,forward,16,0,1,10\n1,none,encoder,forward,16,0,1,2\n";
    t += "1,none,encoder,forward,32,0,1,1\n1,none,encoder,forward,32,0,1,3\n";
    t += "1,none,encoder,forward,32,0,1,10\n1,none,encoder,forward,32,0,1,2\n";
    const std::string s = state_header + "1,none,encoder,100\n1,none,encoder,300\n1,none,encoder,110\n";
    const auto m = make(t, activation_header, s);
    CHECK(m.evaluate(q(1, 16)).forward_ms.value() == 2.0);
    CHECK(m.evaluate(q(1, 32)).forward_ms.value() == 2.5);
    CHECK(m.evaluate(q(1, 24)).forward_ms.value() == doctest::Approx(2.25));
    CHECK(m.parameter_mb(component::encoder, 1, recompute_mode::none).value() == 110.0);
    CHECK(m.aggregation() == pipeplan::repeat_aggregation::median);
    // DynaPipe's mode takes the maximum of the repeats, as DynaPipe's profile reader does.
    const auto d = m.with_mode(interpolation_mode::dynapipe);
    CHECK(d.aggregation() == pipeplan::repeat_aggregation::maximum);
    CHECK(d.evaluate(q(1, 16)).forward_ms.value() == 10.0);
    CHECK(d.evaluate(q(1, 32)).forward_ms.value() == 10.0);
    CHECK(d.evaluate(q(1, 20)).forward_ms.value() == doctest::Approx(10.0));
    // ... and back: with_mode switches between the aggregations built at load.
    CHECK(d.with_mode(interpolation_mode::linear).evaluate(q(1, 16)).forward_ms.value() == 2.0);
}

TEST_CASE("profile: parameter memory and metrics without data are unsupported") {
    const auto m = make(small_timing(), small_activation(), small_state());
    CHECK(m.parameter_mb(component::encoder, 1, recompute_mode::none).value() == 100.0);
    CHECK(m.parameter_mb(component::embedding, 1, recompute_mode::none).value() == 50.0);
    CHECK(m.parameter_mb(component::decoder, 1, recompute_mode::none).status() == estimate_status::unsupported);
    CHECK(m.parameter_mb(component::encoder, 2, recompute_mode::none).status() == estimate_status::unsupported);
    CHECK(m.parameter_mb(component::encoder, 1, recompute_mode::full).status() == estimate_status::unsupported);
    // No timing or activation rows for the embedding; another tp; another recompute mode.
    for (const auto& query : {q(1, 16, component::embedding), q(1, 16, component::encoder, 0, 2),
                              q(1, 16, component::encoder, 0, 1, recompute_mode::selective)}) {
        const auto c = m.evaluate(query);
        CHECK(c.forward_ms.status() == estimate_status::unsupported);
        CHECK(c.backward_ms.status() == estimate_status::unsupported);
        CHECK(c.stored_mb.status() == estimate_status::unsupported);
        CHECK(c.peak_mb.status() == estimate_status::unsupported);
    }
    // Timing without activation rows: the memory metrics are unsupported, times are fine.
    const auto t_only = make(small_timing());
    CHECK(t_only.evaluate(q(2, 24)).forward_ms.ok());
    CHECK(t_only.evaluate(q(2, 24)).stored_mb.status() == estimate_status::unsupported);
    // Non-positive sizes are not valid queries.
    CHECK(m.evaluate(q(0, 16)).forward_ms.status() == estimate_status::unsupported);
    CHECK(m.evaluate(q(1, 0)).forward_ms.status() == estimate_status::unsupported);
    CHECK(m.evaluate(q(1, -5)).stored_mb.status() == estimate_status::unsupported);
}

TEST_CASE("profile: above the largest profiled mbs or length is out of range in every mode") {
    for (auto mode : pipeplan::all_interpolation_modes) {
        const auto m = make(small_timing(), small_activation(), small_state(), mode);
        for (const auto& query : {q(4, 16), q(1, 33), q(4, 33), q(1000000, 1000000)}) {
            const auto c = m.evaluate(query);
            CHECK(c.forward_ms.status() == estimate_status::out_of_profiled_range);
            CHECK(c.backward_ms.status() == estimate_status::out_of_profiled_range);
            CHECK(c.stored_mb.status() == estimate_status::out_of_profiled_range);
            CHECK(c.peak_mb.status() == estimate_status::out_of_profiled_range);
        }
        CHECK(m.evaluate(q(3, 32)).forward_ms.ok());  // the largest point itself is in range
    }
}

TEST_CASE("profile: below the smallest profiled point") {
    const auto lin = make(small_timing(), small_activation(), small_state(), interpolation_mode::linear);
    const auto rec = lin.with_mode(interpolation_mode::recommended);
    const auto dyn = lin.with_mode(interpolation_mode::dynapipe);
    // linear and recommended clamp to the smallest profiled length: the value at s = 16.
    CHECK(lin.evaluate(q(1, 8)).forward_ms.value() == 1.0);
    CHECK(lin.evaluate(q(2, 1)).forward_ms.value() == doctest::Approx(1.5));
    for (int s = 1; s < 16; ++s)
        for (int mbs = 1; mbs <= 3; ++mbs) {
            CHECK(rec.evaluate(q(mbs, s)).forward_ms.value() > 0);
            CHECK(rec.evaluate(q(mbs, s)).backward_ms.value() > 0);
            CHECK(lin.evaluate(q(mbs, s)).forward_ms.value() > 0);
        }
    // dynapipe extends the first interval linearly: slope (3 - 1) / 16 per token at mbs 1.
    CHECK(dyn.evaluate(q(1, 12)).forward_ms.value() == doctest::Approx(0.5));
    CHECK(dyn.evaluate(q(1, 8)).forward_ms.value() == doctest::Approx(0.0));   // can reach zero...
    CHECK(dyn.evaluate(q(1, 4)).forward_ms.value() == doctest::Approx(-0.5));  // ...and go below
    CHECK(dyn.evaluate(q(2, 8)).forward_ms.value() == doctest::Approx(0.5 * (1 - 1) + 0.5 * (2 - 1.5)));
}

TEST_CASE("profile: ragged grid (a cell missing, as after an out-of-memory run)") {
    // mbs {1, 2, 4} x s {16, 32}; (mbs 4, s 32) was not profiled.
    const std::string t = timing_header +
                          "1,none,encoder,forward,16,0,1,1\n"
                          "1,none,encoder,forward,16,0,2,2\n"
                          "1,none,encoder,forward,16,0,4,4\n"
                          "1,none,encoder,forward,32,0,1,3\n"
                          "1,none,encoder,forward,32,0,2,6\n";
    for (auto mode : pipeplan::all_interpolation_modes) {
        CAPTURE(pipeplan::to_string(mode));
        const auto m = make(t, activation_header, state_header, mode);
        // Profiled points next to the hole still answer exactly.
        CHECK(m.evaluate(q(4, 16)).forward_ms.value() == 4.0);
        CHECK(m.evaluate(q(2, 32)).forward_ms.value() == 6.0);
        // On the edge beyond the hole: out of range, never NaN or a huge number.
        CHECK(m.evaluate(q(3, 32)).forward_ms.status() == estimate_status::out_of_profiled_range);
        CHECK(m.evaluate(q(4, 17)).forward_ms.status() == estimate_status::out_of_profiled_range);
        // Inside the simplex of the lowest corner (2,16) and its neighbours (4,16), (2,32):
        // mbs 3 -> t 1/2, s 20 -> t 1/4 (sum 3/4 <= 1). DynaPipe fills the hole with 1e100:
        // its mode has no simplex fallback, the query is infeasible.
        if (mode == interpolation_mode::dynapipe) {
            CHECK(m.evaluate(q(3, 20)).forward_ms.status() == estimate_status::out_of_profiled_range);
            CHECK(m.evaluate(q(1, 24)).forward_ms.value() == doctest::Approx(2.0));
            continue;
        }
        const auto e = m.evaluate(q(3, 20)).forward_ms;
        REQUIRE(e.ok());
        CHECK(e.value() == doctest::Approx(2 + 0.5 * (4 - 2) + 0.25 * (6 - 2)));
        // Beyond the simplex (sum of local coordinates 1/2 + 3/4 > 1): out of range.
        CHECK(m.evaluate(q(3, 28)).forward_ms.status() == estimate_status::out_of_profiled_range);
        // Complete cells are unaffected (recommended: the shape through the origin in s).
        CHECK(m.evaluate(q(1, 24)).forward_ms.value() ==
              doctest::Approx(mode == interpolation_mode::recommended ? 0.75 * 1 + 0.375 * 3 : 2.0));
    }
}

TEST_CASE("profile: recommended (quadratic-shape) reproduces a + mbs*(b*s + c*s^2) exactly") {
    auto f = [](double mbs, double s) { return 0.7 + mbs * (0.01 * s + 2e-5 * s * s); };
    std::string t = timing_header;
    for (int mbs : {1, 2, 4, 8})
        for (int s : {64, 128, 256, 512})
            t += "1,none,encoder,forward,"  + std::to_string(s) + ",0," + std::to_string(mbs) + "," +
                 std::to_string(f(mbs, s)) + "\n";
    const auto rec = make(t, activation_header, state_header, interpolation_mode::recommended);
    const auto lin = rec.with_mode(interpolation_mode::linear);
    for (int mbs : {1, 3, 5, 7, 8})
        for (int s : {64, 100, 200, 300, 400, 512}) {
            CAPTURE(mbs);
            CAPTURE(s);
            CHECK(rec.evaluate(q(mbs, s)).forward_ms.value() == doctest::Approx(f(mbs, s)).epsilon(1e-5));
        }
    // Plain bilinear interpolation misses the s^2 term between grid lines.
    CHECK(std::abs(lin.evaluate(q(8, 400)).forward_ms.value() - f(8, 400)) > 0.05);
}

TEST_CASE("profile: a row of sizes priced at once equals evaluate() bit for bit (holes, non-positive shapes)") {
    // mbs {1, 4, 8} x s {16, 64}: forward falls steeply with mbs, so the quadratic shape dips
    // to <= 0 inside the cells (it then takes the linear answer); backward has a hole at
    // (mbs 8, s 64) (the cell takes the general path); mbs 9 and s 65 are out of range.
    std::string t = timing_header;
    for (int s : {16, 64})
        for (int mbs : {1, 4, 8}) {
            t += "1,none,encoder,forward," + std::to_string(s) + ",0," + std::to_string(mbs) + "," +
                 (mbs == 1 ? "10" : "0.01") + "\n";
            if (!(mbs == 8 && s == 64))
                t += "1,none,encoder,backward," + std::to_string(s) + ",0," + std::to_string(mbs) + "," +
                     std::to_string(2 * mbs + s / 16) + "\n";
        }
    std::size_t compared = 0, dips = 0, holes = 0;
    for (auto mode : pipeplan::all_interpolation_modes) {
        CAPTURE(pipeplan::to_string(mode));
        const auto m = make(t, activation_header, state_header, mode);
        const auto linear = m.with_mode(interpolation_mode::linear);
        for (int s : {10, 16, 20, 40, 63, 64, 65}) {
            profile_cost_model::prepared_query p;
            m.prepare(q(1, s), p);
            // Rows in pieces, in and out of order (the prepared query keeps its last mbs cell).
            for (const auto& [first, n] : std::vector<std::pair<int, std::size_t>>{{1, 10}, {5, 3}, {2, 1}, {3, 7}, {7, 2}}) {
                std::vector<pipeplan::layer_cost> row(n);
                m.evaluate_row(p, first, n, row.data());
                for (std::size_t k = 0; k < n; ++k) {
                    const int mbs = first + static_cast<int>(k);
                    CAPTURE(s);
                    CAPTURE(mbs);
                    const auto want = m.evaluate(q(mbs, s));
                    for (const auto& [a, b] : {std::pair{want.forward_ms, row[k].forward_ms},
                                               std::pair{want.backward_ms, row[k].backward_ms},
                                               std::pair{want.stored_mb, row[k].stored_mb},
                                               std::pair{want.peak_mb, row[k].peak_mb}}) {
                        REQUIRE(a.status() == b.status());
                        if (a.ok()) REQUIRE(a.value() == b.value());
                    }
                    ++compared;
                    if (mode == interpolation_mode::recommended && want.forward_ms.ok() &&
                        want.forward_ms.value() == linear.evaluate(q(mbs, s)).forward_ms.value() && mbs % 4 != 0 && mbs != 1 &&
                        s != 16 && s != 64)
                        ++dips;
                    holes += mbs > 4 && s > 16 && s < 64 && !want.backward_ms.ok() ? 1 : 0;
                }
            }
        }
    }
    CHECK(compared == 3 * 7 * 23);
    CHECK(dips > 0);
    CHECK(holes > 0);
}

TEST_CASE("profile: the scheme behind each mode") {
    CHECK(pipeplan::scheme_of(interpolation_mode::linear) == interpolation_scheme::linear);
    CHECK(pipeplan::scheme_of(interpolation_mode::dynapipe) == interpolation_scheme::linear_extrapolating);
    CHECK(pipeplan::scheme_of(interpolation_mode::recommended) == interpolation_scheme::quadratic_shape);
    const auto m = make(small_timing());
    CHECK(m.mode() == interpolation_mode::linear);
    CHECK(m.with_mode(interpolation_mode::dynapipe).mode() == interpolation_mode::dynapipe);
}

TEST_CASE("profile_grid: leave-one-out prediction uses the neighbours on both sides") {
    // Axis mbs {1,2,3}, s {10,20,30}: f = mbs * s is bilinear, so linear LOO is exact at the
    // centre and boundary points have no prediction.
    std::vector<double> v;
    for (double mbs : {1.0, 2.0, 3.0})
        for (double s : {10.0, 20.0, 30.0}) v.push_back(mbs * s);
    const pipeplan::profile_grid g({std::vector<double>{1, 2, 3}, std::vector<double>{10, 20, 30}, std::vector<double>{0}},
                                   v);
    CHECK(g.predict_left_out({1, 1, 0}, interpolation_scheme::linear).value() == doctest::Approx(40.0));
    CHECK_FALSE(g.predict_left_out({0, 1, 0}, interpolation_scheme::linear).has_value());
    CHECK_FALSE(g.predict_left_out({1, 2, 0}, interpolation_scheme::linear).has_value());
    CHECK(g.profiled_points() == 9);
    CHECK(g.at_index(2, 2, 0).value() == 90.0);
    CHECK_FALSE(g.at_index(3, 0, 0).has_value());
    CHECK_FALSE(g.predict_left_out({1, 1, 1}, interpolation_scheme::linear).has_value());
    CHECK(g.independent(2));
    CHECK_FALSE(g.independent(0));
    CHECK_THROWS_AS(pipeplan::profile_grid({std::vector<double>{2, 1}, std::vector<double>{0}, std::vector<double>{0}},
                                           std::vector<double>{1, 2}),
                    pipeplan::invalid_argument);
    CHECK_THROWS_AS(pipeplan::profile_grid({std::vector<double>{1, 2}, std::vector<double>{0}, std::vector<double>{0}},
                                           std::vector<double>{1}),
                    pipeplan::invalid_argument);
}

TEST_CASE("profile: bad input names the file, line and column") {
    const std::string good_row = "1,none,encoder,forward,16,0,1,1\n";
    struct bad_case {
        const char* what;
        std::string timing;
        std::size_t line;
        const char* column;
        const char* message_part;
    };
    const std::vector<bad_case> cases{
        {"non-numeric time", timing_header + good_row + "1,none,encoder,forward,32,0,1,fast\n", 3, "time_ms",
         "expected a number"},
        {"negative time", timing_header + "1,none,encoder,forward,16,0,1,-1\n", 2, "time_ms", "non-negative"},
        {"zero time", timing_header + "1,none,encoder,forward,16,0,1,0\n", 2, "time_ms", "positive"},
        {"NaN time", timing_header + "1,none,encoder,forward,16,0,1,nan\n", 2, "time_ms", "expected a number"},
        {"non-numeric tp", timing_header + "two,none,encoder,forward,16,0,1,1\n", 2, "tp", "integer"},
        {"tp zero", timing_header + "0,none,encoder,forward,16,0,1,1\n", 2, "tp", "outside"},
        {"unknown recompute", timing_header + "1,some,encoder,forward,16,0,1,1\n", 2, "recompute",
         "none, selective, full"},
        {"unknown component", timing_header + "1,none,mlp,forward,16,0,1,1\n", 2, "component",
         "encoder, decoder, embedding, postprocess"},
        {"unknown phase", timing_header + "1,none,encoder,sideways,16,0,1,1\n", 2, "phase", "forward, backward"},
        {"mbs zero", timing_header + "1,none,encoder,forward,16,0,0,1\n", 2, "mbs", "outside"},
        {"fractional mbs", timing_header + "1,none,encoder,forward,16,0,1.5,1\n", 2, "mbs", "integer"},
        {"negative length", timing_header + "1,none,encoder,forward,-16,0,1,1\n", 2, "enc_seqlen", "outside"},
        {"0 mixed with lengths", timing_header + good_row + "1,none,encoder,forward,0,0,1,1\n", 3, "enc_seqlen",
         "not applicable"},
        {"missing column", "tp,recompute,component,phase,enc_seqlen,mbs,time_ms\n1,none,encoder,forward,16,1,1\n",
         1, "dec_seqlen", "missing required column"},
        {"wrong field count", timing_header + "1,none,encoder,forward,16,0,1\n", 2, "", "expected 8 fields"},
        {"unterminated quote", timing_header + "1,none,\"encoder,forward,16,0,1,1\n", 2, "",
         "unterminated quoted field"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.what);
        const auto e = catch_input_error([&] { (void)make(c.timing); });
        CHECK(e.file() == "timing.csv");
        CHECK(e.line() == c.line);
        CHECK(e.column() == c.column);
        const std::string msg = e.what();
        CHECK(msg.find(c.message_part) != std::string::npos);
        CHECK(msg.find("timing.csv:" + std::to_string(c.line)) != std::string::npos);
    }
    // Activation and model-state files are checked the same way.
    auto e = catch_input_error(
        [&] { (void)make(small_timing(), activation_header + "1,none,encoder,total,16,0,1,1\n"); });
    CHECK(e.file() == "activation.csv");
    CHECK(e.line() == 2);
    CHECK(e.column() == "kind");
    CHECK(std::string(e.what()).find("stored, peak") != std::string::npos);
    e = catch_input_error([&] { (void)make(small_timing(), activation_header + "1,none,encoder,peak,16,0,1,-3\n"); });
    CHECK(e.column() == "memory_mb");
    e = catch_input_error([&] { (void)make(small_timing(), activation_header, state_header + "1,none,encoder,x\n"); });
    CHECK(e.file() == "model_state.csv");
    CHECK(e.line() == 2);
    CHECK(e.column() == "memory_mb");
    e = catch_input_error([&] { (void)make(small_timing(), activation_header, "tp,component,memory_mb\n"); });
    CHECK(e.column() == "recompute");
    e = catch_input_error([&] { (void)make(small_timing(), activation_header, state_header + "8,lots,encoder,1\n"); });
    CHECK(e.column() == "recompute");
}

TEST_CASE("profile: parse() from CSV text names the sources after the model") {
    const auto m = profile_cost_model::parse(small_timing(), small_activation(), small_state(),
                                             interpolation_mode::linear, "toy");
    CHECK(m.name() == "toy");
    CHECK(m.evaluate(q(2, 24)).forward_ms.value() == doctest::Approx(2.75));
    const auto e = catch_input_error([] {
        (void)profile_cost_model::parse(small_timing(), activation_header + "1,none,encoder,stored,16,0,1,-1\n",
                                        small_state(), interpolation_mode::linear, "toy");
    });
    CHECK(e.file() == "toy_activation.csv");
    CHECK(e.line() == 2);
    CHECK(e.column() == "memory_mb");
}

TEST_CASE("profile: load() from a directory; unknown names list the models found") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("pipeplan_profile_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; };
    write("tiny_timing.csv", small_timing());
    write("tiny_activation.csv", small_activation());
    write("tiny_model_state.csv", small_state());
    write("other_timing.csv", small_timing());  // incomplete: no activation / model state

    const auto m = profile_cost_model::load(dir, "tiny", interpolation_mode::linear);
    CHECK(m.name() == "tiny");
    CHECK(m.evaluate(q(2, 24)).forward_ms.value() == doctest::Approx(2.75));
    CHECK(profile_cost_model::available_models(dir) == std::vector<std::string>{"other", "tiny"});
    try {
        (void)profile_cost_model::load(dir, "huge");
        FAIL("no exception");
    } catch (const pipeplan::invalid_argument& e) {
        const std::string msg = e.what();
        CHECK(msg.find("'huge'") != std::string::npos);
        CHECK(msg.find("valid: other, tiny") != std::string::npos);
    }
    // A model with a missing file: input_error naming that file.
    const auto e = catch_input_error([&] { (void)profile_cost_model::load(dir, "other"); });
    CHECK(e.file().find("other_activation.csv") != std::string::npos);
    // A file that is not a valid profile: the error names it.
    write("broken_timing.csv", timing_header + "1,none,encoder,forward,16,0,1,oops\n");
    write("broken_activation.csv", small_activation());
    write("broken_model_state.csv", small_state());
    const auto b = catch_input_error([&] { (void)profile_cost_model::load(dir, "broken"); });
    CHECK(b.file().find("broken_timing.csv") != std::string::npos);
    CHECK(b.line() == 2);
    CHECK_THROWS_AS((void)profile_cost_model::load(dir / "nope", "tiny"), pipeplan::invalid_argument);
    fs::remove_all(dir);
}

TEST_CASE("tabulate: a dense table equal to evaluate() cell by cell") {
    const auto m = make(small_timing(), small_activation(), small_state());
    layer_query base = q(1, 16);
    const auto t = pipeplan::tabulate(m, base, 4, {8, 16, 24, 32, 40});
    CHECK(t.max_mbs() == 4);
    CHECK(t.seqlens_tokens().size() == 5);
    for (int mbs = 1; mbs <= 4; ++mbs)
        for (std::size_t i = 0; i < 5; ++i) {
            REQUIRE(t.contains(mbs, i));
            const auto want = m.evaluate(q(mbs, t.seqlens_tokens()[i]));
            const auto& got = t.at(mbs, i);
            CHECK(got.forward_ms == want.forward_ms);
            CHECK(got.backward_ms == want.backward_ms);
            CHECK(got.stored_mb == want.stored_mb);
            CHECK(got.peak_mb == want.peak_mb);
        }
    CHECK(t.at(2, 2).forward_ms.value() == doctest::Approx(2.75));
    CHECK(t.at(4, 0).forward_ms.status() == estimate_status::out_of_profiled_range);
    CHECK(t.at(1, 4).forward_ms.status() == estimate_status::out_of_profiled_range);
    CHECK_FALSE(t.contains(0, 0));
    CHECK_FALSE(t.contains(5, 0));
    CHECK_FALSE(t.contains(1, 5));
    CHECK_THROWS_AS((void)pipeplan::tabulate(m, base, 0, {16}), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)pipeplan::tabulate(m, base, 2, {16, 0}), pipeplan::invalid_argument);
}
