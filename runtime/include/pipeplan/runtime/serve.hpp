// pipeplan/runtime/serve.hpp — a planner serving a stream of iterations to a plan store.
//
// serve_plans() plans iterations first … first+count−1 on a plan_prefetcher (planner threads,
// `depth` iterations ahead) and writes every rank's share of each plan, in the plan tier's
// binary format, under (job, iteration, rank) — the side of a job that one planner process
// runs while the ranks train and fetch their own plans. The planner is any callable
// execution_plan(std::uint64_t iteration); the plans written do not depend on the thread count.
// Every plan is stamped with its identity (plan/identity.hpp) before its ranks are written, and
// a store that offers lock_writer(job) is locked for the whole run: a second planner of the
// same job fails at once instead of mixing its plans with this one's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "pipeplan/plan/identity.hpp"
#include "pipeplan/plan/serialize.hpp"
#include "pipeplan/runtime/plan_store.hpp"
#include "pipeplan/runtime/prefetcher.hpp"

namespace pipeplan::runtime {

struct serve_options {
    std::string job = "pipeplan";
    std::uint64_t first = 0;
    std::uint64_t count = 1;
    std::size_t threads = 1;
    std::size_t depth = 2;
};

/// What serve_plans wrote.
struct serve_report {
    std::uint64_t iterations = 0;
    std::uint64_t plans = 0;  ///< rank plans written
    std::uint64_t bytes = 0;  ///< their binary size in all
};

/// Plans and stores every iteration (see the file comment). `on_iteration` (optional) is
/// called after each iteration is stored, in order.
template <plan_store Store>
serve_report serve_plans(const std::function<plan::execution_plan(std::uint64_t)>& planner, Store& store,
                         const serve_options& o,
                         const std::function<void(std::uint64_t, const plan::execution_plan&)>& on_iteration = {}) {
    writer_lock lock;
    if constexpr (requires { store.lock_writer(o.job); }) lock = store.lock_writer(o.job);
    plan_prefetcher<plan::execution_plan> ahead(planner, prefetch_options{o.threads, o.depth, o.first, o.count});
    serve_report rep;
    for (std::uint64_t it = o.first; auto p = ahead.next(); ++it) {
        plan::stamp_identity(*p);
        for (std::uint32_t r = 0; r < p->programs.size(); ++r) {
            const std::string bytes = plan::to_binary(plan::share_of(*p, r));
            store.put(plan_key{o.job, it, r}, bytes);
            ++rep.plans;
            rep.bytes += bytes.size();
        }
        ++rep.iterations;
        if (on_iteration) on_iteration(it, *p);
    }
    return rep;
}

}  // namespace pipeplan::runtime
