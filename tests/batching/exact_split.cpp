// The exact split: brute force over all contiguous splits, and the acceptance properties.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "batching/table_model.hpp"
#include "pipeplan/batching.hpp"

namespace pb = pipeplan::batching;
using pipeplan::test::table_cost_model;

namespace {

std::vector<pb::sample> random_batch(std::mt19937_64& rng, int n, int max_in = 600, int max_tgt = 120) {
    std::uniform_int_distribution<int> in(1, max_in), tgt(0, max_tgt);
    std::vector<pb::sample> b;
    for (int i = 0; i < n; ++i) b.push_back({in(rng), tgt(rng)});
    return b;
}

/// Brute force over range_costs: every contiguous split.
double brute_force_rows(const pb::range_costs& rc, double a, double dp) {
    const std::size_t n = rc.size();
    double best = std::numeric_limits<double>::infinity();
    std::function<void(std::size_t, double, double)> go = [&](std::size_t i, double sum, double mx) {
        if (i == n) {
            best = std::min(best, a * mx + sum / dp);
            return;
        }
        const auto row = rc.row_costs(i);
        for (std::size_t m = 0; m < row.size(); ++m) go(i + m + 1, sum + row[m], std::max(mx, row[m]));
    };
    go(0, 0.0, -std::numeric_limits<double>::infinity());
    return best;
}

/// Brute force over the real splitter's inputs: every contiguous split of `order` whose
/// ranges all fit under `rung`.
template <class Model>
double brute_force_split(const pb::split_context<Model>& ctx, const std::vector<int>& order, const pb::memory_rung& rung) {
    const std::size_t n = order.size();
    const auto& cfg = ctx.config();
    const double a = static_cast<double>(cfg.stages - 1) / cfg.virtual_chunks;
    double best = std::numeric_limits<double>::infinity();
    std::function<void(std::size_t, double, double)> go = [&](std::size_t i, double sum, double mx) {
        if (i == n) {
            best = std::min(best, a * mx + sum / cfg.dp);
            return;
        }
        for (std::size_t j = i + 1; j <= n; ++j) {
            std::vector<int> ids(order.begin() + static_cast<std::ptrdiff_t>(i), order.begin() + static_cast<std::ptrdiff_t>(j));
            pb::microbatch_cost c;
            if (!ctx.fits(pb::shape_of(ids, ctx.shapes()), rung, c)) continue;
            go(j, sum + c.time_ms, std::max(mx, c.time_ms));
        }
    };
    go(0, 0.0, -std::numeric_limits<double>::infinity());
    return best;
}

/// The first rung of the ladder under which every single sample fits (nullptr: none).
template <class Model>
const pb::memory_rung* first_fitting_rung(const pb::split_context<Model>& ctx) {
    for (const auto& r : ctx.ladder())
        if (ctx.singletons_fit(r)) return &r;
    return nullptr;
}

void check_covers_batch(const pb::split_result& r, std::size_t n) {
    std::vector<int> all;
    for (const auto& m : r.microbatches) {
        CHECK(!m.empty());
        all.insert(all.end(), m.begin(), m.end());
    }
    std::sort(all.begin(), all.end());
    REQUIRE(all.size() == n);
    for (std::size_t i = 0; i < n; ++i) CHECK(all[i] == static_cast<int>(i));
    REQUIRE(r.per_microbatch.size() == r.microbatches.size());
}

void check_limits_and_objective(const pb::split_result& r) {
    double sum = 0, mx = -std::numeric_limits<double>::infinity();
    for (const auto& m : r.per_microbatch) {
        CHECK(m.cost.stored_mb <= r.memory_limit_mb);
        CHECK(m.cost.peak_mb <= r.available_mb);
        sum += m.cost.time_ms;
        mx = std::max(mx, m.cost.time_ms);
    }
    CHECK(r.sum_ms == doctest::Approx(sum).epsilon(1e-12));
    CHECK(r.tmax_ms == mx);
    const double obj = (r.stages - 1) * mx / r.virtual_chunks + sum / r.dp;
    CHECK(r.objective_ms == doctest::Approx(obj).epsilon(1e-12));
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

/// a · max t + Σ t / dp of the split cut at `bounds` (checked to be one of [0, N)).
double range_split_objective(const pb::range_costs& rc, const std::vector<int>& bounds, double a, double dp) {
    REQUIRE(bounds.front() == 0);
    REQUIRE(static_cast<std::size_t>(bounds.back()) == rc.size());
    double sum = 0, mx = -1e300;
    for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
        const auto i = static_cast<std::size_t>(bounds[k]);
        const auto m = static_cast<std::size_t>(bounds[k + 1]) - i;
        REQUIRE(m >= 1);
        REQUIRE(m <= rc.row_costs(i).size());
        sum += rc.row_costs(i)[m - 1];
        mx = std::max(mx, rc.row_costs(i)[m - 1]);
    }
    return a * mx + sum / dp;
}

}  // namespace

