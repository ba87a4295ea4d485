// The analytic roofline model (cost/analytic.hpp), hardware and model presets.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "pipeplan/cost/analytic.hpp"
#include "pipeplan/cost/concept.hpp"
#include "pipeplan/cost/hardware.hpp"
#include "pipeplan/cost/profile.hpp"
#include "pipeplan/cost/transformer_shape.hpp"
#include "support.hpp"

using namespace pipeplan;

static_assert(cost_model<analytic_cost_model>);

namespace {
layer_query enc(int mbs, int s, int tp = 1, recompute_mode r = recompute_mode::none) {
    return {component::encoder, mbs, s, 0, tp, r};
}
double fwd_flops(const analytic_cost_model& m, const layer_query& q) { return *m.flops(q, time_phase::forward); }
double bwd_flops(const analytic_cost_model& m, const layer_query& q) { return *m.flops(q, time_phase::backward); }
}  // namespace

TEST_CASE("analytic: GPT-6.7B layer FLOPs against a hand calculation") {
    const auto m = make_analytic_model("gpt-6.7b");
    // b = 2, s = 1024, h = 4096, a = 32, d = 128, F = 16384, tp 1 (2 FLOPs per multiply-add):
    //   QKV          2 · (b·s) · h · 3h         = 2·2048·4096·12288   = 206,158,430,208
    //   Q·K^T        2 · (b·a) · s · d · s      = 2·64·1024·128·1024  =  17,179,869,184
    //   P·V          same                                             =  17,179,869,184
    //   projection   2 · 2048 · 4096 · 4096                           =  68,719,476,736
    //   FFN up       2 · 2048 · 4096 · 16384                          = 274,877,906,944
    //   FFN down     same                                             = 274,877,906,944
    //   total = 858,993,459,200 = 24·b·s·h² + 4·b·s²·h  (Narayanan et al. 2021)
    const double forward = 858'993'459'200.0;
    CHECK(fwd_flops(m, enc(2, 1024)) == forward);
    const double b = 2, s = 1024, h = 4096;
    CHECK(forward == 24 * b * s * h * h + 4 * b * s * s * h);
    // Backward: data and weight gradients, 2x forward; selective recompute re-runs Q·K^T and
    // P·V (4·b·s²·h); full recompute re-runs the whole forward.
    CHECK(bwd_flops(m, enc(2, 1024)) == 2 * forward);
    CHECK(bwd_flops(m, enc(2, 1024, 1, recompute_mode::selective)) == 2 * forward + 4 * b * s * s * h);
    CHECK(bwd_flops(m, enc(2, 1024, 1, recompute_mode::full)) == 3 * forward);
    // Tensor parallelism divides every GEMM.
    CHECK(fwd_flops(m, enc(2, 1024, 4)) == forward / 4);
    // LM head: 2 · (b·s) · h · V_padded = 2·1024·4096·50304 = 421,980,536,832.
    const layer_query head{component::postprocess, 1, 1024, 0, 1, recompute_mode::none};
    CHECK(fwd_flops(m, head) == 421'980'536'832.0);
    CHECK(bwd_flops(m, head) == 2 * 421'980'536'832.0);
}

TEST_CASE("analytic: T5-11B decoder layer with cross-attention FLOPs by hand") {
    const auto m = make_analytic_model("t5-11b");
    // b = 1, encoder length 512, decoder length 128, h = 1024, 128 heads of d = 128 (a·d = 16384),
    // F = 65536, tp 1:
    //   self QKV      2·128·1024·49152       = 12,884,901,888
    //   self QK^T, PV 2 · 2·128·128·128·128  =  1,073,741,824
    //   self proj     2·128·16384·1024       =  4,294,967,296
    //   cross Q       2·128·1024·16384       =  4,294,967,296
    //   cross KV      2·512·1024·32768       = 34,359,738,368
    //   cross QK^T,PV 2 · 2·128·128·128·512  =  4,294,967,296
    //   cross proj    2·128·16384·1024       =  4,294,967,296
    //   FFN up+down   2 · 2·128·1024·65536   = 34,359,738,368
    //   total                                = 99,857,989,632
    const layer_query q{component::decoder, 1, 512, 128, 1, recompute_mode::none};
    CHECK(fwd_flops(m, q) == 99'857'989'632.0);
    CHECK(bwd_flops(m, q) == 2 * 99'857'989'632.0);
}

TEST_CASE("analytic: GQA and gated FFN FLOPs (LLaMA-3-8B) by hand") {
    const auto m = make_analytic_model("llama-3-8b");
    // b = 1, s = 2048, h = 4096, 32 query heads, 8 KV heads, d = 128, F = 14336 (SwiGLU):
    //   QKV         2·2048·4096·(4096 + 2·1024)   = 103,079,215,104
    //   QK^T, PV    2 · 2·32·2048·128·2048         =  68,719,476,736
    //   output      2·2048·4096·4096               =  68,719,476,736
    //   gate + up   2·2048·4096·(2·14336)          = 481,036,337,152
    //   down        2·2048·14336·4096              = 240,518,168,576
    //   total                                      = 962,072,674,304
    CHECK(fwd_flops(m, enc(1, 2048)) == 962'072'674'304.0);
}

TEST_CASE("analytic: activation memory equals Korthikanti et al.'s closed forms (GPT shape)") {
    const auto m = make_analytic_model("gpt-6.7b");
    const double h = 4096, a = 32;
    for (int tp : {1, 2, 4, 8})
        for (int b : {1, 3})
            for (int s : {16, 512, 2048, 8192}) {
                CAPTURE(tp);
                CAPTURE(b);
                CAPTURE(s);
                const double sbh = s * b * h, t = tp;
                // Without sequence parallelism: s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes.
                const double none = sbh * (10 + 24 / t + 5 * a * s / (h * t)) / 1e6;
                if (tp == 1) CHECK(none == doctest::Approx(sbh * (34 + 5 * a * s / h) / 1e6).epsilon(1e-12));
                CHECK(m.evaluate(enc(b, s, tp)).stored_mb.value() == doctest::Approx(none).epsilon(1e-12));
                // Selective recomputation drops the 5as/h term; full keeps only the input 2sbh.
                CHECK(m.evaluate(enc(b, s, tp, recompute_mode::selective)).stored_mb.value() ==
                      doctest::Approx(sbh * (10 + 24 / t) / 1e6).epsilon(1e-12));
                CHECK(m.evaluate(enc(b, s, tp, recompute_mode::full)).stored_mb.value() ==
                      doctest::Approx(2 * sbh / 1e6).epsilon(1e-12));
            }
}

TEST_CASE("analytic: activation memory of a model without dropout, with gated FFN (LLaMA-2-7B)") {
    const auto m = make_analytic_model("llama-2-7b");
    const double h = 4096, a = 32, F = 11008;
    const int b = 2, s = 1024;
    for (int tp : {1, 2, 4}) {
        const double t = tp, sb = s * b;
        // replicated norm/attention/MLP inputs 8·sbh; Q, K, V, projection input 8·sbh/t;
        // SwiGLU input (gate and up) 4·sb·F/t and output 2·sb·F/t; softmax output 2·a·s²·b/t.
        const double expected = (8 * sb * h + 8 * sb * h / t + 6 * sb * F / t + 2 * a * s * s * b / t) / 1e6;
        CHECK(m.evaluate(enc(b, s, tp)).stored_mb.value() == doctest::Approx(expected).epsilon(1e-12));
    }
}

TEST_CASE("analytic: peak = stored + working memory, per recomputation mode") {
    const auto m = make_analytic_model("gpt-6.7b");
    const auto q = enc(2, 2048);
    const auto none = m.evaluate(q);
    const auto raw = m.activation_raw(q);
    CHECK(none.peak_mb.value() == doctest::Approx(raw.stored_mb + raw.working_mb));
    // Working memory: the larger backward gradient pair, here 2 x the score matrix 2·2·b·a·s²
    // (> 2 x the FFN intermediate 2·2·s·b·F).
    CHECK(raw.working_mb == doctest::Approx(4.0 * 2 * 32 * 2048.0 * 2048 / 1e6));
    // Recomputation trades stored for rematerialised memory: the peak never falls below the
    // no-recompute peak, the stored memory does.
    for (recompute_mode r : {recompute_mode::selective, recompute_mode::full}) {
        const auto c = m.evaluate({component::encoder, 2, 2048, 0, 1, r});
        CHECK(c.stored_mb.value() < none.stored_mb.value());
        CHECK(c.peak_mb.value() >= none.peak_mb.value());
    }
}

TEST_CASE("analytic: roofline times") {
    const auto m = make_analytic_model("gpt-6.7b");
    // More work never takes less time; the backward costs more than the forward.
    double prev = 0;
    for (int s : {16, 64, 256, 1024, 4096}) {
        const auto c = m.evaluate(enc(2, s));
        CHECK(c.forward_ms.value() > prev);
        CHECK(c.backward_ms.value() > c.forward_ms.value());
        prev = c.forward_ms.value();
    }
    // Full recomputation adds exactly one forward to the backward (same default factors).
    const auto none = m.evaluate(enc(4, 1024));
    const auto full = m.evaluate(enc(4, 1024, 1, recompute_mode::full));
    const auto sel = m.evaluate(enc(4, 1024, 1, recompute_mode::selective));
    CHECK(full.backward_ms.value() == doctest::Approx(none.backward_ms.value() + none.forward_ms.value()));
    CHECK(sel.backward_ms.value() > none.backward_ms.value());
    CHECK(sel.backward_ms.value() < full.backward_ms.value());
    CHECK(full.forward_ms.value() == none.forward_ms.value());

    // A large layer's dense GEMMs are compute-bound: the compute term is exactly their FLOPs
    // (24·b·s·h²) / peak. The unfused attention GEMMs (Q·K^T, P·V: intensity about d·s/(s + 2d)
    // < 128 FLOP/B, below the A100 ridge of 312e12·0.75 / (1555e9·0.8) = 188 FLOP/B) are
    // memory-bound. The time never beats FLOPs / (peak · efficiency).
    const auto big = enc(8, 4096);
    const auto big_terms = m.terms(big, time_phase::forward);
    REQUIRE(big_terms.has_value());
    CHECK(big_terms->compute_ms == doctest::Approx(24.0 * 8 * 4096 * 4096.0 * 4096 / 312e12 * 1e3));
    CHECK(m.evaluate(big).forward_ms.value() >= fwd_flops(m, big) / (312e12 * 0.75) * 1e3);
    // A tiny one is memory-bound: no term is compute-bound at 16 tokens (weights dominate).
    CHECK(m.terms(enc(1, 16), time_phase::forward)->compute_ms == 0);

    // Roofline scaling: twice the FLOP/s and bandwidth, no overhead -> exactly half the time.
    hardware_traits fast = find_hardware("a100-40gb");
    fast.peak_tensor_flops *= 2;
    fast.memory_bandwidth_bytes_per_s *= 2;
    fast.link_bandwidth_bytes_per_s *= 2;
    time_factors no_overhead;
    no_overhead.overhead_ms_per_kernel = 0;
    const auto f = analytic_factors::uniform(no_overhead);
    const analytic_cost_model slow_m(find_transformer_shape("gpt-6.7b"), find_hardware("a100-40gb"), f);
    const analytic_cost_model fast_m(find_transformer_shape("gpt-6.7b"), fast, f);
    for (int s : {16, 512, 4096})
        for (int tp : {1, 4}) {
            const auto q = enc(2, s, tp, recompute_mode::selective);
            CHECK(fast_m.evaluate(q).forward_ms.value() == doctest::Approx(slow_m.evaluate(q).forward_ms.value() / 2));
            CHECK(fast_m.evaluate(q).backward_ms.value() ==
                  doctest::Approx(slow_m.evaluate(q).backward_ms.value() / 2));
        }
    // The time terms reproduce evaluate().
    const auto terms = m.terms(enc(2, 512, 2), time_phase::backward);
    REQUIRE(terms.has_value());
    CHECK(terms->link_ms > 0);
    CHECK(terms->time_ms(m.factors().at(component::encoder, time_phase::backward)) ==
          doctest::Approx(m.evaluate(enc(2, 512, 2)).backward_ms.value()));
}

TEST_CASE("analytic: parameter counts of the presets") {
    const auto total = [](std::string_view preset) {
        const auto m = make_analytic_model(preset);
        const auto& sh = m.shape();
        double n = sh.layers * *m.parameter_count(component::encoder, 1) + *m.parameter_count(component::embedding, 1);
        if (sh.encoder_decoder) n += sh.decoder_layers * *m.parameter_count(component::decoder, 1);
        // Untied LM head: its own weight; tied: only the final norm is extra.
        n += sh.tied_embeddings ? sh.norm_params() : *m.parameter_count(component::postprocess, 1);
        return n;
    };
    // The published (Hugging Face) parameter counts.
    CHECK(total("llama-2-7b") == 6'738'415'616.0);
    CHECK(total("llama-2-70b") == 68'976'648'192.0);
    CHECK(total("llama-3-8b") == 8'030'261'248.0);
    // GPT-6.7B layer: 12h² + 13h parameters, 2 bytes each.
    const auto gpt = make_analytic_model("gpt-6.7b");
    CHECK(*gpt.parameter_count(component::encoder, 1) == 12.0 * 4096 * 4096 + 13.0 * 4096);
    CHECK(gpt.parameter_mb(component::encoder, 1, recompute_mode::none).value() ==
          doctest::Approx((12.0 * 4096 * 4096 + 13.0 * 4096) * 2 / 1e6));
    CHECK(total("gpt-6.7b") == doctest::Approx(6.66e9).epsilon(0.01));
    // Recomputation does not change parameters; tp divides the sharded matrices.
    CHECK(gpt.parameter_mb(component::encoder, 1, recompute_mode::full).value() ==
          gpt.parameter_mb(component::encoder, 1, recompute_mode::none).value());
    CHECK(gpt.parameter_mb(component::encoder, 8, recompute_mode::none).value() ==
          doctest::Approx(gpt.parameter_mb(component::encoder, 1, recompute_mode::none).value() / 8).epsilon(0.002));
}

TEST_CASE("analytic: unsupported and invalid queries") {
    const auto gpt = make_analytic_model("gpt-6.7b");
    const auto dec = gpt.evaluate({component::decoder, 1, 512, 64, 1, recompute_mode::none});
    CHECK(dec.forward_ms.status() == estimate_status::unsupported);
    CHECK(dec.peak_mb.status() == estimate_status::unsupported);
    CHECK(gpt.parameter_mb(component::decoder, 1, recompute_mode::none).status() == estimate_status::unsupported);
    // tp must divide the heads and the FFN.
    CHECK(gpt.evaluate(enc(1, 512, 3)).forward_ms.status() == estimate_status::unsupported);
    CHECK(gpt.parameter_mb(component::encoder, 3, recompute_mode::none).status() == estimate_status::unsupported);
    // More ranks than KV heads: KV heads are replicated.
    CHECK(make_analytic_model("llama-2-70b").evaluate(enc(1, 512, 16)).forward_ms.ok());
    CHECK_THROWS_AS((void)gpt.evaluate(enc(0, 512)), invalid_argument);
    CHECK_THROWS_AS((void)gpt.evaluate(enc(1, 0)), invalid_argument);
    CHECK_THROWS_AS((void)gpt.evaluate(enc(1, 512, 0)), invalid_argument);
    CHECK_THROWS_AS((void)gpt.parameter_mb(component::encoder, 0, recompute_mode::none), invalid_argument);
    const auto t5 = make_analytic_model("t5-11b");
    CHECK(t5.is_encoder_decoder());
    CHECK_FALSE(gpt.is_encoder_decoder());
    CHECK_THROWS_AS((void)t5.evaluate({component::decoder, 1, 512, 0, 1, recompute_mode::none}), invalid_argument);
    CHECK(t5.evaluate({component::decoder, 1, 512, 32, 1, recompute_mode::none}).forward_ms.ok());
    CHECK(t5.evaluate(enc(1, 512)).forward_ms.ok());  // encoder needs no decoder length
    // Invalid factors are rejected at construction.
    time_factors bad;
    bad.compute_efficiency = 0;
    CHECK_THROWS_AS((void)gpt.with_factors(analytic_factors::uniform(bad)), invalid_argument);
}

TEST_CASE("analytic: preset and hardware names") {
    CHECK(make_analytic_model("llama-2-70b", "h100-sxm").hardware().name == "h100-sxm");
    CHECK(make_analytic_model("gpt-6.7b").hardware().peak_tensor_flops == 312e12);
    CHECK(find_hardware("h200").memory_bandwidth_bytes_per_s == 4.8e12);
    CHECK_THROWS_WITH_AS((void)make_analytic_model("gpt-7b"),
                         "unknown model preset 'gpt-7b' (valid: gpt-6.7b, t5-11b, llama-2-7b, llama-2-70b, "
                         "llama-3-8b)",
                         invalid_argument);
    CHECK_THROWS_WITH_AS((void)make_analytic_model("gpt-6.7b", "a100"),
                         "unknown hardware preset 'a100' (valid: a100-40gb, h100-sxm, h200)", invalid_argument);
    CHECK_THROWS_AS((void)find_transformer_shape(""), invalid_argument);
}

TEST_CASE("analytic: parameter memory matches the real profiles' model state" * PIPEPLAN_NEEDS_DATA()) {
    const auto dir = *test::shared_data_dir() / "cost_models";
    for (const auto& [profile, preset] : {std::pair{"gpt_6.7b", "gpt-6.7b"}, std::pair{"t5_11b", "t5-11b"}}) {
        const auto p = profile_cost_model::load(dir, profile);
        const auto a = make_analytic_model(preset);
        for (int tp : {1, 2, 4, 8})
            for (component c : {component::encoder, component::decoder}) {
                const auto measured = p.parameter_mb(c, tp, recompute_mode::none);
                if (!measured.ok()) continue;
                CAPTURE(profile);
                CAPTURE(tp);
                CHECK(a.parameter_mb(c, tp, recompute_mode::none).value() ==
                      doctest::Approx(measured.value()).epsilon(0.002));
            }
    }
}
