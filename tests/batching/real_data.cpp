// The splitter on real batches (../shared/data/lengths) and real profiles (cost_models):
// acceptance properties, the exact split against the baselines over the same order, and the two
// accounting modes checked against the layer costs by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "batching/common.hpp"
#include "batching/real_batches.hpp"
#include "pipeplan/batching.hpp"
#include "pipeplan/cost/profile.hpp"
#include "profile_models.hpp"
#include "support.hpp"

namespace pb = pipeplan::batching;
using pipeplan::component;
using pipeplan::interpolation_mode;
using pipeplan::layer_query;
using pipeplan::profile_cost_model;
using pipeplan::recompute_mode;

namespace {

using pipeplan::test::profile_model;

pb::pipeline_config gpt_config() { return pipeplan::test::make_config(4, 8, 36000, 2); }
pb::pipeline_config t5_config() { return pipeplan::test::make_config(4, 6, 36000, 4); }

void check_result(const pb::split_result& r, std::size_t n) { pipeplan::test::check_split_result(r, n, 1e-12); }

double fb(const pipeplan::layer_cost& c) { return c.forward_ms.value() + c.backward_ms.value(); }

}  // namespace

TEST_CASE("real GPT-6.7B 65,536-token batch: properties, and the exact split beats the baselines of its order" *
          PIPEPLAN_NEEDS_DATA()) {
    const auto& m = profile_model("gpt_6.7b", interpolation_mode::recommended);
    const auto batch = pipeplan::test::draw_batch("superni_gpt.csv", 65536, 42);
    REQUIRE(batch.size() > 300);
    const auto r = pb::exact_split(m, batch, gpt_config());
    check_result(r, batch.size());
    CHECK(r.limit == pb::memory_limit_kind::preferred);
    CHECK(r.recompute == recompute_mode::none);
    pb::split_options same;
    same.limit_ladder = {r.limit};
    same.recompute_ladder = {r.recompute};
    int compared = 0;
    for (int mbs : {1, 2, 4, 8}) {
        try {
            const auto f = pb::split_fixed_mbs(m, batch, gpt_config(), mbs, pb::fixed_order::sorted, same);
            check_result(f, batch.size());
            CHECK(r.objective_ms <= f.objective_ms);
            ++compared;
        } catch (const pb::split_error& e) {
            CHECK(e.kind() == pb::split_failure::stored_memory);  // the longest samples at this size
        }
        const auto d = pb::split_fixed_mbs(m, batch, gpt_config(), mbs, pb::fixed_order::dataset);
        check_result(d, batch.size());
    }
    CHECK(compared >= 2);
    for (long long tokens : {1024LL, 2048LL, 4096LL}) {
        const auto t = pb::split_token_budget(m, batch, gpt_config(), tokens, same);
        check_result(t, batch.size());
        CHECK(r.objective_ms <= t.objective_ms);
    }
    const auto p = pb::split_pack_fixed(m, batch, gpt_config(), 2, 2048);
    check_result(p, batch.size());
}

TEST_CASE("real T5-11B 65,536-token batch: properties; the default order is no worse than lexicographic" *
          PIPEPLAN_NEEDS_DATA()) {
    const auto& m = profile_model("t5_11b", interpolation_mode::recommended);
    const auto batch = pipeplan::test::draw_batch("superni_llama.csv", 65536, 42);
    const auto r = pb::exact_split(m, batch, t5_config());
    check_result(r, batch.size());
    pb::split_options lex;
    lex.order = pb::ordering_method::lexicographic;
    const auto l = pb::exact_split(m, batch, t5_config(), lex);
    check_result(l, batch.size());
    CHECK(r.objective_ms <= l.objective_ms);
    for (const auto& rec : r.per_microbatch) CHECK(rec.shape.dec_seqlen_tokens > 0);
}