TEST_CASE("solve_range_split equals brute force on random cost rows") {
    std::mt19937_64 rng(12345);
    for (int trial = 0; trial < 400; ++trial) {
        const int n = 1 + static_cast<int>(rng() % 14);
        pb::range_costs rc;
        std::uniform_real_distribution<double> cost(0.1, 10.0);
        for (int i = 0; i < n; ++i) {
            const int len = 1 + static_cast<int>(rng() % static_cast<unsigned>(n - i));
            std::vector<double> row;
            const bool mono = rng() % 2 == 0;
            double acc = cost(rng);
            for (int m = 0; m < len; ++m) {
                row.push_back(mono ? acc : cost(rng));
                acc += cost(rng) * 0.3;
            }
            rc.add_row(row);
        }
        const double a = static_cast<double>(rng() % 8) / static_cast<double>(1 + rng() % 3);
        const double dp = static_cast<double>(1 + rng() % 4);
        const auto sol = pb::solve_range_split(rc, a, dp);
        const double bf = brute_force_rows(rc, a, dp);
        INFO("trial " << trial << " n " << n);
        CHECK(close(sol.objective_ms, bf));
        // A relative tolerance stops within it of the optimum (the reweighted splits' setting).
        const auto loose = pb::solve_range_split(rc, a, dp, pb::reweighted_tolerance);
        CHECK(loose.objective_ms >= bf * (1 - 1e-12));
        CHECK(loose.objective_ms <= bf * (1 + pb::reweighted_tolerance) + 1e-9);
        CHECK(close(range_split_objective(rc, loose.bounds, a, dp), loose.objective_ms));
        // The bounds describe a split whose recomputed objective is the reported one.
        CHECK(close(range_split_objective(rc, sol.bounds, a, dp), sol.objective_ms));
        // Runner-ups: the optimum is unchanged; each is a distinct valid split, no better.
        const auto with_alts = pb::solve_range_split(rc, a, dp, 0, std::numeric_limits<double>::infinity(), 3);
        CHECK(with_alts.bounds == sol.bounds);
        CHECK(with_alts.objective_ms == sol.objective_ms);
        CHECK(with_alts.alternatives.size() <= 3);
        CHECK(sol.alternatives.empty());
        std::set<std::vector<int>> distinct{sol.bounds};
        double prev = sol.objective_ms;
        for (const auto& alt : with_alts.alternatives) {
            CHECK(distinct.insert(alt.bounds).second);
            CHECK(alt.objective_ms >= prev);
            prev = alt.objective_ms;
            CHECK(close(range_split_objective(rc, alt.bounds, a, dp), alt.objective_ms));
        }
        // An upper bound above the optimum keeps it exact; one below it is respected.
        CHECK(close(pb::solve_range_split(rc, a, dp, 0, bf * 1.0001 + 1e-9).objective_ms, bf));
        CHECK(pb::solve_range_split(rc, a, dp, 0, bf * 0.999 - 1e-9).objective_ms >= bf * (1 - 1e-12));
    }
}

TEST_CASE("range_costs: repeated borrowed rows give the split, suffix minima and prefix maxima of copied rows") {
    // The sorted decoder-only order borrows one table row per sample length for runs of items.
    std::mt19937_64 rng(777);
    std::uniform_real_distribution<double> cost(0.1, 10.0);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<std::vector<double>> tables(1 + rng() % 3);
        for (auto& t : tables) {
            const bool mono = rng() % 2 == 0;
            double acc = cost(rng);
            for (int m = 0, len = 1 + static_cast<int>(rng() % 6); m < len; ++m) {
                t.push_back(mono ? acc : cost(rng));
                acc += cost(rng) * 0.3;
            }
        }
        const int n = 1 + static_cast<int>(rng() % 14);
        pb::range_costs borrowed, copied;
        std::size_t table = 0;
        for (int i = 0; i < n; ++i) {
            if (rng() % 3 == 0) table = rng() % tables.size();  // runs of one table
            const int len = std::min(static_cast<int>(tables[table].size()), n - i);
            borrowed.add_borrowed_row(tables[table].data(), len);
            copied.add_row(std::span<const double>(tables[table].data(), static_cast<std::size_t>(len)));
        }
        borrowed.finalize();
        copied.finalize();
        for (std::size_t i = 0; i < borrowed.size(); ++i) {
            REQUIRE(borrowed.monotone(i) == copied.monotone(i));
            if (borrowed.monotone(i)) continue;
            const auto x = borrowed.suffix_min(i), y = copied.suffix_min(i);
            CHECK(std::equal(x.begin(), x.end(), y.begin(), y.end()));
            const auto u = borrowed.prefix_max(i), v = copied.prefix_max(i);
            CHECK(std::equal(u.begin(), u.end(), v.begin(), v.end()));
            // Prefix maxima and suffix minima of the row itself.
            const auto row = copied.row_costs(i);
            for (std::size_t m = 0; m < row.size(); ++m) {
                CHECK(v[m] == *std::max_element(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(m) + 1));
                CHECK(y[m] == *std::min_element(row.begin() + static_cast<std::ptrdiff_t>(m), row.end()));
            }
        }
        INFO("trial " << trial);
        // Capped solves (runs of borrowed rows share their cut, next cost and masked costs, also
        // when the run's first rows are unreachable) against a plain per-entry reference.
        std::vector<double> f, g;
        for (int k = 0; k < 6; ++k) {
            const auto row = copied.row_costs(rng() % copied.size());
            const double cap = row[rng() % row.size()] + (k % 2 ? 0.0 : 0.05);
            const auto sb = pb::detail::solve_capped(borrowed, cap, f);
            const auto sc = pb::detail::solve_capped(copied, cap, g);
            CHECK(f == g);
            CHECK(sb.bounds == sc.bounds);
            std::vector<double> ref(copied.size() + 1, std::numeric_limits<double>::infinity());
            ref[0] = 0;
            double next = std::numeric_limits<double>::infinity();
            for (std::size_t i = 0; i < copied.size(); ++i) {
                if (!std::isfinite(ref[i])) continue;
                const auto t = copied.row_costs(i);
                for (std::size_t m = 0; m < t.size(); ++m) {
                    if (t[m] > cap) next = std::min(next, t[m]);
                    else ref[i + m + 1] = std::min(ref[i + m + 1], ref[i] + t[m]);
                }
            }
            CHECK(f == ref);
            CHECK(sb.next_cap == next);
            CHECK(sc.next_cap == next);
        }
        const double a = static_cast<double>(rng() % 8) / 2.0, dp = static_cast<double>(1 + rng() % 3);
        const auto sb = pb::solve_range_split(borrowed, a, dp), sc = pb::solve_range_split(copied, a, dp);
        CHECK(sb.bounds == sc.bounds);
        CHECK(sb.objective_ms == sc.objective_ms);
        CHECK(close(sb.objective_ms, brute_force_rows(copied, a, dp)));
    }
}

