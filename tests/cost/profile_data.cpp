// Profile cost model on the real A100 profiles (../shared/data/cost_models): golden values (GPT-6.7B
// encoder, tp 2, mbs 3, seqlen 600: 2.7103 ms forward), exact values at every profiled point, ragged edges, range and below-grid policy.
// Skipped when the shared data is absent.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <tuple>
#include <vector>

#include "pipeplan/core/csv.hpp"
#include "pipeplan/cost/profile.hpp"
#include "profile_models.hpp"
#include "support.hpp"

using pipeplan::component;
using pipeplan::estimate_status;
using pipeplan::interpolation_mode;
using pipeplan::layer_query;
using pipeplan::profile_cost_model;
using pipeplan::recompute_mode;
using pipeplan::test::profile_model;

namespace {

std::filesystem::path profiles_dir() { return *pipeplan::test::shared_data_dir() / "cost_models"; }

layer_query q(int tp, component c, int mbs, int s, int d = 0, recompute_mode r = recompute_mode::none) {
    return {.comp = c, .mbs = mbs, .seqlen_tokens = s, .dec_seqlen_tokens = d, .tp = tp, .recompute = r};
}

// Independent reference: the median of the CSV rows sharing one key, straight from the file.
// key = tp, recompute, component, phase/kind, enc_seqlen, dec_seqlen, mbs
using key = std::tuple<int, std::string, std::string, std::string, int, int, int>;
std::map<key, double> medians(const std::filesystem::path& file, const char* kind_column, const char* value_column) {
    const auto t = pipeplan::csv_table::read(file);
    std::map<key, std::vector<double>> groups;
    for (std::size_t r = 0; r < t.rows(); ++r)
        groups[key{static_cast<int>(t.integer(r, t.column("tp"))), std::string(t.cell(r, t.column("recompute"))),
                   std::string(t.cell(r, t.column("component"))), std::string(t.cell(r, t.column(kind_column))),
                   static_cast<int>(t.integer(r, t.column("enc_seqlen"))),
                   static_cast<int>(t.integer(r, t.column("dec_seqlen"))),
                   static_cast<int>(t.integer(r, t.column("mbs")))}]
            .push_back(t.number(r, t.column(value_column)));
    std::map<key, double> out;
    for (auto& [k, v] : groups) {
        std::sort(v.begin(), v.end());
        out[k] = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    }
    return out;
}

}  // namespace

TEST_CASE("profile data: golden values at unprofiled points (--interpolation linear)" * PIPEPLAN_NEEDS_DATA()) {
    const auto& gpt = profile_model("gpt_6.7b", interpolation_mode::linear);
    CHECK(gpt.evaluate(q(2, component::encoder, 3, 600)).forward_ms.value() == doctest::Approx(2.7103).epsilon(1e-4));
    CHECK(gpt.evaluate(q(2, component::encoder, 5, 1500)).backward_ms.value() == doctest::Approx(18.068).epsilon(1e-4));
    const auto& t5 = profile_model("t5_11b", interpolation_mode::linear);
    // Median of the repeated encoder measurements (one per decoder length in the profiler).
    CHECK(t5.evaluate(q(4, component::encoder, 2, 512)).forward_ms.value() == doctest::Approx(1.93).epsilon(1e-9));
    CHECK_FALSE(gpt.is_encoder_decoder());
    CHECK(t5.is_encoder_decoder());
    CHECK(gpt.tp_degrees() == std::vector<int>{1, 2, 4, 8});
}