TEST_CASE("mixed batches: draw_mixed_batch is mixed_batches.py, sample for sample" * PIPEPLAN_NEEDS_DATA()) {
    // benchmarks/batching/mixed_batches.py --tokens 65536 --seed 1 --share 0.25: 350 samples, 77
    // long-target ones, the first three at rows 10, 12 and 13; share 0 is draw_batch's batch.
    const auto b = pipeplan::test::draw_mixed_batch("superni_llama.csv", 65536, 1, 0.25);
    REQUIRE(b.size() == 350);
    CHECK(b[10].input_tokens == 48);
    CHECK(b[10].target_tokens == 83);
    CHECK(b[12].input_tokens == 47);
    CHECK(b[12].target_tokens == 132);
    CHECK(b[13].input_tokens == 150);
    CHECK(b[13].target_tokens == 103);
    CHECK(b[0].input_tokens == 101);
    CHECK(b[0].target_tokens == 5);
    const auto plain = pipeplan::test::draw_batch("superni_llama.csv", 65536, 1);
    const auto zero = pipeplan::test::draw_mixed_batch("superni_llama.csv", 65536, 1, 0);
    REQUIRE(plain.size() == zero.size());
    for (std::size_t i = 0; i < plain.size(); ++i) CHECK(plain[i].target_tokens == zero[i].target_tokens);
}

TEST_CASE("real T5-11B batches with long-target samples: the default order is no worse than each candidate" *
          PIPEPLAN_NEEDS_DATA()) {
    const auto& m = profile_model("t5_11b", interpolation_mode::dynapipe);
    for (const double share : {0.1, 0.25, 0.5}) {
        const auto batch = pipeplan::test::draw_mixed_batch("superni_llama.csv", 65536, 7, share);
        pb::split_options opt;
        opt.accounting = pb::accounting_mode::dynapipe;
        const auto r = pb::exact_split(m, batch, t5_config(), opt);
        check_result(r, batch.size());
        const pb::split_context<profile_cost_model> ctx(m, batch, t5_config(), opt);
        for (const auto& rung : ctx.ladder()) {
            if (rung.kind != r.limit || rung.recompute != r.recompute) continue;
            for (const auto& c : pb::automatic_candidate_orders(ctx.shapes())) {
                INFO("share " << share << " order " << c.name);
                CHECK(r.objective_ms <= pb::exact_split_ordered(ctx, c.ids, rung).objective_ms);
            }
        }
    }
}

TEST_CASE("pipeplan accounting on real profiles equals the per-device sum by hand" * PIPEPLAN_NEEDS_DATA()) {
    const auto& m = profile_model("gpt_6.7b", interpolation_mode::recommended);
    const pb::stage_cost_evaluator<profile_cost_model> ev(m, gpt_config(), pb::accounting_mode::pipeplan);
    const pb::microbatch_shape s{4, 512, 0};
    const auto c = ev.evaluate(s, recompute_mode::none).value();
    layer_query q;
    q.mbs = 4;
    q.seqlen_tokens = 512;
    q.tp = 2;
    const auto enc = m.evaluate(q);
    q.comp = component::postprocess;
    const auto head = m.evaluate(q);
    q.comp = component::embedding;
    const auto emb = m.evaluate(q);
    const double emb_ms = emb.forward_ms.value_or(0) + emb.backward_ms.value_or(0);
    const double last = 8 * fb(enc) + fb(head);
    const double first = 8 * fb(enc) + emb_ms;
    CHECK(c.time_ms == doctest::Approx(std::max(first, last)));
    CHECK(c.stored_mb >= 8 * enc.stored_mb.value() - 1e-9);
    const double params = (8 * m.parameter_mb(component::encoder, 2, recompute_mode::none).value() +
                           m.parameter_mb(component::embedding, 2, recompute_mode::none).value()) * 8;
    CHECK(ev.model_state_mb(recompute_mode::none).value() == doctest::Approx(params));
}