TEST_CASE("solve_capped: long runs of one borrowed row (relaxed several rows at a time) give the per-entry F") {
    // Runs of up to 40 equal rows of up to 60 ranges, monotone or with dips, at caps that cut
    // the rows anywhere (also below their first cost) and at no cap.
    std::mt19937_64 rng(4242);
    std::uniform_real_distribution<double> cost(0.1, 10.0);
    for (int trial = 0; trial < 60; ++trial) {
        const int n = 1 + static_cast<int>(rng() % 400);
        std::vector<std::vector<double>> tables;
        pb::range_costs rc;
        for (int i = 0; i < n;) {
            const bool mono = rng() % 2 == 0;
            std::vector<double> t;
            double acc = cost(rng);
            for (int m = 0, len = 1 + static_cast<int>(rng() % 60); m < len; ++m, acc += cost(rng) * 0.3)
                t.push_back(mono ? acc : acc + cost(rng) * 0.5);
            tables.push_back(std::move(t));
            for (int run = 1 + static_cast<int>(rng() % 40); run > 0 && i < n; --run, ++i)
                rc.add_borrowed_row(tables.back().data(), std::min(static_cast<int>(tables.back().size()), n - i));
        }
        rc.finalize();
        INFO("trial " << trial);
        std::vector<double> f;
        for (int k = 0; k < 5; ++k) {
            const auto some = rc.row_costs(rng() % rc.size());
            const double cap = k == 0 ? std::numeric_limits<double>::infinity() : some[rng() % some.size()] - (k % 2 ? 0.0 : 0.05);
            const auto s = pb::detail::solve_capped(rc, cap, f);
            std::vector<double> ref(rc.size() + 1, std::numeric_limits<double>::infinity());
            ref[0] = 0;
            for (std::size_t i = 0; i < rc.size(); ++i) {
                const auto t = rc.row_costs(i);
                for (std::size_t m = 0; m < t.size() && std::isfinite(ref[i]); ++m)
                    if (t[m] <= cap) ref[i + m + 1] = std::min(ref[i + m + 1], ref[i] + t[m]);
            }
            CHECK(f == ref);
            if (std::isfinite(ref.back())) CHECK(s.sum == ref.back());
        }
    }
}

TEST_CASE("solve_capped: F is constant from the cap up to next_cap, a range cost above the cap") {
    // The exact search skips the caps in [c, next_cap(c)): check F there against fresh solves,
    // on rows with real-valued and with integer costs (many ties), monotone or not.
    std::mt19937_64 rng(777);
    std::vector<double> f;
    int checked = 0;
    for (int trial = 0; trial < 300; ++trial) {
        const int n = 1 + static_cast<int>(rng() % 20);
        const bool coarse = trial % 2 == 0;
        pb::range_costs rc;
        std::uniform_real_distribution<double> cost(0.1, 10.0);
        std::vector<double> all;
        for (int i = 0; i < n; ++i) {
            const int len = 1 + static_cast<int>(rng() % static_cast<unsigned>(n - i));
            std::vector<double> row;
            double acc = 0;
            for (int m = 0; m < len; ++m) {
                const double x = coarse ? std::floor(cost(rng)) + 1.0 : cost(rng);
                row.push_back(rng() % 3 == 0 ? x : (acc += x * 0.5));
                all.push_back(row.back());
            }
            rc.add_row(row);
        }
        rc.finalize();
        for (int k = 0; k < 8; ++k) {
            const double cap = all[rng() % all.size()] + (k % 2 ? 0.0 : 0.25);
            const auto at = pb::detail::solve_capped(rc, cap, f);
            INFO("trial " << trial << " cap " << cap);
            CHECK(at.next_cap > cap);
            if (std::isfinite(at.next_cap)) {
                CHECK(std::find(all.begin(), all.end(), at.next_cap) != all.end());
                for (const double c : {cap + (at.next_cap - cap) / 3, std::nextafter(at.next_cap, 0.0)}) {
                    const auto in = pb::detail::solve_capped(rc, c, f);
                    CHECK(in.sum == at.sum);  // also both infinite: no split under either cap
                    ++checked;
                }
            } else {
                CHECK(pb::detail::solve_capped(rc, 1e9, f).sum == at.sum);
                ++checked;
            }
        }
        // The exact search with these skips still equals brute force (also with integer ties).
        const double a = static_cast<double>(1 + rng() % 5), dp = static_cast<double>(1 + rng() % 3);
        if (n <= 14) CHECK(close(pb::solve_range_split(rc, a, dp).objective_ms, brute_force_rows(rc, a, dp)));
    }
    CHECK(checked > 2000);
}

TEST_CASE("solve_range_split rejects bad input") {
    pb::range_costs rc;
    rc.add_row(std::vector<double>{1.0, 2.0});
    CHECK_THROWS_AS((void)pb::solve_range_split(rc, 1.0, 1.0), pipeplan::invalid_argument);  // row beyond N
    pb::range_costs ok;
    ok.add_row(std::vector<double>{1.0});
    CHECK_THROWS_AS((void)pb::solve_range_split(ok, -1.0, 1.0), pipeplan::invalid_argument);
    CHECK_THROWS_AS((void)pb::solve_range_split(ok, 1.0, 0.0), pipeplan::invalid_argument);
    pb::range_costs empty_row;
    empty_row.add_row(std::vector<double>{});
    CHECK_THROWS_AS((void)pb::solve_range_split(empty_row, 1.0, 1.0), pipeplan::invalid_argument);
    pb::range_costs none;
    CHECK(pb::solve_range_split(none, 1.0, 1.0).bounds == std::vector<int>{0});
}

TEST_CASE("exact_split equals brute force for N <= 14 in both accounting modes") {
    int compared = 0;
    for (const bool enc_dec : {false, true}) {
        for (const auto mode : {pb::accounting_mode::pipeplan, pb::accounting_mode::dynapipe}) {
            for (std::uint64_t seed = 1; seed <= 60; ++seed) {
                std::mt19937_64 rng(seed * 7919 + (enc_dec ? 1 : 0));
                table_cost_model model;
                model.seed = seed;
                model.encoder_decoder = enc_dec;
                model.time_noise = (seed % 3 == 0) ? 0.0 : 1.5;  // smooth and wildly non-monotone tables
                model.head_memory = seed % 2 == 0;
                model.stored_mb_per_token = 0.3;  // so that the memory limits bind at a few samples
                const int n = 2 + static_cast<int>(rng() % 13);
                const auto batch = random_batch(rng, n);
                pb::pipeline_config cfg;
                cfg.stages = enc_dec ? 2 * (1 + static_cast<int>(rng() % 2)) : 1 + static_cast<int>(rng() % 4);
                cfg.virtual_chunks = 1 + static_cast<int>(rng() % 2);
                cfg.layers_per_stage = 1 + static_cast<int>(rng() % 3);
                cfg.dp = 1 + static_cast<int>(rng() % 3);
                cfg.device_memory_mb = 1500 + static_cast<double>(rng() % 4000);
                pb::split_options opt;
                opt.accounting = mode;
                opt.order = static_cast<pb::ordering_method>(rng() % 5);
                const pb::split_context<table_cost_model> ctx(model, batch, cfg, opt);
                const pb::memory_rung* rung = first_fitting_rung(ctx);
                if (!rung) continue;
                auto order = pb::order_samples(ctx.shapes(), enc_dec, opt.order);
                const auto r = pb::exact_split_ordered(ctx, order, *rung);
                const double bf = brute_force_split(ctx, order, *rung);
                INFO("seed " << seed << " enc_dec " << enc_dec << " mode " << pb::to_string(mode) << " n " << n);
                CHECK(close(r.objective_ms, bf));
                check_covers_batch(r, batch.size());
                check_limits_and_objective(r);
                ++compared;
            }
        }
    }
    CHECK(compared >= 200);
}

