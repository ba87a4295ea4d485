// pipeplan/core/parallel.hpp — a deterministic parallel loop over task indices.
//
//   pipeplan::parallel_for(tasks, threads, [&](std::size_t task, std::size_t worker) { ... });
//
// Runs fn(task, worker) once for every task in [0, tasks) on min(threads, tasks) workers
// (threads <= 1: inline, in task order, worker 0). Workers take the next task index from a
// shared counter; `worker` < the number of workers names per-worker scratch the caller keeps.
// Results must be written per task (not per worker) for the outcome to be independent of the
// thread count. If tasks throw, every task still runs and the exception of the lowest task
// index is rethrown after all workers have joined (the same one whatever the thread count).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace pipeplan {

/// The number of workers parallel_for uses for `tasks` tasks and `threads` threads (>= 1).
[[nodiscard]] inline std::size_t parallel_workers(std::size_t tasks, std::size_t threads) noexcept {
    return std::max<std::size_t>(1, std::min(tasks, threads));
}

template <class Fn>
void parallel_for(std::size_t tasks, std::size_t threads, Fn&& fn) {
    const std::size_t workers = parallel_workers(tasks, threads);
    std::vector<std::exception_ptr> errors(tasks);
    const auto run = [&](std::size_t task, std::size_t worker) {
        try {
            fn(task, worker);
        } catch (...) {
            errors[task] = std::current_exception();
        }
    };
    if (workers <= 1) {
        for (std::size_t t = 0; t < tasks; ++t) run(t, 0);
    } else {
        std::atomic<std::size_t> next{0};
        const auto loop = [&](std::size_t worker) {
            for (std::size_t t = next.fetch_add(1); t < tasks; t = next.fetch_add(1)) run(t, worker);
        };
        std::vector<std::jthread> pool;
        pool.reserve(workers - 1);
        for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(loop, w);
        loop(0);
    }  // the jthreads join here
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace pipeplan
