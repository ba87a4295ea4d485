// The runtime's commands:
//   `pipeplan run-cpu`: plans a batch for the tiny reference model and trains it on the CPU
//   backend (one thread per rank), checking every iteration against a single-thread reference
//   (runtime/cpu/run.hpp). Prints a summary or (--json) the report; exits non-zero when the
//   check fails.
//   `pipeplan serve-plans`: plans a stream of batch files (iteration i = the i-th file by name)
//   ahead on planner threads and writes every rank's plan to a plan store (runtime/serve.hpp),
//   planning with plan/planner.hpp from the model/cluster flags of `pipeplan plan`
//   (plan_inputs.hpp), or with run-cpu's planner for `--model tiny` (the default).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <string_view>
#include <type_traits>
#include <vector>
#include <memory>
#include <optional>
#include <string>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flags.hpp"
#include "plan_inputs.hpp"
#include "pipeplan/batching/batch_csv.hpp"
#include "pipeplan/core/file.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/runtime/cpu/run.hpp"
#include "pipeplan/runtime/serve.hpp"
#include "pipeplan/runtime/store_spec.hpp"

namespace pipeplan::cli {
namespace {

constexpr std::size_t max_cpu_ranks = 256;      ///< --stages x --dp: one thread per rank
constexpr std::size_t max_plan_depth = 1024;    ///< serve-plans --depth
constexpr std::size_t max_iterations = 1000000; ///< run-cpu --iterations
constexpr long max_timeout_ms = 86400000;       ///< --timeout-ms (one day)

/// The ranks (threads) of the tiny model's job: S x dp at most max_cpu_ranks.
void check_ranks(const runtime::cpu::run_cpu_options& o) {
    if (o.devices * o.dp > max_cpu_ranks)
        throw limit_exceeded("--stages " + std::to_string(o.devices) + " x --dp " + std::to_string(o.dp) + " = " +
                             std::to_string(o.devices * o.dp) + " ranks (one thread each); at most " +
                             std::to_string(max_cpu_ranks) + " are supported");
}

struct run_cpu_args {
    std::string batch, schedule = "1f1b", store;
    runtime::cpu::run_cpu_options o;
    long timeout_ms = 30000;
    bool json = false;
};

nlohmann::json to_json(const runtime::cpu::run_cpu_report& r) {
    nlohmann::json its = nlohmann::json::array();
    for (const auto& i : r.iterations)
        its.push_back({{"loss", i.loss},
                       {"reference_loss", i.reference_loss},
                       {"max_grad_rel_error", i.max_grad_rel_error},
                       {"microbatches", i.microbatches}});
    return {{"schedule", r.schedule}, {"ranks", r.ranks},     {"samples", r.samples},
            {"tokens", r.tokens},     {"iterations", its},    {"ok", r.ok}};
}

void run(run_cpu_args& a) {
    a.o.schedule = schedule::parse_schedule_name(a.schedule);
    check_ranks(a.o);
    a.o.timeout = runtime::timeout_ms(a.timeout_ms);
    const auto batch = batching::read_batch_csv(a.batch);
    std::optional<runtime::any_store> store;
    if (!a.store.empty()) store.emplace(runtime::open_store(a.store));
    const auto r = runtime::cpu::run_cpu(batch, a.o, store ? &*store : static_cast<runtime::any_store*>(nullptr));
    if (a.json) {
        std::puts(to_json(r).dump(2).c_str());
    } else {
        fmt::print("run-cpu: {} samples ({} tokens), schedule {}, {} ranks{}\n", r.samples, r.tokens, r.schedule,
                   r.ranks, store ? ", plans through " + store->describe() : std::string());
        for (std::size_t k = 0; k < r.iterations.size(); ++k) {
            const auto& i = r.iterations[k];
            fmt::print("  iteration {}: {} micro-batches, loss {:.12f} (reference {:.12f}), max grad rel error {:.2e}\n", k,
                       i.microbatches, i.loss, i.reference_loss, i.max_grad_rel_error);
        }
        fmt::print("  check: {}\n", r.ok ? "passed" : "FAILED");
    }
    if (!r.ok) throw error("run-cpu: the pipeline run does not match the reference within the tolerance");
}

struct serve_args {
    plan_model_flags inputs;  ///< the model/cluster flag block of `pipeplan plan` (plan_inputs.hpp)
    std::string batches, store, job = "pipeplan";
    std::size_t mbs = 0;      ///< tiny model only
    std::uint64_t seed = 1;   ///< tiny model only
    std::size_t threads = 2, depth = 2;
    bool json = false;
    std::set<std::string> given;
};

/// The model `--model tiny` names: run-cpu's tiny reference model.
constexpr std::string_view tiny_model = "tiny";

/// The batch files of DIR (*.csv), by name.
std::vector<std::filesystem::path> batch_files(const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw error("--batches '" + dir + "' is not a directory");
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() == ".csv") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw error("--batches '" + dir + "' holds no .csv batch file");
    return files;
}

/// run-cpu's job options from the flag block (--model tiny); flags of real models are errors.
runtime::cpu::run_cpu_options tiny_options(const serve_args& a) {
    const plan_model_flags& f = a.inputs;
    for (const char* flag : {"--profiles", "--tp", "--layers-per-stage", "--layers", "--memory-mb", "--zero-stage", "--accounting",
                             "--bandwidth-gbps", "--latency-us", "--devices-per-node", "--intra-node-bandwidth-gbps",
                             "--hidden-size"})
        reject_unless(a.given, flag, false, "to --model tiny (it plans with run-cpu's fixed tiny model)");
    if (f.stages < 1) throw invalid_argument("--stages S is required for --model tiny");
    runtime::cpu::run_cpu_options o;
    o.schedule = f.schedule == "auto" ? schedule::schedule_name::one_f_one_b : schedule::parse_schedule_name(f.schedule);
    o.devices = static_cast<std::size_t>(f.stages);
    o.dp = static_cast<std::size_t>(f.dp);
    o.chunks = a.given.count("--chunks") > 0 ? static_cast<std::size_t>(f.chunks) : 0;
    o.max_seqlen_tokens = static_cast<std::size_t>(f.max_seqlen);
    o.mbs = a.mbs;
    o.seed = a.seed;
    check_ranks(o);
    return o;
}

void serve_with(const std::function<plan::execution_plan(std::uint64_t)>& planner,
                const std::vector<std::filesystem::path>& files, const serve_args& a) {
    runtime::any_store store = runtime::open_store(a.store);
    runtime::serve_options so{a.job, 0, files.size(), a.threads, a.depth};
    nlohmann::json its = nlohmann::json::array();
    const auto rep = runtime::serve_plans(planner, store, so, [&](std::uint64_t it, const plan::execution_plan& p) {
        its.push_back({{"iteration", it}, {"batch", files[it].string()}, {"schedule", p.header.schedule},
                       {"microbatches", p.header.microbatches.size()}, {"ranks", p.programs.size()}});
        if (!a.json)
            fmt::print("iteration {}: {} -> {} rank plans, {} micro-batches, {}\n", it, files[it].string(), p.programs.size(),
                       p.header.microbatches.size(), p.header.schedule);
    });
    if (a.json)
        std::puts(nlohmann::json{{"store", store.describe()}, {"job", a.job}, {"model", a.inputs.model},
                                 {"iterations", its}, {"plans", rep.plans}, {"bytes", rep.bytes}}.dump(2).c_str());
    else
        fmt::print("served {} iterations ({} rank plans, {} bytes) of model '{}' to {} as job '{}'\n", rep.iterations,
                   rep.plans, rep.bytes, a.inputs.model, store.describe(), a.job);
}

void serve(serve_args& a) {
    const auto files = batch_files(a.batches);
    if (a.inputs.model == tiny_model) {
        const auto planner = runtime::cpu::make_tiny_planner(tiny_options(a));  // one for every iteration
        serve_with([&](std::uint64_t it) { return planner->plan(batching::read_batch_csv(files[it]), it); }, files, a);
        return;
    }
    reject_unless(a.given, "--mbs", false, "to a planned model (the planner splits the batch)");
    reject_unless(a.given, "--seed", false, "to a planned model (only the tiny model has seeded parameters)");
    require_planner_flags(a.inputs);
    reject_inapplicable_model_flags(a.inputs, a.given);
    (void)to_planner_options(a.inputs, 0);  // flag errors before any file is read or thread started
    with_plan_model(a.inputs, [&](const auto& model) {
        plan::planner_options po = to_planner_options(a.inputs, 0);
        apply_layer_layout(po, a.inputs, model);
        // One planner per planning thread, kept across iterations (its cost cache and scratch).
        plan::planner_pool<std::decay_t<decltype(model)>> planners(model, std::move(po));
        serve_with([&](std::uint64_t it) { return planners.plan(batching::read_batch_csv(files[it]), it).plan; }, files,
                   a);
    });
}

/// The options that describe the tiny model's job (shared by run-cpu and serve-plans).
void add_job_options(CLI::App* sub, runtime::cpu::run_cpu_options& o, std::string& schedule) {
    sub->add_option("--stages", o.devices, "Pipeline stages S (devices per replica)")
        ->required()
        ->check(integer_in<std::size_t>(1, max_cpu_ranks));
    sub->add_option("--schedule", schedule, name_list<schedule::schedule_name>(" | "))->capture_default_str();
    sub->add_option("--dp", o.dp, "Data-parallel replicas")
        ->capture_default_str()
        ->check(integer_in<std::size_t>(1, max_cpu_ranks));
    sub->add_option("--chunks", o.chunks, "Chunks per device for interleaved (default 2)")
        ->check(integer_in<std::size_t>(1, max_chunks));
    sub->add_option("--mbs", o.mbs, "Fixed micro-batch size (default: the exact split)")
        ->check(integer_in<std::size_t>(1, max_mbs));
    sub->add_option("--max-seqlen", o.max_seqlen_tokens, "Truncate samples at this many tokens (0: none)")
        ->check(integer_in<std::size_t>(0, max_seqlen_tokens));
    sub->add_option("--seed", o.seed, "Seed of the tiny model's parameters and tokens")
        ->capture_default_str()
        ->check(integer_in<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
}

}  // namespace

void register_serve_plans(CLI::App& app) {
    auto a = std::make_shared<serve_args>();
    a->inputs.model = std::string(tiny_model);
    CLI::App* sub = app.add_subcommand(
        "serve-plans", "Plan a stream of batch files ahead (planner threads) into a plan store, one plan per "
                       "iteration and rank, with the model and cluster flags of `pipeplan plan` (or run-cpu's tiny model)");
    sub->add_option("--batches", a->batches, "Folder of batch CSVs; iteration i plans the i-th file by name")->required();
    sub->add_option("--store", a->store, "dir:PATH or redis://[[USER]:PASSWORD@]HOST:PORT")->required();
    sub->add_option("--model", a->inputs.model,
                    "tiny (run-cpu's model), a profiled model (gpt_6.7b, t5_11b) or analytic:<preset>")
        ->capture_default_str();
    add_plan_model_options(sub, a->inputs, false);
    sub->add_option("--mbs", a->mbs, "--model tiny: fixed micro-batch size (default: the exact split)")
        ->check(integer_in<std::size_t>(1, max_mbs));
    sub->add_option("--seed", a->seed, "--model tiny: seed of the tiny model's parameters and tokens")
        ->capture_default_str()
        ->check(integer_in<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
    sub->add_option("--job", a->job, "Job name (the store's key prefix)")->capture_default_str();
    sub->add_option("--threads", a->threads, "Planner threads")
        ->capture_default_str()
        ->check(integer_in<std::size_t>(1, max_threads));
    sub->add_option("--depth", a->depth, "Iterations planned ahead")
        ->capture_default_str()
        ->check(integer_in<std::size_t>(1, max_plan_depth));
    sub->add_flag("--json", a->json, "Print the report as one JSON object");
    sub->callback([a, sub] {
        a->given = given_flags(*sub);
        serve(*a);
    });
}

void register_fetch_plan(CLI::App& app) {
    struct fetch_args {
        std::string store, job = "pipeplan", out;
        std::uint64_t iteration = 0;
        std::uint32_t rank = 0;
        long timeout_ms = 30000;
    };
    auto a = std::make_shared<fetch_args>();
    CLI::App* sub = app.add_subcommand(
        "fetch-plan", "Fetch one rank's plan of one iteration from a plan store (what a trainer rank reads) and write "
                      "it as a binary plan file (checked against the key: job, iteration, rank; signed records with "
                      "PIPEPLAN_STORE_KEY_FILE; validate with plan-check)");
    sub->add_option("--store", a->store, "dir:PATH or redis://[[USER]:PASSWORD@]HOST:PORT")->required();
    sub->add_option("--job", a->job, "Job name (the store's key prefix)")->capture_default_str();
    sub->add_option("--iteration", a->iteration, "Iteration")
        ->required()
        ->check(integer_in<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max()));
    sub->add_option("--rank", a->rank, "Rank")->required()->check(integer_in<std::uint32_t>(0, std::numeric_limits<std::uint32_t>::max()));
    sub->add_option("--out", a->out, "Plan file to write (binary; '-' for standard output)")->required();
    sub->add_option("--timeout-ms", a->timeout_ms, "Longest wait for the plan")
        ->capture_default_str()
        ->check(integer_in<long>(0, max_timeout_ms));
    sub->callback([a] {
        runtime::any_store store = runtime::open_store(a->store);
        const runtime::plan_key key{a->job, a->iteration, a->rank};
        write_output_file(a->out, plan::to_binary(runtime::fetch_rank_plan(store, key, runtime::timeout_ms(a->timeout_ms))));
    });
}

void register_run_cpu(CLI::App& app) {
    auto a = std::make_shared<run_cpu_args>();
    CLI::App* sub = app.add_subcommand(
        "run-cpu", "Train the tiny reference model with pipeline plans on the CPU backend and check it "
                   "against a single-thread run");
    sub->add_option("--batch", a->batch, "Batch CSV (input_tokens,target_tokens; one sample per row)")->required();
    add_job_options(sub, a->o, a->schedule);
    sub->add_option("--iterations", a->o.iterations, "Training iterations (SGD steps)")
        ->capture_default_str()
        ->check(integer_in<std::size_t>(1, max_iterations));
    sub->add_option("--store", a->store, "Pass plans through a plan store: dir:PATH or redis://HOST:PORT");
    sub->add_option("--timeout-ms", a->timeout_ms, "Longest wait for a message, a collective or a plan")
        ->capture_default_str()
        ->check(integer_in<long>(1, max_timeout_ms));
    auto* fail_rank = sub->add_option("--fail-rank", a->o.fail_rank, "Fault injection: this rank fails (with --fail-at)")
                          ->check(integer_in<std::size_t>(0, max_cpu_ranks - 1));
    auto* fail_at = sub->add_option("--fail-at", a->o.fail_at,
                                    "Fault injection: --fail-rank fails just before its N-th instruction (0-based); "
                                    "the other ranks end aborted and the command exits 1")
                        ->check(integer_in<std::size_t>(0, std::numeric_limits<std::uint32_t>::max()));
    fail_rank->needs(fail_at);
    fail_at->needs(fail_rank);
    sub->add_flag("--json", a->json, "Print the report as one JSON object");
    sub->callback([a] { run(*a); });
}

}  // namespace pipeplan::cli
