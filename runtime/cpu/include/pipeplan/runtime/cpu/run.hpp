// pipeplan/runtime/cpu/run.hpp — `pipeplan run-cpu` as a library call: plan every iteration
// of a batch for the tiny model with the library's planner (tiny_planner, plans.hpp),
// optionally pass the plans through a plan store (each rank reads its own plan back, as a
// multi-node job does), train K iterations on the CPU backend and check every iteration
// against the single-thread reference. Plans are made ahead by a
// plan_prefetcher (two planner threads, two iterations ahead) while the cluster trains.
//
// Every iteration trains on the same batch; the reference applies the same optimizer to its
// own parameters, so iteration k compares losses and gradients after k − 1 updates on both
// sides. An iteration passes when the loss and every gradient tensor match to `tolerance`
// (relative).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/runtime/cpu/plans.hpp"
#include "pipeplan/runtime/cpu/split.hpp"
#include "pipeplan/runtime/cpu/trainer.hpp"
#include "pipeplan/plan/identity.hpp"
#include "pipeplan/runtime/plan_store.hpp"
#include "pipeplan/runtime/prefetcher.hpp"

namespace pipeplan::runtime::cpu {

struct run_cpu_options {
    schedule::schedule_name schedule = schedule::schedule_name::one_f_one_b;
    std::size_t devices = 2;            ///< S
    std::size_t dp = 1;
    std::size_t chunks = 0;             ///< interleaved chunks (0: 2 for interleaved, else 1)
    std::size_t mbs = 0;                ///< 0: the exact split
    std::size_t iterations = 1;
    std::size_t max_seqlen_tokens = 0;
    std::uint64_t seed = 1;
    std::size_t blocks_per_stage = 2;   ///< tiny model: blocks per virtual stage
    double lr = 0.1;                    ///< SGD learning rate
    double tolerance = 1e-9;
    timeout_ms timeout{30000};
    std::string job = "run-cpu";        ///< plan-store job name
    /// Fault injection: rank fail_rank fails just before its instruction fail_at (no_fault: off).
    std::size_t fail_rank = executor_options::no_fault, fail_at = executor_options::no_fault;
};

struct run_cpu_iteration {
    double loss = 0;
    double reference_loss = 0;
    double max_grad_rel_error = 0;      ///< max over tensors of ‖g − g_ref‖ / ‖g_ref‖
    std::size_t microbatches = 0;
};

struct run_cpu_report {
    std::vector<run_cpu_iteration> iterations;
    std::size_t ranks = 0;
    std::size_t samples = 0;
    std::size_t tokens = 0;
    std::string schedule;
    bool ok = true;                     ///< every iteration within tolerance
};

/// Effective chunks of a run (see run_cpu_options::chunks): the schedule's chunk rule decides.
[[nodiscard]] inline std::size_t effective_chunks(const run_cpu_options& o) {
    const bool splits = schedule::traits_of(o.schedule).chunks == schedule::chunk_rule::splits_into_chunks;
    if (o.chunks == 0) return splits ? 2 : 1;
    if (!splits && o.chunks != 1)
        throw option_error("chunks", "{} " + std::to_string(o.chunks) + " needs a schedule that splits stages into chunks "
                                     "(interleaved), not '" + std::string(schedule::to_string(o.schedule)) + "'");
    return o.chunks;
}

/// The rank plans of `p`, written to `store` and read back by every rank (when given).
template <class Store>
[[nodiscard]] std::vector<plan::rank_plan> through_store(const plan::execution_plan& p, Store* store,
                                                         const run_cpu_options& o, std::uint64_t iteration) {
    if (!store) return rank_plans(p);
    plan::execution_plan stamped = p;
    plan::stamp_identity(stamped);
    for (std::uint32_t r = 0; r < p.programs.size(); ++r)
        store->put(plan_key{o.job, iteration, r}, plan::to_binary(plan::share_of(stamped, r)));
    std::vector<plan::rank_plan> out;
    for (std::uint32_t r = 0; r < p.programs.size(); ++r) {
        const plan_key key{o.job, iteration, r};
        out.push_back(fetch_rank_plan(*store, key, o.timeout));
        if (out.back().header.plan_id != stamped.header.plan_id)
            throw input_error(store->describe() + " " + key.str(), 0, "header.plan_id",
                              "plan " + plan::plan_id_hex(out.back().header.plan_id) + " is not the plan written (" +
                                  plan::plan_id_hex(stamped.header.plan_id) + "): another writer of job '" + o.job + "'?");
    }
    return out;
}

/// The tiny model of `o` (blocks = S · C · blocks_per_stage, seeded by o.seed) and its planner.
[[nodiscard]] inline std::shared_ptr<tiny_planner> make_tiny_planner(const run_cpu_options& o) {
    const std::size_t chunks = effective_chunks(o);
    if (o.devices == 0) throw option_error("devices", "run-cpu: {} must be >= 1");
    if (o.dp == 0) throw option_error("dp", "run-cpu: {} must be >= 1");
    if (o.blocks_per_stage == 0) throw option_error("blocks_per_stage", "run-cpu: {} must be >= 1");
    model_config c;
    c.blocks = o.devices * chunks * o.blocks_per_stage;
    c.seed = o.seed;
    return std::make_shared<tiny_planner>(c, tiny_split_options{o.devices, chunks, o.dp, o.mbs, o.max_seqlen_tokens},
                                          o.schedule);
}

/// The tiny model, a batch and the plan of any iteration of it: what run-cpu trains.
struct tiny_job {
    std::shared_ptr<tiny_planner> planner;
    std::vector<batching::sample> batch;
    std::vector<std::size_t> lengths_tokens;  ///< every sample's length (what its micro-batch pads to)