TEST_CASE("exact_split properties on larger random batches") {
    for (const bool enc_dec : {false, true}) {
        for (std::uint64_t seed = 1; seed <= 6; ++seed) {
            std::mt19937_64 rng(seed);
            table_cost_model model;
            model.seed = seed;
            model.encoder_decoder = enc_dec;
            model.time_noise = 0.2;
            const auto batch = random_batch(rng, 150);
            pb::pipeline_config cfg;
            cfg.stages = 4;
            cfg.layers_per_stage = 2;
            cfg.device_memory_mb = 4000;
            const auto r = pb::exact_split(model, batch, cfg);
            check_covers_batch(r, batch.size());
            check_limits_and_objective(r);
            CHECK(r.method == "dp");

            {  // raising the memory limit never worsens the objective (fixed rung)
                pb::split_options opt;
                opt.limit_ladder = {pb::memory_limit_kind::preferred};
                opt.recompute_ladder = {pipeplan::recompute_mode::none};
                double prev = std::numeric_limits<double>::infinity();
                for (double mem : {3000.0, 3500.0, 4000.0, 6000.0, 10000.0, 40000.0}) {
                    cfg.device_memory_mb = mem;
                    try {
                        const auto q = pb::exact_split(model, batch, cfg, opt);
                        CHECK(q.objective_ms <= prev * (1 + 1e-12));
                        prev = q.objective_ms;
                    } catch (const pb::split_error&) {
                        CHECK(prev == std::numeric_limits<double>::infinity());  // only while too small
                    }
                }
                CHECK(prev < std::numeric_limits<double>::infinity());
                double prev_f = std::numeric_limits<double>::infinity();
                cfg.device_memory_mb = 8000;
                for (double frac : {0.05, 0.1, 0.2, 0.5, 1.0}) {
                    opt.preferred_fraction = frac;
                    try {
                        const auto q = pb::exact_split(model, batch, cfg, opt);
                        CHECK(q.objective_ms <= prev_f * (1 + 1e-12));
                        prev_f = q.objective_ms;
                    } catch (const pb::split_error&) {
                        CHECK(prev_f == std::numeric_limits<double>::infinity());
                    }
                }
            }
            {  // S = 1 gives the minimum of sum t
                cfg.device_memory_mb = 4000;
                cfg.stages = 1;
                if (enc_dec) cfg.virtual_chunks = 2;  // an even number of chunks
                const auto q = pb::exact_split(model, batch, cfg);
                CHECK(q.objective_ms == doctest::Approx(q.sum_ms).epsilon(1e-12));
                // Any other split (e.g. the fixed baselines) has at least this Σt under the same rung.
                pb::split_options opt;
                opt.limit_ladder = {q.limit};
                opt.recompute_ladder = {q.recompute};
                for (int mbs : {1, 2, 4}) {
                    try {
                        const auto f = pb::split_fixed_mbs(model, batch, cfg, mbs, pb::fixed_order::sorted, opt);
                        CHECK(q.sum_ms <= f.sum_ms * (1 + 1e-12));
                    } catch (const pb::split_error&) {
                    }
                }
            }
            {  // relative tolerance stays within its bound (one fixed order)
                cfg.stages = 4;
                cfg.virtual_chunks = 1;
                cfg.device_memory_mb = 4000;
                pb::split_options opt;
                opt.order = pb::ordering_method::lexicographic;
                const auto exact = pb::exact_split(model, batch, cfg, opt);
                opt.relative_tolerance = 0.01;
                const auto q = pb::exact_split(model, batch, cfg, opt);
                CHECK(q.objective_ms <= exact.objective_ms * 1.01 + 1e-9);
                CHECK(q.objective_ms >= exact.objective_ms * (1 - 1e-12));
            }
        }
    }
}

TEST_CASE("exact_split: the ladder reports the rung used") {
    table_cost_model model;
    model.time_noise = 0;
    model.stored_mb_per_token = 0.1;
    std::mt19937_64 rng(3);
    auto batch = random_batch(rng, 40, 2000, 0);
    batch.push_back({3000, 0});
    pb::pipeline_config cfg;
    cfg.stages = 4;
    cfg.layers_per_stage = 4;
    cfg.device_memory_mb = 100000;
    const auto roomy = pb::exact_split(model, batch, cfg);
    CHECK(roomy.limit == pb::memory_limit_kind::preferred);
    CHECK(roomy.recompute == pipeplan::recompute_mode::none);
    CHECK(roomy.memory_limit_mb == doctest::Approx(roomy.available_mb / 4));
    // A device so small that only recomputation (or the full available limit) fits the longest sample.
    // Longest sample alone: 300 MB stored per layer without recomputation (4 layers), halved by
    // selective and divided by 3 by full recomputation; model states 360 MB.
    using pipeplan::recompute_mode;
    struct expect {
        double mem;
        pb::memory_limit_kind kind;
        recompute_mode r;
    };
    for (const auto& e : {expect{4000, pb::memory_limit_kind::preferred, recompute_mode::selective},
                          expect{2000, pb::memory_limit_kind::preferred, recompute_mode::full},
                          expect{1500, pb::memory_limit_kind::available, recompute_mode::selective}}) {
        cfg.device_memory_mb = e.mem;
        const auto r = pb::exact_split(model, batch, cfg);
        INFO("memory " << e.mem);
        CHECK(r.limit == e.kind);
        CHECK(r.recompute == e.r);
        CHECK(r.model_state_mb == doctest::Approx(360));
        check_limits_and_objective(r);
    }
    cfg.device_memory_mb = 700;
    try {
        (void)pb::exact_split(model, batch, cfg);
        FAIL("expected a split_error");
    } catch (const pb::split_error& e) {
        // Under full recomputation: stored 4 x 100 MB, peak = stored + (1.5 x 100 + 1 - 100) = 451 MB.
        CHECK(e.kind() == pb::split_failure::peak_memory);
        CHECK(e.sample() == 40);
        CHECK(e.required() == doctest::Approx(451));
        CHECK(e.limit() == doctest::Approx(340));
        CHECK(e.excess() == doctest::Approx(111));
        CHECK(std::string(e.what()).find("over by 111.0 MB") != std::string::npos);
    }
}

