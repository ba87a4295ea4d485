// Execution plans: the whole planner on real batches and profiles, and lowering + validation
// alone (single thread).
//   build/benchmarks/bench_plan --benchmark_min_time=0.05
// BM_plan_*: one planner re-planning one batch; *_fresh: a new planner per iteration (one
// `pipeplan plan` run, cold shape-cost cache); *_new_batches: one planner, 8 seeded batches in turn.
// BM_plan_gpt_s16_fresh: the GPT 65k plan on S 16 (L 2; no target, measured in docs/schedules.md).
// BM_plan_gpt_drawn_fresh/146000000: one plan of ~1,000,000 samples (target <= 10 s; /36500000
// and /73000000: ~250,000 and ~500,000 samples, for the growth); BM_plan_gpt_deep_fresh/S: one
// 65,536-token plan at S 256, 512, 1024 (target: near-linear in S). docs/plans.md has the figures.
// Targets: GPT-6.7B 65,536 tokens (S 4, tp 2, L 8, 36 GB) <= 10 ms, T5-11B 65,536
// tokens (S 4, tp 4, L 6) <= 25 ms (also with 25 % long-target samples: BM_plan_t5_mixed_fresh), 1,048,576 tokens <= 200 ms, lowering + validation S 8 M 64
// <= 1 ms, plans <= 64 KB per rank (counter max_rank_bytes). Counters: makespan / lower bound,
// worst arena / live set. Skips (with a message) when ../shared/data is absent.
// Report mode (no timing): `bench_plan --arena_report` plans GPT-6.7B and T5-11B 65,536-token
// batches (seeds 1..6) and a GPT 1,048,576-token batch and prints, per batch, the worst rank's
// largest simultaneously-live set, its planned arena and their ratio (target <= 1.10).
// `--arena_dump=gpt|t5|gpt1m:SEED` prints that batch's worst rank's buffers (role, mb, stage,
// size, lifetime, offset) for studying fragmentation; `--arena_dump=s8m64[:RANK]` those of
// BM_lower_validate/8/64's plan.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "batching/real_batches.hpp"
#include "pipeplan/batching/draw.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"
#include "profile_models.hpp"

