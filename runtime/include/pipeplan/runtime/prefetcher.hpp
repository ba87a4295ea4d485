// pipeplan/runtime/prefetcher.hpp — planning overlapped with training.
//
// A plan_prefetcher runs a pool of planner threads that plan iterations i+1 … i+depth while
// the trainer runs iteration i, and hands the plans out strictly in iteration order. The
// planner is any callable Plan(std::uint64_t iteration); as long as it is a pure function of
// the iteration (pipeplan's planners are deterministic), the sequence next() returns does not
// depend on the thread count or on timing. A planner exception is rethrown by the next() that
// reaches its iteration. The destructor (or stop()) wakes the pool and joins every thread; a
// planner call already running is finished first and its plan dropped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "pipeplan/runtime/errors.hpp"
#include "pipeplan/runtime/transport.hpp"

namespace pipeplan::runtime {

struct prefetch_options {
    std::size_t threads = 1;  ///< planner threads (>= 1)
    std::size_t depth = 2;    ///< plans kept ready ahead of the trainer (>= 1)
    std::uint64_t first = 0;  ///< first iteration
    std::uint64_t count = std::numeric_limits<std::uint64_t>::max();  ///< iterations in all
};

template <class Plan>
class plan_prefetcher {
public:
    using planner_fn = std::function<Plan(std::uint64_t)>;

    plan_prefetcher(planner_fn planner, prefetch_options o) : planner_(std::move(planner)), o_(o), next_plan_(o.first), next_out_(o.first) {
        if (o_.threads == 0 || o_.depth == 0) throw invalid_argument("plan_prefetcher: threads and depth must be >= 1");
        if (!planner_) throw invalid_argument("plan_prefetcher: no planner");
        workers_.reserve(o_.threads);
        for (std::size_t t = 0; t < o_.threads; ++t) workers_.emplace_back([this] { work(); });
    }
    plan_prefetcher(const plan_prefetcher&) = delete;
    plan_prefetcher& operator=(const plan_prefetcher&) = delete;
    ~plan_prefetcher() { stop(); }

    /// The next iteration's plan, in order; nullopt after the last iteration. Rethrows the
    /// planner's exception for that iteration; throws timeout_error when the plan is not ready
    /// within `timeout`.
    std::optional<Plan> next(timeout_ms timeout = timeout_ms::max()) {
        std::unique_lock lk(mu_);
        if (next_out_ - o_.first >= o_.count) return std::nullopt;
        const std::uint64_t it = next_out_;
        const auto ready = [&] { return stopping_ || done_.count(it) > 0; };
        if (timeout == timeout_ms::max())
            cv_.wait(lk, ready);
        else if (!cv_.wait_for(lk, timeout, ready))
            throw timeout_error("plan_prefetcher: the plan of iteration " + std::to_string(it) + " was not ready after " +
                                std::to_string(timeout.count()) + " ms");
        if (stopping_) throw error("plan_prefetcher: stopped");
        auto node = done_.extract(it);
        ++next_out_;
        cv_.notify_all();  // the window moved: a planner may start the next iteration
        lk.unlock();
        if (auto* e = std::get_if<std::exception_ptr>(&node.mapped())) std::rethrow_exception(*e);
        return std::move(std::get<Plan>(node.mapped()));
    }

    /// Plans finished and not yet handed out.
    [[nodiscard]] std::size_t ready() const {
        std::lock_guard lk(mu_);
        return done_.size();
    }

    /// Wakes and joins the planner threads (idempotent).
    void stop() {
        {
            std::lock_guard lk(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        for (auto& w : workers_)
            if (w.joinable()) w.join();
    }

private:
    void work() {
        std::unique_lock lk(mu_);
        for (;;) {
            cv_.wait(lk, [&] {
                return stopping_ || (next_plan_ - o_.first < o_.count && next_plan_ < next_out_ + o_.depth);
            });
            if (stopping_) return;
            const std::uint64_t it = next_plan_++;
            lk.unlock();
            std::variant<Plan, std::exception_ptr> result{std::exception_ptr{}};
            try {
                result.template emplace<Plan>(planner_(it));
            } catch (...) {
                result = std::current_exception();
            }
            lk.lock();
            done_.emplace(it, std::move(result));
            cv_.notify_all();
        }
    }

    planner_fn planner_;
    prefetch_options o_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::uint64_t next_plan_;  ///< next iteration a planner thread takes
    std::uint64_t next_out_;   ///< next iteration next() hands out
    std::map<std::uint64_t, std::variant<Plan, std::exception_ptr>> done_;
    std::vector<std::thread> workers_;
};

}  // namespace pipeplan::runtime