TEST_CASE("exact_split with packing: rows never exceed their target length and only help") {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        std::mt19937_64 rng(seed);
        table_cost_model model;
        model.seed = seed;
        model.time_noise = 0.1;
        std::vector<pb::sample> batch = random_batch(rng, 60, 200, 20);
        for (int k = 0; k < 3; ++k) batch.push_back({1000, 20});
        pb::pipeline_config cfg;
        cfg.stages = 2;
        cfg.layers_per_stage = 2;
        cfg.device_memory_mb = 3000;
        pb::split_options opt;
        opt.packing.enabled = true;
        opt.packing.separator_tokens = static_cast<int>(seed % 3);
        const auto packed = pb::exact_split(model, batch, cfg, opt);
        check_covers_batch(packed, batch.size());
        check_limits_and_objective(packed);
        const auto shapes = pb::padded_shapes(batch, opt.lengths, false);
        bool any_rows = false;
        for (std::size_t k = 0; k < packed.per_microbatch.size(); ++k) {
            const auto& rec = packed.per_microbatch[k];
            if (rec.rows.empty()) continue;
            any_rows = true;
            CHECK(rec.shape.mbs == static_cast<int>(rec.rows.size()));
            std::vector<int> ids;
            for (const auto& row : rec.rows) {
                CHECK(pb::row_tokens(row, shapes, opt.packing.separator_tokens) <= rec.shape.seqlen_tokens);
                ids.insert(ids.end(), row.begin(), row.end());
            }
            std::sort(ids.begin(), ids.end());
            auto mb = packed.microbatches[k];
            std::sort(mb.begin(), mb.end());
            CHECK(ids == mb);
        }
        CHECK(any_rows);
        // Packing is an extra option for each range: never worse than padding under the same rung.
        pb::split_options plain;
        plain.limit_ladder = {packed.limit};
        plain.recompute_ladder = {packed.recompute};
        const auto unpacked = pb::exact_split(model, batch, cfg, plain);
        CHECK(packed.objective_ms <= unpacked.objective_ms * (1 + 1e-12));
    }
    table_cost_model t5;
    t5.encoder_decoder = true;
    pb::pipeline_config cfg;
    cfg.stages = 2;
    cfg.device_memory_mb = 3000;
    pb::split_options opt;
    opt.packing.enabled = true;
    const std::vector<pb::sample> b{{10, 2}};
    CHECK_THROWS_AS((void)pb::exact_split(t5, b, cfg, opt), pipeplan::invalid_argument);
    table_cost_model gpt;
    opt.order = pb::ordering_method::dataset;  // packing needs the sorted order
    CHECK_THROWS_AS((void)pb::exact_split(gpt, b, cfg, opt), pipeplan::invalid_argument);
}

/// Brute force over every set partition of the batch (any grouping, not only contiguous ranges
/// of one order) whose micro-batches fit under `rung`: the best objective any order can reach.
template <class Model>
double brute_force_grouping(const pb::split_context<Model>& ctx, const pb::memory_rung& rung) {
    const std::size_t n = ctx.shapes().size();
    const auto& cfg = ctx.config();
    const double a = static_cast<double>(cfg.stages - 1) / cfg.virtual_chunks;
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::vector<int>> groups;
    std::function<void(int)> go = [&](int i) {
        if (static_cast<std::size_t>(i) == n) {
            double sum = 0, mx = -std::numeric_limits<double>::infinity();
            for (const auto& g : groups) {
                pb::microbatch_cost c;
                if (!ctx.fits(pb::shape_of(g, ctx.shapes()), rung, c)) return;
                sum += c.time_ms;
                mx = std::max(mx, c.time_ms);
            }
            best = std::min(best, a * mx + sum / cfg.dp);
            return;
        }
        for (std::size_t k = 0; k < groups.size(); ++k) {  // by index: go() may grow `groups`
            groups[k].push_back(i);
            go(i + 1);
            groups[k].pop_back();
        }
        groups.push_back({i});
        go(i + 1);
        groups.pop_back();
    };
    go(0);
    return best;
}

TEST_CASE("exact_split: the default encoder-decoder order is never worse than any candidate order it solves") {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
        std::mt19937_64 rng(seed);
        table_cost_model model;
        model.seed = seed;
        model.encoder_decoder = true;
        model.time_noise = seed % 3 == 0 ? 0.0 : 0.1;
        // Half the batches mix in long-target samples (short inputs, targets 3-10x longer).
        auto batch = random_batch(rng, 100);
        if (seed % 2 == 0)
            for (std::size_t i = 0; i < batch.size(); i += 3) batch[i] = {40 + static_cast<int>(rng() % 111), 80 + static_cast<int>(rng() % 221)};
        pb::pipeline_config cfg;
        cfg.stages = 4;
        cfg.device_memory_mb = 4000;
        pb::exact_split_stats st;
        const auto a = pb::exact_split(model, batch, cfg, {}, &st);
        check_covers_batch(a, batch.size());
        check_limits_and_objective(a);
        const pb::split_context<table_cost_model> ctx(model, batch, cfg, {});
        const auto candidates = pb::automatic_candidate_orders(ctx.shapes());
        CHECK(st.orders >= static_cast<int>(candidates.size()));
        for (const auto& rung : ctx.ladder()) {
            if (rung.recompute != a.recompute || rung.kind != a.limit) continue;
            for (const auto& c : candidates) {
                INFO("seed " << seed << " order " << c.name);
                CHECK(a.objective_ms <= pb::exact_split_ordered(ctx, c.ids, rung).objective_ms);
            }
        }
        for (const auto m : {pb::ordering_method::lexicographic, pb::ordering_method::tour}) {
            pb::split_options one;
            one.order = m;
            CHECK(a.objective_ms <= pb::exact_split(model, batch, cfg, one).objective_ms);
        }
        pb::split_options none;
        none.refine_passes = 0;
        CHECK(pb::exact_split(model, batch, cfg, none).objective_ms >= a.objective_ms);
    }
}