TEST_CASE("profile data: every profiled point is returned exactly (all components, both models)" *
          PIPEPLAN_NEEDS_DATA()) {
    for (const char* name : {"gpt_6.7b", "t5_11b"}) {
        CAPTURE(name);
        const std::string prefix = (profiles_dir() / name).string();
        const auto timing = medians(prefix + "_timing.csv", "phase", "time_ms");
        const auto activation = medians(prefix + "_activation.csv", "kind", "memory_mb");
        for (auto mode : {interpolation_mode::linear, interpolation_mode::recommended}) {
            const auto& m = profile_model(name, mode);
            std::size_t checked = 0, mismatches = 0;
            auto check = [&](const std::map<key, double>& ref, bool is_time) {
                for (const auto& [k, want] : ref) {
                    const auto& [tp, rc, comp, kind, enc, dec, mbs] = k;
                    const layer_query query = q(tp, pipeplan::parse_component(comp), mbs, enc, dec,
                                                pipeplan::parse_recompute(rc));
                    const auto c = m.evaluate(query);
                    const auto& got = is_time ? (kind == "forward" ? c.forward_ms : c.backward_ms)
                                              : (kind == "stored" ? c.stored_mb : c.peak_mb);
                    ++checked;
                    if (!got.ok() || got.value_or(0) != want) ++mismatches;
                }
            };
            check(timing, true);
            check(activation, false);
            CHECK(checked == timing.size() + activation.size());
            CHECK(checked > 1000);
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("profile data: components without a metric are unsupported; parameter memory" * PIPEPLAN_NEEDS_DATA()) {
    const auto& gpt = profile_model("gpt_6.7b", interpolation_mode::recommended);
    const auto head = gpt.evaluate(q(2, component::postprocess, 4, 512));
    CHECK(head.forward_ms.ok());
    CHECK(head.backward_ms.ok());
    CHECK(head.stored_mb.status() == estimate_status::unsupported);
    CHECK(head.peak_mb.status() == estimate_status::unsupported);
    CHECK(gpt.evaluate(q(2, component::decoder, 4, 512, 64)).forward_ms.status() == estimate_status::unsupported);
    CHECK(gpt.evaluate(q(2, component::embedding, 4, 512)).forward_ms.status() == estimate_status::unsupported);
    CHECK(gpt.evaluate(q(3, component::encoder, 4, 512)).forward_ms.status() == estimate_status::unsupported);
    CHECK(gpt.parameter_mb(component::encoder, 2, recompute_mode::none).value() == 201.4111);
    CHECK(gpt.parameter_mb(component::embedding, 8, recompute_mode::selective).value() == 62.2913);
    CHECK(gpt.parameter_mb(component::decoder, 2, recompute_mode::none).status() == estimate_status::unsupported);
    const auto& t5 = profile_model("t5_11b", interpolation_mode::recommended);
    CHECK(t5.parameter_mb(component::decoder, 4, recompute_mode::full).value() == 134.32);
    CHECK(t5.parameter_mb(component::embedding, 1, recompute_mode::none).value() == 82.58);
    // T5's LM head is keyed by the decoder length; the encoder length does not matter.
    const auto a = t5.evaluate(q(4, component::postprocess, 2, 16, 128)).forward_ms;
    const auto b = t5.evaluate(q(4, component::postprocess, 2, 4096, 128)).forward_ms;
    REQUIRE(a.ok());
    CHECK(a == b);
}

TEST_CASE("profile data: ragged edges, out of range, below the grid" * PIPEPLAN_NEEDS_DATA()) {
    for (auto mode : pipeplan::all_interpolation_modes) {
        CAPTURE(pipeplan::to_string(mode));
        const auto& gpt = profile_model("gpt_6.7b", mode);
        const auto& t5 = profile_model("t5_11b", mode);
        // GPT tp 2: at s 8192 only mbs 1 and 2 were profiled (out of memory above).
        CHECK(gpt.evaluate(q(2, component::encoder, 2, 8192)).forward_ms.ok());
        CHECK(gpt.evaluate(q(2, component::encoder, 3, 8192)).forward_ms.status() ==
              estimate_status::out_of_profiled_range);
        CHECK(gpt.evaluate(q(2, component::encoder, 4096, 16)).forward_ms.status() ==
              estimate_status::out_of_profiled_range);
        CHECK(gpt.evaluate(q(2, component::encoder, 1, 8193)).forward_ms.status() ==
              estimate_status::out_of_profiled_range);
        CHECK(t5.evaluate(q(4, component::decoder, 1, 512, 9000)).forward_ms.status() ==
              estimate_status::out_of_profiled_range);
        // Every query over a dense sweep is either a finite positive number bounded by the
        // profile's largest value, or a status: never NaN, never huge.
        for (int tp : {1, 8})
            for (auto c : {component::encoder, component::postprocess})
                for (int mbs = 1; mbs <= 40; mbs += 3)
                    for (int s = 100; s <= 8192; s += 450) {
                        const auto cost = gpt.evaluate(q(tp, c, mbs, s));
                        if (cost.forward_ms.ok()) {
                            CHECK(std::isfinite(cost.forward_ms.value()));
                            CHECK(cost.forward_ms.value() > 0);
                            CHECK(cost.forward_ms.value() < 1e5);
                        } else {
                            CHECK(cost.forward_ms.status() == estimate_status::out_of_profiled_range);
                        }
                    }
    }
    // Below the smallest profiled length (16): linear and recommended never give <= 0.
    for (auto mode : {interpolation_mode::linear, interpolation_mode::recommended}) {
        const auto& gpt = profile_model("gpt_6.7b", mode);
        const auto& t5 = profile_model("t5_11b", mode);
        for (int tp : {1, 2, 4, 8})
            for (auto r : pipeplan::all_recompute_modes)
                for (int mbs = 1; mbs <= 8; ++mbs)
                    for (int s = 1; s < 16; s += 2) {
                        for (const auto& cost : {gpt.evaluate(q(tp, component::encoder, mbs, s, 0, r)),
                                                 gpt.evaluate(q(tp, component::postprocess, mbs, s, 0, r)),
                                                 t5.evaluate(q(tp, component::encoder, mbs, s, 0, r)),
                                                 t5.evaluate(q(tp, component::decoder, mbs, s, s, r)),
                                                 t5.evaluate(q(tp, component::postprocess, mbs, s, s, r))}) {
                            CHECK(cost.forward_ms.value() > 0);
                            CHECK(cost.backward_ms.value() > 0);
                        }
                    }
    }
}

TEST_CASE("profile data: a prepared query and its rows (evaluate_row) equal evaluate() bit for bit at every mbs (all modes, both models)" *
          PIPEPLAN_NEEDS_DATA()) {
    // Lengths on, between, below and above the grid points; mbs 1..3000 crosses every mbs cell
    // and leaves the grid (out of range), and 0 / negative lengths are unsupported.
    const std::vector<int> lengths{-3, 0, 1, 7, 16, 17, 31, 32, 100, 128, 129, 600, 1000, 1024, 1500, 4000, 4096, 8191, 8192, 9000};
    std::vector<int> sizes;
    for (int m = 1; m <= 70; ++m) sizes.push_back(m);
    for (int m : {100, 127, 128, 129, 255, 256, 700, 1024, 1500, 2048, 2049, 3000}) sizes.push_back(m);
    const auto same = [](const pipeplan::estimate<double>& a, const pipeplan::estimate<double>& b) {
        return a.status() == b.status() && (!a.ok() || a.value_or(0) == b.value_or(0));
    };
    const std::vector<std::pair<int, std::size_t>> row_pieces{{1, 23}, {24, 47}, {3, 2}, {64, 1}, {120, 20}, {2040, 12}};
    for (const char* name : {"gpt_6.7b", "t5_11b"}) {
        for (const auto mode : pipeplan::all_interpolation_modes) {
            CAPTURE(name);
            CAPTURE(static_cast<int>(mode));
            const auto& m = profile_model(name, mode);
            std::size_t compared = 0, row_compared = 0, ok = 0, mismatches = 0;
            for (const int tp : {1, 2, 3, 4, 8})
                for (const auto r : pipeplan::all_recompute_modes)
                    for (const auto c : pipeplan::all_components)
                        for (std::size_t i = 0; i < lengths.size(); i += (c == component::decoder ? 3 : 1))
                            for (const int d : c == component::decoder ? lengths : std::vector<int>{0, 64}) {
                                profile_cost_model::prepared_query p;
                                layer_query query = q(tp, c, 1, lengths[i], d, r);
                                m.prepare(query, p);
                                for (const int mbs : sizes) {
                                    query.mbs = mbs;
                                    const auto want = m.evaluate(query);
                                    const auto got = m.evaluate(p, mbs);
                                    ++compared;
                                    ok += want.forward_ms.ok() ? 1 : 0;
                                    if (!same(want.forward_ms, got.forward_ms) || !same(want.backward_ms, got.backward_ms) ||
                                        !same(want.stored_mb, got.stored_mb) || !same(want.peak_mb, got.peak_mb))
                                        ++mismatches;
                                }
                                // Rows of sizes at once (evaluate_row), in pieces that start inside
                                // and on mbs cells, up to and past the grid's largest mbs (2048).
                                profile_cost_model::prepared_query pr;
                                m.prepare(query, pr);
                                for (const auto& [first, n] : row_pieces) {
                                    std::vector<pipeplan::layer_cost> row(n);
                                    m.evaluate_row(pr, first, n, row.data());
                                    for (std::size_t k = 0; k < n; ++k) {
                                        query.mbs = first + static_cast<int>(k);
                                        const auto want = m.evaluate(query);
                                        ++row_compared;
                                        if (!same(want.forward_ms, row[k].forward_ms) ||
                                            !same(want.backward_ms, row[k].backward_ms) ||
                                            !same(want.stored_mb, row[k].stored_mb) || !same(want.peak_mb, row[k].peak_mb))
                                            ++mismatches;
                                    }
                                }
                            }
            CHECK(compared > 100000);
            CHECK(row_compared > 100000);
            CHECK(ok > compared / 10);
            CHECK(mismatches == 0);
        }
    }
}