TEST_CASE("a prepared row of shapes is priced as shape by shape, bit for bit, one size or a row at a time (both accountings, real profiles)" *
          PIPEPLAN_NEEDS_DATA()) {
    std::size_t compared = 0, priced = 0, shared = 0, row_sizes = 0;
    for (const bool t5 : {false, true}) {
        const auto& m = profile_model(t5 ? "t5_11b" : "gpt_6.7b", interpolation_mode::recommended);
        for (const auto accounting : {pb::accounting_mode::pipeplan, pb::accounting_mode::dynapipe}) {
            const auto& model = accounting == pb::accounting_mode::dynapipe
                                    ? profile_model(t5 ? "t5_11b" : "gpt_6.7b", interpolation_mode::dynapipe)
                                    : m;
            const pb::stage_cost_evaluator<profile_cost_model> ev(model, t5 ? t5_config() : gpt_config(), accounting);
            // One memo for all the rows: T5's encoder layers and LM head share their prices
            // between the rows of one encoder (decoder) length.
            pb::stage_cost_evaluator<profile_cost_model>::part_memo memo, row_memo;
            for (const auto r : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
                for (const int e : {1, 16, 40, 100, 128, 333, 1024, 2000, 8192, 9000})
                    for (const int d : t5 ? std::vector<int>{1, 10, 16, 77, 300, 4096, 9000} : std::vector<int>{0}) {
                        pb::stage_cost_evaluator<profile_cost_model>::prepared_shape p, with_memo;
                        ev.prepare(e, d, r, p);
                        ev.prepare(e, d, r, with_memo, &memo);
                        for (const auto* row : with_memo.shared) shared += row ? 1 : 0;
                        for (int mbs = 1; mbs <= 300; mbs += mbs < 40 ? 1 : 13) {
                            const auto want = ev.evaluate(pb::microbatch_shape{mbs, e, d}, r);
                            ++compared;
                            priced += want.ok() ? 1 : 0;
                            for (const auto* row : {&p, &with_memo}) {
                                const auto got = ev.evaluate(*row, mbs);
                                REQUIRE(got.status() == want.status());
                                if (want.ok()) REQUIRE(got.value() == want.value());
                            }
                        }
                        // Rows of sizes at once (evaluate_row), in pieces, up to the first size
                        // that cannot be priced.
                        pb::stage_cost_evaluator<profile_cost_model>::prepared_shape rp;
                        ev.prepare(e, d, r, rp, &row_memo);
                        for (const auto& [first, n] : {std::pair{1, 40}, std::pair{20, 50}, std::pair{7, 3}, std::pair{200, 90}}) {
                            std::vector<pb::microbatch_cost> got(static_cast<std::size_t>(n));
                            auto failed = pipeplan::estimate_status::ok;
                            const std::size_t priced = ev.evaluate_row(rp, first, static_cast<std::size_t>(n), got.data(), failed);
                            REQUIRE(priced <= static_cast<std::size_t>(n));
                            for (std::size_t k = 0; k <= priced && k < static_cast<std::size_t>(n); ++k) {
                                const auto want = ev.evaluate(pb::microbatch_shape{first + static_cast<int>(k), e, d}, r);
                                ++row_sizes;
                                if (k == priced) {
                                    REQUIRE(!want.ok());
                                    REQUIRE(failed == want.status());
                                } else {
                                    REQUIRE(want.ok());
                                    REQUIRE(got[k] == want.value());
                                }
                            }
                        }
                    }
        }
    }
    CHECK(compared > 5000);
    CHECK(priced > compared / 10);
    CHECK(shared > 0);
    CHECK(row_sizes > 5000);
}

TEST_CASE("range-cost rows of real T5 mixed batches: each range priced alone, rows end at the first size that "
          "does not fit, monotone flags as read" * PIPEPLAN_NEEDS_DATA()) {
    const auto& m = profile_model("t5_11b", interpolation_mode::recommended);
    std::size_t ranges = 0, rising = 0, dipping = 0;
    for (const double share : {0.0, 0.25}) {
        const auto batch = pipeplan::test::draw_mixed_batch("superni_llama.csv", 65536, 3, share);
        const pb::split_context<profile_cost_model> ctx(m, batch, t5_config(), pb::split_options{});
        const auto& rung = ctx.ladder().front();
        REQUIRE(ctx.singletons_fit(rung));
        pb::detail::shape_tables<profile_cost_model> tables(ctx, rung);
        // Per (E, D): the sizes checked so far, all fitting, and whether the next one does not.
        std::map<std::pair<int, int>, std::pair<int, bool>> checked;
        const auto fits_up_to = [&](int e, int d, int mbs) {  // sizes 1 .. mbs of (E, D) all fit
            auto& [known, ended] = checked[{e, d}];
            while (!ended && known < mbs) {
                const auto p = ctx.evaluator().evaluate(pb::microbatch_shape{known + 1, e, d}, rung.recompute);
                if (p.ok() && rung.fits(p.value())) ++known;
                else ended = true;
            }
            return known >= mbs;
        };
        for (const auto& c : pb::automatic_candidate_orders(ctx.shapes())) {
            bool head_padded = false;
            long long entries = 0;
            pb::range_costs rc = pb::detail::build_range_costs(ctx, std::span<const int>(c.ids), tables, head_padded, entries);
            rc.finalize();
            REQUIRE(rc.size() == c.ids.size());
            for (std::size_t i = 0; i < rc.size(); ++i) {
                const auto row = rc.row_costs(i);
                int e = 0, d = 0;
                std::size_t len = 0;  // the first sizes whose (m, E, D) and all smaller sizes fit
                for (std::size_t k = i; k < c.ids.size(); ++k) {
                    const auto& s = ctx.shapes()[static_cast<std::size_t>(c.ids[k])];
                    e = std::max(e, s.seqlen_tokens);
                    d = std::max(d, s.dec_seqlen_tokens);
                    const int mbs = static_cast<int>(k - i) + 1;
                    if (!fits_up_to(e, d, mbs)) break;
                    const auto p = ctx.evaluator().evaluate(pb::microbatch_shape{mbs, e, d}, rung.recompute);
                    REQUIRE(row.size() > len);
                    REQUIRE(row[len] == p.value().time_ms);
                    ++len;
                }
                REQUIRE(row.size() == len);
                ranges += len;
                const bool up = std::is_sorted(row.begin(), row.end());
                REQUIRE(rc.monotone(i) == up);
                (up ? rising : dipping) += 1;
            }
        }
    }
    CHECK(ranges > 10000);
    CHECK(rising > 0);
    CHECK(dipping > 0);
}

TEST_CASE("the profile model's canonical query drops the lengths a component's prices ignore (T5)" * PIPEPLAN_NEEDS_DATA()) {
    const auto& m = profile_model("t5_11b", interpolation_mode::recommended);
    layer_query q;
    q.mbs = 3;
    q.seqlen_tokens = 200;
    q.dec_seqlen_tokens = 77;
    q.tp = 4;
    q.comp = component::encoder;
    CHECK(m.canonical_query(q).seqlen_tokens == 200);
    CHECK(m.canonical_query(q).dec_seqlen_tokens == 0);
    q.comp = component::decoder;
    CHECK(m.canonical_query(q).seqlen_tokens == 200);
    CHECK(m.canonical_query(q).dec_seqlen_tokens == 77);
    q.comp = component::postprocess;
    CHECK(m.canonical_query(q).seqlen_tokens == 0);
    CHECK(m.canonical_query(q).dec_seqlen_tokens == 77);
    // The embedding has no grid: unsupported whatever its lengths, so both are dropped.
    q.comp = component::embedding;
    CHECK(m.canonical_query(q).seqlen_tokens == 0);
    CHECK(m.canonical_query(q).dec_seqlen_tokens == 0);
    CHECK(m.evaluate(q).forward_ms.status() == pipeplan::estimate_status::unsupported);
    for (const component c : {component::encoder, component::postprocess}) {
        q.comp = c;
        layer_query other = q;
        other.seqlen_tokens = c == component::postprocess ? 4000 : 200;
        other.dec_seqlen_tokens = c == component::encoder ? 3000 : 77;
        const pipeplan::layer_cost a = m.evaluate(q), b = m.evaluate(other);
        REQUIRE(a.forward_ms.ok());
        CHECK(a.forward_ms.value() == b.forward_ms.value());
        CHECK(a.backward_ms.value() == b.backward_ms.value());
    }
}

TEST_CASE("dynapipe accounting on real profiles follows the published formulas" * PIPEPLAN_NEEDS_DATA()) {
    SUBCASE("GPT") {
        const auto& m = profile_model("gpt_6.7b", interpolation_mode::dynapipe);
        const pb::stage_cost_evaluator<profile_cost_model> ev(m, gpt_config(), pb::accounting_mode::dynapipe);
        layer_query q;
        q.mbs = 3;
        q.seqlen_tokens = 200;
        q.tp = 2;
        const auto enc = m.evaluate(q);
        q.comp = component::postprocess;
        const auto head = m.evaluate(q);
        const auto c = ev.evaluate({3, 200, 0}, recompute_mode::none).value();
        CHECK(c.time_ms == doctest::Approx(8 * fb(enc) + fb(head)));
        CHECK(c.stored_mb == doctest::Approx(8 * enc.stored_mb.value()));
        CHECK(c.peak_mb == doctest::Approx(enc.peak_mb.value() + 7 * enc.stored_mb.value()));
        const double states = (m.parameter_mb(component::embedding, 2, recompute_mode::none).value() +
                               8 * m.parameter_mb(component::encoder, 2, recompute_mode::none).value()) * 8;
        CHECK(ev.model_state_mb(recompute_mode::none).value() == doctest::Approx(states));
    }
    SUBCASE("T5, C = 1 and C = 2") {
        const auto& m = profile_model("t5_11b", interpolation_mode::dynapipe);
        auto cfg = t5_config();
        layer_query q;
        q.mbs = 2;
        q.seqlen_tokens = 304;
        q.dec_seqlen_tokens = 40;
        q.tp = 4;
        const auto enc = m.evaluate(q);
        q.comp = component::decoder;
        const auto dec = m.evaluate(q);
        q.comp = component::postprocess;
        const auto head = m.evaluate(q);
        const double enc_t = 6 * fb(enc), dec_t = 6 * fb(dec) + fb(head);
        const pb::stage_cost_evaluator<profile_cost_model> ev1(m, cfg, pb::accounting_mode::dynapipe);
        const auto c1 = ev1.evaluate({2, 304, 40}, recompute_mode::none).value();
        CHECK(c1.time_ms == doctest::Approx(std::max(enc_t, dec_t)));
        CHECK(c1.stored_mb == doctest::Approx(std::max(6 * enc.stored_mb.value(), 6 * dec.stored_mb.value())));
        // DynaPipe's peak: the larger layer peak on top of L - 1 of the larger stored layers.
        const double stored1 = std::max(enc.stored_mb.value(), dec.stored_mb.value());
        CHECK(c1.peak_mb == doctest::Approx(std::max(enc.peak_mb.value(), dec.peak_mb.value()) + 5 * stored1));
        cfg.virtual_chunks = 2;
        const pb::stage_cost_evaluator<profile_cost_model> ev2(m, cfg, pb::accounting_mode::dynapipe);
        const auto c2 = ev2.evaluate({2, 304, 40}, recompute_mode::none).value();
        CHECK(c2.time_ms == doctest::Approx(enc_t + dec_t));
        // C > 1: a device holds encoder and decoder chunks, (encoder + decoder) x C / 2 per layer.
        const double stored2 = enc.stored_mb.value() + dec.stored_mb.value();
        CHECK(c2.stored_mb == doctest::Approx(6 * stored2));
        CHECK(c2.peak_mb == doctest::Approx(std::max(enc.peak_mb.value(), dec.peak_mb.value()) + 5 * stored2));
        const double states = (m.parameter_mb(component::embedding, 4, recompute_mode::none).value() +
                               6 * std::max(m.parameter_mb(component::encoder, 4, recompute_mode::none).value(),
                                            m.parameter_mb(component::decoder, 4, recompute_mode::none).value())) * 8;
        CHECK(ev1.model_state_mb(recompute_mode::none).value() == doctest::Approx(states));
    }
}

TEST_CASE("real batches: exact split in dynapipe accounting and with data-parallel balancing" * PIPEPLAN_NEEDS_DATA()) {
    const auto& m = profile_model("gpt_6.7b", interpolation_mode::dynapipe);
    const auto batch = pipeplan::test::draw_batch("superni_gpt.csv", 131072, 7);
    auto cfg = gpt_config();
    cfg.dp = 4;
    pb::split_options opt;
    opt.accounting = pb::accounting_mode::dynapipe;
    auto r = pb::exact_split(m, batch, cfg, opt);
    check_result(r, batch.size());
    pb::balance_result(r);
    REQUIRE(r.dp_groups.size() == 4);
    std::vector<double> t;
    for (const auto& rec : r.per_microbatch) t.push_back(rec.cost.time_ms);
    CHECK(*std::max_element(r.dp_group_ms.begin(), r.dp_group_ms.end()) <= pb::balance_lpt(t, 4).max_ms());
}

TEST_CASE("a sample longer than the profiles, and the maximum length that truncates it" * PIPEPLAN_NEEDS_DATA()) {
    const auto& m = profile_model("gpt_6.7b", interpolation_mode::recommended);
    const std::vector<pb::sample> b{{100, 10}, {9000, 100}};
    try {
        (void)pb::exact_split(m, b, gpt_config());
        FAIL("expected split_error");
    } catch (const pb::split_error& e) {
        CHECK(e.kind() == pb::split_failure::sample_too_long);
        CHECK(e.sample() == 1);
        CHECK(e.required() == 9104);
        CHECK(e.limit() <= 8192);
    }
    pb::split_options opt;
    opt.lengths.max_seqlen_tokens = 4096;
    const auto r = pb::exact_split(m, b, gpt_config(), opt);
    CHECK(r.per_microbatch.front().shape.seqlen_tokens == 4096);
}