TEST_CASE("exact_split: the default encoder-decoder order against brute force over every grouping (N <= 8)") {
    int exact = 0, compared = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        std::mt19937_64 rng(seed * 31);
        table_cost_model model;
        model.seed = seed;
        model.encoder_decoder = true;
        model.time_noise = seed % 2 == 0 ? 0.0 : 0.3;
        model.stored_mb_per_token = 0.3;
        const int n = 3 + static_cast<int>(rng() % 6);
        auto batch = random_batch(rng, n, 300, 40);
        for (int i = 0; i < n; i += 2)  // long targets on short inputs, as in chain-of-thought data
            if (seed % 2 == 0) batch[static_cast<std::size_t>(i)] = {40 + static_cast<int>(rng() % 111), 80 + static_cast<int>(rng() % 221)};
        pb::pipeline_config cfg;
        cfg.stages = 4;
        cfg.device_memory_mb = 1500 + static_cast<double>(rng() % 3000);
        const pb::split_context<table_cost_model> ctx(model, batch, cfg, {});
        const pb::memory_rung* rung = first_fitting_rung(ctx);
        if (!rung) continue;
        const auto a = pb::exact_split(model, batch, cfg);
        const double bf = brute_force_grouping(ctx, *rung);
        REQUIRE(std::isfinite(bf));  // the singletons fit, so one grouping does
        INFO("seed " << seed << " n " << n);
        CHECK(a.objective_ms >= bf - 1e-9 * bf);  // no order beats the best grouping
        exact += close(a.objective_ms, bf) ? 1 : 0;
        ++compared;
    }
    CHECK(compared >= 30);
    CHECK(exact * 5 >= compared * 4);  // the optimum on >= 80 % of them (33 of these 40)
}

TEST_CASE("exact_split: the default encoder-decoder order groups two clusters a 1-D order interleaves (golden)") {
    // Short-target samples and long-target samples with the same encoder lengths: lexicographic
    // interleaves them, so every micro-batch pays the long decoder; the decoder bands separate them.
    table_cost_model model;
    model.encoder_decoder = true;
    std::vector<pb::sample> batch;
    for (int i = 0; i < 24; ++i) batch.push_back({100 + 10 * (i / 2), i % 2 == 0 ? 8 : 280});
    pb::pipeline_config cfg;
    cfg.stages = 4;
    cfg.device_memory_mb = 4000;
    const auto a = pb::exact_split(model, batch, cfg);
    for (const auto& mb : a.microbatches) {
        const bool long_target = batch[static_cast<std::size_t>(mb.front())].target_tokens == 280;
        for (int id : mb) CHECK((batch[static_cast<std::size_t>(id)].target_tokens == 280) == long_target);
    }
    pb::split_options lex;
    lex.order = pb::ordering_method::lexicographic;
    CHECK(a.objective_ms < pb::exact_split(model, batch, cfg, lex).objective_ms);
}

TEST_CASE("exact_split is deterministic") {
    std::mt19937_64 rng(99);
    table_cost_model model;
    model.encoder_decoder = true;
    const auto batch = random_batch(rng, 120);
    pb::pipeline_config cfg;
    cfg.stages = 4;
    cfg.device_memory_mb = 5000;
    const auto a = pb::exact_split(model, batch, cfg);
    const auto b = pb::exact_split(model, batch, cfg);
    CHECK(a.microbatches == b.microbatches);
    CHECK(a.objective_ms == b.objective_ms);
}

TEST_CASE("exact_split with a shape cost cache and an order memo equals exact_split without them, across batches, orders and ladders") {
    int compared = 0;
    for (const bool enc_dec : {false, true}) {
        table_cost_model model;
        model.encoder_decoder = enc_dec;
        model.stored_mb_per_token = 0.3;
        pb::pipeline_config cfg;
        cfg.stages = 4;
        cfg.device_memory_mb = 5000;
        pb::shape_cost_cache cache;
        pb::order_memo memo;  // the orders of the batch last split (kept across its two ladders)
        std::mt19937_64 rng(enc_dec ? 11 : 12);
        for (int it = 0; it < 6; ++it) {
            const auto batch = random_batch(rng, 40 + static_cast<int>(rng() % 80));
            // Memory, dp and ZeRO vary under one cache (it keeps the costs across them).
            cfg.device_memory_mb = 3500 + 750.0 * (it % 3);
            cfg.dp = 1 + it % 2;
            cfg.zero_stage = it % 3 == 2 ? 1 : 0;
            for (const auto kind : {pb::memory_limit_kind::preferred, pb::memory_limit_kind::available}) {
                pb::split_options opt;
                opt.limit_ladder = {kind};
                opt.accounting = it % 2 == 0 ? pb::accounting_mode::pipeplan : pb::accounting_mode::dynapipe;
                opt.order = it % 3 == 1 ? pb::ordering_method::lexicographic : pb::ordering_method::automatic;
                const auto plain = pb::exact_split(model, batch, cfg, opt);
                const auto cached = pb::exact_split(model, batch, cfg, opt, nullptr, &cache, nullptr, nullptr, &memo);
                INFO("enc_dec " << enc_dec << " iteration " << it);
                CHECK(cached.microbatches == plain.microbatches);
                CHECK(cached.objective_ms == plain.objective_ms);
                CHECK(cached.limit == plain.limit);
                CHECK(cached.recompute == plain.recompute);
                CHECK(!memo.orders.empty());
                CHECK(memo.method == opt.order);
                CHECK(memo.orders.size() == (enc_dec && opt.order == pb::ordering_method::automatic ? 5U : 1U));
                ++compared;
            }
        }
        CHECK(cache.size() > 0);
    }
    CHECK(compared == 24);
}