namespace {

namespace pp = pipeplan::plan;

struct setup {
    const char* model_name;
    const char* lengths_file;
    int tp, stages, layers, hidden;
    int max_seqlen_tokens = 0;  ///< 0 = no truncation
    double long_share = 0;      ///< share of long-target samples (draw_mixed_batch), 0 = real samples only
};
constexpr setup gpt{"gpt_6.7b", "superni_gpt.csv", 2, 4, 8, 4096};
/// GPT-6.7B on 16 stages of 2 layers (V chunks of one layer): where fill and drain cost most.
constexpr setup gpt_s16{"gpt_6.7b", "superni_gpt.csv", 2, 16, 2, 4096};
constexpr setup t5{"t5_11b", "superni_llama.csv", 4, 4, 6, 1024};
/// T5 on the GPT length mixture (longer targets), truncated at 4096 as the side-by-side runs do.
constexpr setup t5_gpt_lengths{"t5_11b", "superni_gpt.csv", 4, 4, 6, 1024, 4096};
/// T5 on SuperNI with 25 % synthetic long-target samples (inputs 40–150, targets 80–300 tokens).
constexpr setup t5_mixed{"t5_11b", "superni_llama.csv", 4, 4, 6, 1024, 0, 0.25};

pp::planner_options options_of(const setup& s) {
    pp::planner_options o;
    o.config.stages = s.stages;
    o.config.layers_per_stage = s.layers;
    o.config.tp = s.tp;
    o.config.device_memory_mb = 36000;
    o.hidden_size = s.hidden;
    o.split.lengths.max_seqlen_tokens = s.max_seqlen_tokens;
    o.split.lengths.max_dec_seqlen_tokens = s.max_seqlen_tokens;
    return o;
}

/// How the planner meets its batches: one planner re-planning the same batch (its shape-cost
/// cache warm after the first iteration), a fresh planner per iteration (what one `pipeplan
/// plan` run pays), or one planner cycling through 8 different seeded batches (a training run).
enum class reuse { same_batch, fresh_planner, new_batches };

void run_planner(benchmark::State& state, const setup& s, long long tokens, reuse mode = reuse::same_batch) {
    const auto* m = pipeplan::test::find_profile_model(s.model_name, pipeplan::interpolation_mode::recommended);
    if (!m) {
        state.SkipWithError("../shared/data is absent: no profiles or lengths to benchmark on");
        return;
    }
    std::vector<std::vector<pipeplan::batching::sample>> batches;
    for (std::uint64_t seed = 42; seed < (mode == reuse::new_batches ? 50u : 43u); ++seed)
        batches.push_back(pipeplan::test::draw_mixed_batch(s.lengths_file, tokens, seed, s.long_share));
    const pp::planner_options o = options_of(s);
    pp::planner<pipeplan::profile_cost_model> planner(*m, o);
    pp::plan_result r;
    std::size_t next = 0;
    for (auto _ : state) {
        if (mode == reuse::fresh_planner) {
            pp::planner<pipeplan::profile_cost_model> fresh(*m, o);
            r = fresh.plan(batches.front());
        } else {
            r = planner.plan(batches[next++ % batches.size()]);
        }
        benchmark::DoNotOptimize(r.plan.programs.data());
    }
    std::size_t max_bytes = 0;
    double worst_arena = 1.0;
    for (std::size_t k = 0; k < r.plan.programs.size(); ++k) {
        max_bytes = std::max(max_bytes, pp::to_binary(pp::share_of(r.plan, k)).size());
        worst_arena = std::max(worst_arena, r.arena_mb[k] / r.live_peak_mb[k]);
    }
    state.counters["microbatches"] = static_cast<double>(r.plan.header.microbatches.size());
    state.counters["makespan_over_lb"] = r.makespan_ms / r.lower_bound_ms;
    state.counters["arena_over_live"] = worst_arena;
    state.counters["max_rank_bytes"] = static_cast<double>(max_bytes);
    state.counters["split_ms"] = r.times.split_ms;
    state.counters["schedule_ms"] = r.times.schedule_ms;
    state.counters["lower_ms"] = r.times.lower_ms;
}

void BM_plan_gpt(benchmark::State& s) { run_planner(s, gpt, s.range(0)); }
void BM_plan_t5(benchmark::State& s) { run_planner(s, t5, s.range(0)); }
void BM_plan_gpt_fresh(benchmark::State& s) { run_planner(s, gpt, s.range(0), reuse::fresh_planner); }
void BM_plan_gpt_s16_fresh(benchmark::State& s) { run_planner(s, gpt_s16, s.range(0), reuse::fresh_planner); }
void BM_plan_t5_fresh(benchmark::State& s) { run_planner(s, t5, s.range(0), reuse::fresh_planner); }
void BM_plan_t5_gpt_lengths(benchmark::State& s) { run_planner(s, t5_gpt_lengths, s.range(0)); }
void BM_plan_t5_gpt_lengths_fresh(benchmark::State& s) { run_planner(s, t5_gpt_lengths, s.range(0), reuse::fresh_planner); }
void BM_plan_t5_mixed_fresh(benchmark::State& s) { run_planner(s, t5_mixed, s.range(0), reuse::fresh_planner); }
void BM_plan_gpt_new_batches(benchmark::State& s) { run_planner(s, gpt, s.range(0), reuse::new_batches); }
void BM_plan_t5_new_batches(benchmark::State& s) { run_planner(s, t5, s.range(0), reuse::new_batches); }
/// One `pipeplan plan --lengths superni_gpt.csv --tokens TOKENS --seed SEED` run (GPT-6.7B, S 4):
/// the first batch of the library's drawer, which reshuffles the file for further epochs, so a
/// budget beyond the file's 16.9 M tokens still gets its samples (146,000,000 tokens: ~1 M samples).
void run_drawn(benchmark::State& state, long long tokens, std::uint64_t seed) {
    const auto* m = pipeplan::test::find_profile_model(gpt.model_name, pipeplan::interpolation_mode::recommended);
    const auto dir = pipeplan::test::shared_data_dir();
    if (!m || !dir) {
        state.SkipWithError("../shared/data is absent: no profiles or lengths to benchmark on");
        return;
    }
    const auto pool = pipeplan::batching::read_length_pool({*dir / "lengths" / gpt.lengths_file});
    pipeplan::batching::draw_options d;
    d.tokens = tokens;
    d.seed = seed;
    const auto batch = pipeplan::batching::batch_drawer(pool, d).next();
    const pp::planner_options o = options_of(gpt);
    pp::plan_result r;
    for (auto _ : state) {
        pp::planner<pipeplan::profile_cost_model> fresh(*m, o);
        r = fresh.plan(batch);
        benchmark::DoNotOptimize(r.plan.programs.data());
    }
    state.counters["samples"] = static_cast<double>(batch.size());
    state.counters["microbatches"] = static_cast<double>(r.plan.header.microbatches.size());
    state.counters["memory_attempts"] = static_cast<double>(r.memory_attempts);
    state.counters["split_ms"] = r.times.split_ms;
    state.counters["schedule_ms"] = r.times.schedule_ms;
    state.counters["lower_ms"] = r.times.lower_ms;
}

void BM_plan_gpt_drawn_fresh(benchmark::State& s) { run_drawn(s, s.range(0), 1); }
/// The batch and the work of `pipeplan plan ... --tokens 65536 --seed range(0)` (GPT-6.7B 65k,
/// S 4, the CLI's `planning_ms.total`): seeds 1-5 cost 59.0, 60.5, 48.5, 72.8 and 56.9 M
/// instructions (callgrind, `--toggle-collect='*within_memory*'`, release build).
void BM_plan_gpt_cli_fresh(benchmark::State& s) { run_drawn(s, 65536, static_cast<std::uint64_t>(s.range(0))); }

/// One `pipeplan plan` run of a deep pipeline: GPT-6.7B, one layer per stage, S = range(0)
/// stages, one 65,536-token batch (65 micro-batches).
void BM_plan_gpt_deep_fresh(benchmark::State& s) {
    setup deep = gpt;
    deep.stages = static_cast<int>(s.range(0));
    deep.layers = 1;
    run_planner(s, deep, 65536, reuse::fresh_planner);
}

/// The synthetic scenario of BM_lower_validate: S stages, M micro-batches of seeded sizes.
pipeplan::schedule::scenario synthetic_scenario(std::size_t S, std::size_t M) {
    pipeplan::splitmix64 rng(7);
    std::vector<double> mult, base(S, 1.0);
    for (std::size_t j = 0; j < M; ++j) mult.push_back(1.0 + static_cast<double>(rng.below(300)) / 100.0);
    auto sc = pipeplan::schedule::scaled_scenario(base, mult, 2.0, 100.0, 10.0, 12.0);
    sc.activation_mb = mult;
    return sc;
}

/// Lowering + validation alone: 1F1B, S stages, M micro-batches of seeded sizes.
void BM_lower_validate(benchmark::State& state) {
    const auto sc = synthetic_scenario(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)));
    const auto sched = pipeplan::schedule::one_f_one_b{}(sc);
    std::size_t instructions = 0;
    double worst_arena = 1.0;
    for (auto _ : state) {
        const pp::execution_plan p = pp::lower(sc, sched);
        const auto rep = pp::validate(p);
        if (!rep.ok()) state.SkipWithError("invalid plan");
        instructions = 0;
        for (const auto& prog : p.programs) {
            instructions += prog.instructions.size();
            worst_arena = std::max(worst_arena, static_cast<double>(prog.arena_bytes) / static_cast<double>(prog.live_peak_bytes));
        }
        benchmark::DoNotOptimize(rep.violations.data());
    }
    state.counters["instructions"] = static_cast<double>(instructions);
    state.counters["arena_over_live"] = worst_arena;
}

