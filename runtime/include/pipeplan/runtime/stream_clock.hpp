// pipeplan/runtime/stream_clock.hpp — `set_frequency` in stream order, for device backends.
//
// The executor calls handlers when it *enqueues* work: on a GPU the compute op a set_frequency
// precedes runs later, when the compute stream reaches it. Setting the clock in the handler
// would change it too early (while earlier kernels still run). stream_clock instead enqueues
// the clock change on the compute stream (ctx.compute_stream()) as a host function, so it
// takes effect after every op enqueued before it and before every op enqueued after it:
//
//   stream_clock clock(cuda::cuda_host_launcher{}, [&](std::uint64_t mhz) { nvml.lock_clock(mhz); });
//   clock.register_on(handlers);     // handles set_frequency
//   exec.run_step(...);              // enqueues kernels and clock changes in program order
//   cudaStreamSynchronize(stream);   // then:
//   clock.rethrow();                 // a setter's error, named with its instruction
//   clock.take_applied_mhz();        // what was applied, in stream order (optional)
//
// - The launcher is a template parameter (host_launcher: launch(stream, fn, data)): the CUDA
//   backend's is cudaLaunchHostFunc (runtime/cuda/clock.hpp); tests use a fake stream that
//   runs the queued functions when told, so this logic is checked on CPU.
// - The setter is the user's (e.g. an NVML wrapper around nvmlDeviceSetGpuLockedClocks;
//   pipeplan does not link NVML). It runs on the stream's host-function thread and must not
//   call the CUDA API there (CUDA's rule for host functions). It may throw: the first error is
//   kept (the rest are dropped) and rethrown by rethrow(); later clock changes still run.
// - Each request lives until its host function ran; keep the stream_clock alive until the
//   stream is synchronized (its destructor does not wait).
#pragma once

#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/plan/instruction.hpp"
#include "pipeplan/runtime/executor.hpp"

namespace pipeplan::runtime {

/// Enqueues `fn(data)` on `stream`, to run after the work enqueued there before it.
template <class L>
concept host_launcher = requires(L& l, void* stream, void (*fn)(void*), void* data) { l.launch(stream, fn, data); };

/// The user's clock setter: applies `mhz` to the rank's device (see the file comment).
using clock_setter = std::function<void(std::uint64_t mhz)>;

template <host_launcher Launcher>
class stream_clock {
public:
    stream_clock(Launcher launcher, clock_setter setter) : launcher_(std::move(launcher)), setter_(std::move(setter)) {
        if (!setter_) throw invalid_argument("stream_clock: no clock setter");
    }
    stream_clock(const stream_clock&) = delete;
    stream_clock& operator=(const stream_clock&) = delete;

    /// Registers the set_frequency handler on `h`.
    void register_on(handler_registry& h) {
        h.on(plan::instr_kind::set_frequency, [this](const plan::instruction& in, step_context& ctx) {
            enqueue(plan::frequency_mhz(in), ctx.compute_stream(), "set_frequency " + std::to_string(plan::frequency_mhz(in)) +
                                                                      " MHz before micro-batch " + std::to_string(in.microbatch) +
                                                                      " stage " + std::to_string(in.stage));
        });
    }

    /// Enqueues a change to `mhz` on `stream`; `what` names it in a setter's error.
    void enqueue(std::uint64_t mhz, void* stream, std::string what) {
        if (stream == nullptr)
            throw invalid_argument("stream_clock: " + what + ": the transport has no compute stream (a CPU " +
                                   "transport needs no stream-ordered clock)");
        auto r = std::make_unique<request>(request{this, mhz, std::move(what)});
        launcher_.launch(stream, &stream_clock::run, r.get());  // throws: r is freed, nothing queued
        r.release();                                            // owned by the queued function now
    }

    /// Rethrows the first setter error since the last call (as pipeplan::error naming the
    /// set_frequency), then forgets it. Call after synchronizing the stream.
    void rethrow() {
        std::string message;
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            message = std::exchange(first_error_, std::string());
        }
        if (!message.empty()) throw error(message);
    }

    /// The clocks applied since the last call, in the order the stream ran them (successful
    /// ones only); the record is emptied, so it does not grow over iterations.
    [[nodiscard]] std::vector<std::uint64_t> take_applied_mhz() {
        const std::lock_guard<std::mutex> lock(mutex_);
        return std::exchange(applied_, {});
    }

private:
    struct request {
        stream_clock* owner;
        std::uint64_t mhz;
        std::string what;
    };

    /// The host function: never lets an exception out (it runs in the driver's thread).
    static void run(void* data) noexcept {
        const std::unique_ptr<request> r(static_cast<request*>(data));
        r->owner->apply(*r);
    }

    void apply(const request& r) noexcept {
        std::string failure;
        try {
            setter_(r.mhz);
        } catch (const std::exception& e) {
            failure = "stream_clock: " + r.what + ": " + e.what();
        } catch (...) {
            failure = "stream_clock: " + r.what + ": the clock setter threw";
        }
        try {
            const std::lock_guard<std::mutex> lock(mutex_);
            if (failure.empty()) applied_.push_back(r.mhz);
            else if (first_error_.empty()) first_error_ = std::move(failure);
        } catch (...) {  // bad_alloc while recording: the clock state itself is what the setter left
        }
    }

    Launcher launcher_;
    clock_setter setter_;
    mutable std::mutex mutex_;
    std::vector<std::uint64_t> applied_;
    std::string first_error_;
};

}  // namespace pipeplan::runtime