TEST_CASE("shape_cost_cache empties itself for another evaluator setting") {
    table_cost_model model;
    pb::pipeline_config cfg;
    cfg.stages = 2;
    cfg.device_memory_mb = 5000;
    pb::shape_cost_cache cache;
    const pb::stage_cost_evaluator<table_cost_model> a(model, cfg, pb::accounting_mode::pipeplan);
    cache.bind(a);
    auto& row = cache.at(128, 0, pipeplan::recompute_mode::none);
    const auto* c = cache.cost(row, a, 128, 0, pipeplan::recompute_mode::none, 3);
    REQUIRE(c != nullptr);
    CHECK(*c == a.evaluate({3, 128, 0}, pipeplan::recompute_mode::none).value());
    CHECK(cache.size() == 3);
    cache.bind(a);
    CHECK(cache.size() == 3);  // same setting: kept
    pb::pipeline_config less_memory = cfg;  // fields that price no micro-batch: kept
    less_memory.device_memory_mb = 3000;
    less_memory.dp = 2;
    less_memory.zero_stage = 1;
    const pb::stage_cost_evaluator<table_cost_model> m(model, less_memory, pb::accounting_mode::pipeplan);
    cache.bind(m);
    CHECK(cache.size() == 3);
    CHECK(*c == m.evaluate({3, 128, 0}, pipeplan::recompute_mode::none).value());
    pb::pipeline_config other = cfg;
    other.stages = 4;
    const pb::stage_cost_evaluator<table_cost_model> b(model, other, pb::accounting_mode::pipeplan);
    cache.bind(b);
    CHECK(cache.size() == 0);
    const pb::stage_cost_evaluator<table_cost_model> d(model, other, pb::accounting_mode::dynapipe);
    (void)cache.cost(cache.at(128, 0, pipeplan::recompute_mode::none), b, 128, 0, pipeplan::recompute_mode::none, 2);
    cache.bind(d);
    CHECK(cache.size() == 0);
}

namespace {
/// A table model whose memory limits bind at a few samples, and a 4-stage pipeline for it.
table_cost_model tight_model(bool enc_dec) {
    table_cost_model model;
    model.encoder_decoder = enc_dec;
    model.stored_mb_per_token = 0.3;
    return model;
}
pb::pipeline_config four_stages() {
    pb::pipeline_config cfg;
    cfg.stages = 4;
    cfg.device_memory_mb = 5000;
    return cfg;
}
}  // namespace

TEST_CASE("exact_split objective bound: exact below the bound, never below it when the optimum is not") {
    for (const bool enc_dec : {false, true}) {
        std::mt19937_64 rng(enc_dec ? 5 : 6);
        const table_cost_model model = tight_model(enc_dec);
        const pb::pipeline_config cfg = four_stages();
        const auto batch = random_batch(rng, 90);
        pb::split_options opt;
        opt.order = pb::ordering_method::lexicographic;  // one order: the bound only prunes
        const auto exact = pb::exact_split(model, batch, cfg, opt);
        opt.objective_bound_ms = exact.objective_ms * 1.01;
        const auto above = pb::exact_split(model, batch, cfg, opt);
        CHECK(above.objective_ms == exact.objective_ms);
        opt.objective_bound_ms = exact.objective_ms;  // nothing strictly better exists
        CHECK(pb::exact_split(model, batch, cfg, opt).objective_ms >= exact.objective_ms);
        opt.objective_bound_ms = std::numeric_limits<double>::quiet_NaN();
        CHECK_THROWS_AS((void)pb::exact_split(model, batch, cfg, opt), pipeplan::invalid_argument);
    }
}

TEST_CASE("exact_split runner-up splits: the result is unchanged, the runner-ups are valid and no better") {
    for (const bool enc_dec : {false, true}) {
        std::mt19937_64 rng(enc_dec ? 31 : 32);
        const table_cost_model model = tight_model(enc_dec);
        const pb::pipeline_config cfg = four_stages();
        const auto batch = random_batch(rng, 100);
        pb::split_options opt;
        opt.alternative_splits = 3;
        const auto plain = pb::exact_split(model, batch, cfg, opt);
        std::vector<pb::split_result> alts;
        const auto best = pb::exact_split(model, batch, cfg, opt, nullptr, nullptr, &alts);
        CHECK(best.microbatches == plain.microbatches);
        CHECK(best.objective_ms == plain.objective_ms);
        CHECK(!alts.empty());
        CHECK(alts.size() <= 3);
        for (const auto& r : alts) {
            CHECK(r.microbatches != best.microbatches);
            CHECK(r.objective_ms >= best.objective_ms);
            check_covers_batch(r, batch.size());
            check_limits_and_objective(r);
        }
        opt.alternative_splits = -1;
        CHECK_THROWS_AS((void)pb::exact_split(model, batch, cfg, opt), pipeplan::invalid_argument);
    }
}