/// BM_lower_validate lowering into one plan kept across iterations (plan::lower_into), as a
/// trainer that lowers every iteration would: no new plan to allocate and first touch.
void BM_lower_validate_reused(benchmark::State& state) {
    const auto sc = synthetic_scenario(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)));
    const auto sched = pipeplan::schedule::one_f_one_b{}(sc);
    pp::execution_plan p;
    for (auto _ : state) {
        pp::lower_into(p, sc, sched);
        const auto rep = pp::validate(p);
        if (!rep.ok()) state.SkipWithError("invalid plan");
        benchmark::DoNotOptimize(rep.violations.data());
    }
}

/// The rank with the largest arena / live-set ratio.
std::size_t worst_rank(const pp::plan_result& r) {
    std::size_t w = 0;
    for (std::size_t k = 1; k < r.arena_mb.size(); ++k)
        if (r.arena_mb[k] / r.live_peak_mb[k] > r.arena_mb[w] / r.live_peak_mb[w]) w = k;
    return w;
}

/// Plans one batch for the report modes; nullopt (with a message) without the data.
std::optional<pp::plan_result> plan_batch(const setup& s, long long tokens, std::uint64_t seed) {
    const auto* m = pipeplan::test::find_profile_model(s.model_name, pipeplan::interpolation_mode::recommended);
    if (!m) {
        std::fprintf(stderr, "../shared/data is absent: no profiles or lengths to report on\n");
        return std::nullopt;
    }
    pp::planner<pipeplan::profile_cost_model> planner(*m, options_of(s));
    return planner.plan(pipeplan::test::draw_batch(s.lengths_file, tokens, seed));
}