    [[nodiscard]] const model_config& model() const noexcept { return planner->model(); }
    [[nodiscard]] plan::execution_plan plan(std::uint64_t iteration) const { return planner->plan(batch, iteration); }
};

/// The job of `batch` under `o` (see make_tiny_planner()).
[[nodiscard]] inline tiny_job make_tiny_job(std::span<const batching::sample> batch, const run_cpu_options& o) {
    tiny_job job;
    job.planner = make_tiny_planner(o);
    job.batch.assign(batch.begin(), batch.end());
    job.lengths_tokens = tiny_lengths(batch, job.planner->split_options());
    return job;
}

/// Runs the job (see the file comment). `Store` is any plan_store; pass nullptr for none.
template <class Store>
[[nodiscard]] run_cpu_report run_cpu(std::span<const batching::sample> batch, const run_cpu_options& o, Store* store) {
    if (o.iterations == 0) throw option_error("iterations", "run-cpu: {} must be >= 1");
    const tiny_job job = make_tiny_job(batch, o);
    const model_config& c = job.model();
    const std::vector<std::size_t>& lengths = job.lengths_tokens;
    run_cpu_report rep;
    rep.ranks = o.devices * o.dp;
    rep.samples = batch.size();
    rep.tokens = std::accumulate(lengths.begin(), lengths.end(), std::size_t{0});
    rep.schedule = std::string(schedule::to_string(o.schedule));
    std::vector<std::uint64_t> ids(batch.size());
    std::iota(ids.begin(), ids.end(), std::uint64_t{0});

    cpu_cluster cluster(c, rep.ranks, sgd{o.lr}, executor_options{o.timeout, true});
    if (o.fail_rank != executor_options::no_fault) {
        if (o.fail_rank >= rep.ranks)
            throw invalid_argument("run_cpu: fail_rank " + std::to_string(o.fail_rank) + " is not a rank of the " +
                                   std::to_string(rep.ranks) + " ranks");
        cluster.inject_fault(o.fail_rank, o.fail_at);
    }
    model_params ref_params = init_params(c);
    sgd ref_opt{o.lr};
    plan_prefetcher<plan::execution_plan> ahead([&](std::uint64_t it) { return job.plan(it); },
                                                prefetch_options{2, 2, 0, o.iterations});
    for (std::size_t it = 0; it < o.iterations; ++it) {
        const plan::execution_plan p = *ahead.next(o.timeout);
        const iteration_result r = cluster.run(through_store(p, store, o, it), lengths);
        const step_result ref = reference_step(c, ref_params, ids, lengths);
        ref_opt.step(ref_params, ref.grads, std::vector{whole_model(ref_params)});
        run_cpu_iteration ri{r.loss, ref.loss, max_relative_error(r.grads, ref.grads, whole_model(ref_params)),
                             p.header.microbatches.size()};
        const double loss_error = std::abs(ri.loss - ri.reference_loss) / std::max(std::abs(ri.reference_loss), 1e-300);
        rep.ok = rep.ok && ri.max_grad_rel_error <= o.tolerance && loss_error <= o.tolerance &&
                 r.replica_divergence <= o.tolerance;
        rep.iterations.push_back(ri);
    }
    return rep;
}

}  // namespace pipeplan::runtime::cpu