TEST_CASE("exact_split reweighted splits: the result is unchanged; each is near-optimal for its weight") {
    for (const bool enc_dec : {false, true}) {
        std::mt19937_64 rng(enc_dec ? 41 : 42);
        const table_cost_model model = tight_model(enc_dec);
        const pb::pipeline_config cfg = four_stages();
        const auto batch = random_batch(rng, 100);
        pb::split_options opt;
        const auto plain = pb::exact_split(model, batch, cfg, opt);
        opt.fill_weights = {1.0, 0.5, 0.0};
        std::vector<pb::split_result> rw;
        const auto best = pb::exact_split(model, batch, cfg, opt, nullptr, nullptr, nullptr, &rw);
        CHECK(best.microbatches == plain.microbatches);
        CHECK(best.objective_ms == plain.objective_ms);
        REQUIRE(rw.size() == 3);
        const double a = static_cast<double>(cfg.stages - 1) / cfg.virtual_chunks;
        const auto weighted = [&](const pb::split_result& r, double w) { return w * a * r.tmax_ms + r.sum_ms / cfg.dp; };
        for (std::size_t k = 0; k < rw.size(); ++k) {
            INFO("enc_dec " << enc_dec << " weight " << opt.fill_weights[k]);
            check_covers_batch(rw[k], batch.size());
            check_limits_and_objective(rw[k]);
            CHECK(rw[k].limit == best.limit);
            CHECK(rw[k].recompute == best.recompute);
            // The main split is a split of the same (final) order: the reweighted one is
            // at least as good for its weight, within the tolerance.
            CHECK(weighted(rw[k], opt.fill_weights[k]) <=
                  weighted(best, opt.fill_weights[k]) * (1 + pb::reweighted_tolerance) + 1e-9);
        }
        // Weight 1 is the pipeline objective: within the tolerance of the exact optimum.
        CHECK(rw[0].objective_ms >= best.objective_ms * (1 - 1e-12));
        CHECK(rw[0].objective_ms <= best.objective_ms * (1 + pb::reweighted_tolerance) + 1e-9);
        // Weight 0 minimises the sum alone: fewer, larger micro-batches than the main split.
        CHECK(rw[2].sum_ms <= best.sum_ms + 1e-9);
        CHECK(rw[2].microbatches.size() <= best.microbatches.size());
        // Deterministic.
        std::vector<pb::split_result> again;
        (void)pb::exact_split(model, batch, cfg, opt, nullptr, nullptr, nullptr, &again);
        REQUIRE(again.size() == rw.size());
        for (std::size_t k = 0; k < rw.size(); ++k) CHECK(again[k].microbatches == rw[k].microbatches);
        // They are the splits of the final order (the micro-batches in turn) under the result's
        // rung, as exact_split_ordered gives them from a table of its own.
        const pb::split_context<table_cost_model> ctx(model, batch, cfg, opt);
        std::vector<int> final_order;
        for (const auto& mb : best.microbatches) final_order.insert(final_order.end(), mb.begin(), mb.end());
        const pb::memory_rung* rung = nullptr;
        for (const auto& r : ctx.ladder())
            if (!rung && r.kind == best.limit && r.recompute == best.recompute) rung = &r;
        REQUIRE(rung != nullptr);
        std::vector<pb::split_result> own;
        (void)pb::exact_split_ordered<table_cost_model>(ctx, final_order, *rung, nullptr, nullptr,
                                                        std::numeric_limits<double>::infinity(), nullptr, &own);
        REQUIRE(own.size() == rw.size());
        for (std::size_t k = 0; k < rw.size(); ++k) CHECK(own[k].microbatches == rw[k].microbatches);
        opt.fill_weights = {-0.5};
        CHECK_THROWS_AS((void)pb::exact_split(model, batch, cfg, opt), pipeplan::invalid_argument);
        opt.fill_weights = {std::numeric_limits<double>::infinity()};
        CHECK_THROWS_AS((void)pb::exact_split(model, batch, cfg, opt), pipeplan::invalid_argument);
    }
}

TEST_CASE("range_split: first_above finds std::upper_bound's index in sorted costs") {
    std::mt19937_64 rng(2024);
    for (int trial = 0; trial < 500; ++trial) {
        std::vector<double> a(rng() % 12);
        for (double& x : a) x = static_cast<double>(rng() % 8);
        std::sort(a.begin(), a.end());
        for (double x = -1.0; x <= 9.0; x += 0.5) {
            const auto want = static_cast<std::size_t>(std::upper_bound(a.begin(), a.end(), x) - a.begin());
            REQUIRE(pb::detail::first_above(a.data(), a.size(), x) == want);
        }
    }
}

namespace {
/// table_cost_model whose stored memory is not monotone in mbs: sizes 2 and 3 of long encoder
/// lengths store 10^6× more (they do not fit, larger sizes would).
struct spiky_memory_model : table_cost_model {
    [[nodiscard]] pipeplan::layer_cost evaluate(const pipeplan::layer_query& q) const {
        pipeplan::layer_cost c = table_cost_model::evaluate(q);
        if ((q.mbs == 2 || q.mbs == 3) && q.seqlen_tokens >= 300 && c.stored_mb.ok())
            c.stored_mb = c.stored_mb.value() * 1e6;
        return c;
    }
};

/// Reads rows of shape tables to random sizes and checks each entry from a random size on and
/// each row's length against shape-by-shape pricing (a row stops at the first size that does
/// not fit, even where larger sizes would).
template <class Model>
void check_shape_tables(const Model& model, pb::shape_cost_cache* cache) {
    std::mt19937_64 rng(cache ? 21 : 22);
    const auto batch = random_batch(rng, 60);
    pb::pipeline_config cfg;
    cfg.stages = 4;
    cfg.device_memory_mb = 5000;
    pb::split_context<Model> ctx(model, batch, cfg, pb::split_options{});
    ctx.use_cache(cache);
    std::size_t read = 0;
    for (const auto& rung : ctx.ladder()) {
        pb::detail::shape_tables<Model> tables(ctx, rung);
        for (int k = 0; k < 400; ++k) {
            const int e = 50 * (1 + static_cast<int>(rng() % 10)), d = 8 * (1 + static_cast<int>(rng() % 6));
            const int from = 1 + static_cast<int>(rng() % 30), to = from + static_cast<int>(rng() % 20);
            const std::vector<double>& t = tables.row(e, d, to);
            int fit = 0;  // the first sizes that fit, shape by shape
            while (fit < to) {
                const auto c = ctx.evaluator().evaluate(pb::microbatch_shape{fit + 1, e, d}, rung.recompute);
                if (!c.ok() || !rung.fits(c.value())) break;
                ++fit;
            }
            INFO("e " << e << " d " << d << " from " << from << " to " << to);
            REQUIRE(std::min(static_cast<int>(t.size()), to) == fit);
            for (int m = from; m <= fit; ++m, ++read)
                REQUIRE(t[static_cast<std::size_t>(m) - 1] ==
                        ctx.evaluator().evaluate(pb::microbatch_shape{m, e, d}, rung.recompute).value().time_ms);
        }
    }
    CHECK(read > 1000);
}
}  // namespace

TEST_CASE("shape tables: each time and each row's end equal shape-by-shape pricing, memory monotone or not") {
    table_cost_model smooth;
    smooth.encoder_decoder = true;
    spiky_memory_model spiky;
    spiky.encoder_decoder = true;
    check_shape_tables(smooth, nullptr);
    check_shape_tables(spiky, nullptr);
    pb::shape_cost_cache cache;
    check_shape_tables(smooth, &cache);
    pb::shape_cost_cache other;
    check_shape_tables(spiky, &other);
    CHECK(cache.size() > 0);
}