int arena_report() {
    struct row {
        const char* name;
        const setup* s;
        long long tokens;
        std::uint64_t seed;
    };
    std::vector<row> rows;
    for (std::uint64_t seed = 1; seed <= 6; ++seed) rows.push_back({"gpt_6.7b 65k", &gpt, 65536, seed});
    for (std::uint64_t seed = 1; seed <= 6; ++seed) rows.push_back({"t5_11b 65k", &t5, 65536, seed});
    rows.push_back({"gpt_6.7b 1M", &gpt, 1048576, 42});
    std::printf("%-14s %5s %4s %5s %12s %12s %7s %10s\n", "batch", "seed", "mbs", "rank", "live_mb", "arena_mb",
                "ratio", "all_ranks");
    double worst = 1.0;
    for (const row& x : rows) {
        const auto r = plan_batch(*x.s, x.tokens, x.seed);
        if (!r) return 0;
        const std::size_t w = worst_rank(*r);
        std::string all;
        for (std::size_t k = 0; k < r->arena_mb.size(); ++k) {
            char buf[16];
            std::snprintf(buf, sizeof buf, "%s%.3f", k ? " " : "", r->arena_mb[k] / r->live_peak_mb[k]);
            all += buf;
        }
        const double ratio = r->arena_mb[w] / r->live_peak_mb[w];
        worst = std::max(worst, ratio);
        std::printf("%-14s %5llu %4zu %5zu %12.1f %12.1f %7.4f %s\n", x.name, static_cast<unsigned long long>(x.seed),
                    r->plan.header.microbatches.size(), w, r->live_peak_mb[w], r->arena_mb[w], ratio, all.c_str());
    }
    std::printf("worst arena / live set: %.4f\n", worst);
    return 0;
}

int arena_dump(const std::string& what) {
    const auto colon = what.find(':');
    const std::string name = what.substr(0, colon);
    const std::uint64_t seed = colon == std::string::npos ? 42 : std::stoull(what.substr(colon + 1));
    const setup* s = name == "t5" ? &t5 : &gpt;
    std::optional<pp::plan_result> r;
    if (name == "s8m64") {  // BM_lower_validate's plan; the number is a rank (default: the worst)
        const auto sc = synthetic_scenario(8, 64);
        r.emplace();
        r->plan = pp::lower(sc, pipeplan::schedule::one_f_one_b{}(sc));
        for (const auto& prog : r->plan.programs) {
            r->arena_mb.push_back(static_cast<double>(prog.arena_bytes) / 1e6);
            r->live_peak_mb.push_back(static_cast<double>(prog.live_peak_bytes) / 1e6);
        }
    } else {
        r = plan_batch(*s, name == "gpt1m" ? 1048576 : 65536, seed);
    }
    if (!r) return 0;
    const std::size_t w = name == "s8m64" && colon != std::string::npos ? seed % r->arena_mb.size() : worst_rank(*r);
    const pp::rank_program& p = r->plan.programs[w];
    const auto life = pp::buffer_lifetimes(p);
    std::printf("rank %zu: live %.1f MB, arena %.1f MB, %zu instructions\n", w, r->live_peak_mb[w], r->arena_mb[w],
                p.instructions.size());
    std::printf("%5s %-15s %4s %5s %10s %6s %6s %10s\n", "slot", "role", "mb", "stage", "size_mb", "first", "last", "offset_mb");
    for (std::size_t b = 0; b < p.buffers.size(); ++b)
        if (life[b].used())
            std::printf("%5zu %-15s %4u %5u %10.2f %6u %6u %10.2f\n", b, std::string(pp::to_string(p.buffers[b].role)).c_str(),
                        p.buffers[b].microbatch, p.buffers[b].stage, static_cast<double>(p.buffers[b].size_bytes) / 1e6,
                        life[b].first, life[b].last, static_cast<double>(p.buffers[b].offset_bytes) / 1e6);
    return 0;
}

/// The parts of BM_lower_validate/8/64 alone: lowering without buffer planning, buffer
/// planning alone, validation alone.
void BM_lower_parts(benchmark::State& state) {
    const auto sc = synthetic_scenario(8, 64);
    const auto sched = pipeplan::schedule::one_f_one_b{}(sc);
    const pp::execution_plan planned = pp::lower(sc, sched);
    const auto cp = pp::lower_compute(sc, sched);
    const auto unplanned = pp::insert_communication(cp, sc);
    for (auto _ : state) {
        switch (state.range(0)) {
            case 0: {
                const auto progs = pp::insert_communication(pp::lower_compute(sc, sched), sc);
                benchmark::DoNotOptimize(progs.data());
                break;
            }
            case 1: {
                auto progs = unplanned;
                for (auto& prog : progs) pp::plan_buffers(prog);
                benchmark::DoNotOptimize(progs.data());
                break;
            }
            default: {
                const auto rep = pp::validate(planned);
                benchmark::DoNotOptimize(rep.violations.data());
            }
        }
    }
}

}  // namespace

BENCHMARK(BM_lower_parts)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_gpt)->Arg(65536)->Arg(1048576)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_gpt_fresh)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_gpt_s16_fresh)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5_fresh)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5_gpt_lengths)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5_gpt_lengths_fresh)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5_mixed_fresh)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_gpt_cli_fresh)->DenseRange(1, 5)->Unit(benchmark::kMillisecond);
// Large batches, one `pipeplan plan --lengths superni_gpt.csv --tokens T --seed 1` run each:
// 36,500,000, 73,000,000 and 146,000,000 tokens ≈ 250,000, 500,000 and 1,000,000 samples (146
// tokens per sample on average; counter `samples`).
BENCHMARK(BM_plan_gpt_drawn_fresh)->Arg(36500000)->Arg(73000000)->Arg(146000000)->Iterations(1)->Unit(benchmark::kSecond);
// Deep pipelines, one `pipeplan plan` run each: S 256, 512, 1024 (time per doubling of S).
BENCHMARK(BM_plan_gpt_deep_fresh)->Arg(256)->Arg(512)->Arg(1024)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_plan_gpt_new_batches)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_plan_t5_new_batches)->Arg(65536)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lower_validate)->Args({8, 64})->Args({4, 32})->Unit(benchmark::kMicrosecond);
// Deep pipelines: lowering + validation at S 256, 512, 1024 with 65 micro-batches (the
// micro-batch count of a 65,536-token GPT batch), to measure how it scales with S.
BENCHMARK(BM_lower_validate)->Args({256, 65})->Args({512, 65})->Args({1024, 65})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lower_validate_reused)->Args({8, 64})->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--arena_report") == 0) return arena_report();
        if (std::strncmp(argv[i], "--arena_dump=", 13) == 0) return arena_dump(argv[i] + 13);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
