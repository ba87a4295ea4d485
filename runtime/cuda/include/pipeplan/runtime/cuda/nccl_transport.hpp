// pipeplan/runtime/cuda/nccl_transport.hpp — one rank per GPU (per process), messages and
// collectives through NCCL.
//
// Streams and events follow stream_plan.hpp: the executor's message starts go into one
// ncclGroupStart/ncclGroupEnd per group of consecutive starts (end_group() closes it), on the
// rank's communication stream, which first waits on an event recorded on the compute stream
// when the group opened (after the ops that produced what it sends and read what it
// overwrites). ncclGroupEnd is followed by the group's completion event; a message wait makes
// the compute stream wait on it. Sends/receives are ncclSend/ncclRecv of bytes on the world
// communicator (NCCL matches them per peer in order: the plan's pairing rule; sizes are not
// checked by NCCL, the plan validator checks them). Gradients: ncclAllReduce (and
// ncclReduceScatter under ZeRO ≥ 2) over the rank's data-parallel communicator (split from the
// world communicator by device: the same device of every replica), on the communication
// stream between a compute event and a completion event the compute stream waits on.
//
// Bootstrap (connect): rank 0 creates the ncclUniqueId and publishes it through a plan store
// (bootstrap.hpp); the others fetch it within the timeout; communicators are created
// non-blocking, so initialisation and every later NCCL call are bounded by the timeout too
// (ncclCommAbort and timeout_error after it). The host never blocks on the device inside a
// step; finish_step(timeout) waits for both streams and reports a stuck peer as timeout_error.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pipeplan/runtime/bootstrap.hpp"
#include "pipeplan/runtime/cuda/check.hpp"
#include "pipeplan/runtime/transport.hpp"

namespace pipeplan::runtime::cuda {

/// NCCL's element type of a plan dtype.
[[nodiscard]] inline ncclDataType_t nccl_type(plan::dtype t) {
    switch (t) {
        case plan::dtype::fp32: return ncclFloat32;
        case plan::dtype::fp16: return ncclFloat16;
        case plan::dtype::bf16: return ncclBfloat16;
        case plan::dtype::fp8: return ncclFloat8e4m3;
        case plan::dtype::fp64: return ncclFloat64;
    }
    throw invalid_argument("nccl: unknown dtype code " + std::to_string(static_cast<int>(t)));
}

struct nccl_options {
    std::string job = "job";     ///< the plan store's job name (bootstrap key)
    std::uint64_t epoch = 0;     ///< bump to rebuild communicators (bootstrap key)
    int device = -1;             ///< CUDA device of this rank; -1: rank % device count
    timeout_ms timeout{60000};   ///< bootstrap, communicator set-up and every NCCL call
};

class nccl_transport {
public:
    struct request {
        std::size_t group = 0;
    };

    /// Joins the job: bootstrap through `store` (see the file comment), then the world
    /// communicator and the data-parallel one (ranks with equal rank % devices_per_replica).
    template <plan_store S>
    [[nodiscard]] static nccl_transport connect(S& store, std::size_t rank, std::size_t ranks,
                                                std::size_t devices_per_replica, const nccl_options& o) {
        check_layout(rank, ranks, devices_per_replica);
        ncclUniqueId id{};
        auto bytes = std::as_writable_bytes(std::span(id.internal));
        if (rank == 0) {
            check(ncclGetUniqueId(&id), "ncclGetUniqueId");
            publish_bootstrap_id(store, o.job, o.epoch, bytes);
        } else {
            fetch_bootstrap_id(store, o.job, o.epoch, bytes, o.timeout);
        }
        return nccl_transport(id, rank, ranks, devices_per_replica, o);
    }

    nccl_transport(const ncclUniqueId& id, std::size_t rank, std::size_t ranks, std::size_t devices_per_replica,
                   const nccl_options& o)
        : rank_(rank), ranks_(ranks), devices_(devices_per_replica), timeout_(o.timeout) {
        check_layout(rank, ranks, devices_per_replica);
        try {
            set_up(id, o.device);
        } catch (...) {
            release();  // a constructor that throws runs no destructor
            throw;
        }
    }
    nccl_transport(const nccl_transport&) = delete;
    nccl_transport& operator=(const nccl_transport&) = delete;
    nccl_transport(nccl_transport&& o) noexcept { swap(o); }
    nccl_transport& operator=(nccl_transport&& o) noexcept {
        swap(o);
        return *this;
    }
    ~nccl_transport() { release(); }

    [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
    [[nodiscard]] std::size_t ranks() const noexcept { return ranks_; }
    [[nodiscard]] void* compute_stream() const noexcept { return compute_; }

    request start_send(std::size_t peer, std::uint64_t /*tag*/, std::span<const std::byte> out) {
        open_group(peer);
        settle(world_, ncclSend(out.data(), out.size(), ncclUint8, static_cast<int>(peer), world_, comm_), "ncclSend");
        return {group_};
    }
    request start_recv(std::size_t peer, std::uint64_t /*tag*/, std::span<std::byte> in) {
        open_group(peer);
        settle(world_, ncclRecv(in.data(), in.size(), ncclUint8, static_cast<int>(peer), world_, comm_), "ncclRecv");
        return {group_};
    }
    /// Closes the open group: ncclGroupEnd, then the group's completion event.
    void end_group() {
        if (!open_) return;
        open_ = false;
        settle(world_, ncclGroupEnd(), "ncclGroupEnd");
        if (done_.size() <= group_) {
            cudaEvent_t e = nullptr;
            check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
            done_.push_back(e);
        }
        check(cudaEventRecord(done_[group_], comm_), "cudaEventRecord");
        ++group_;
    }
    /// Orders the compute stream after the request's group (never blocks the host).
    bool wait(request& r, timeout_ms /*timeout*/) {
        throw_if_aborted();
        if (open_ && r.group == group_) end_group();
        check(cudaStreamWaitEvent(compute_, done_.at(r.group), 0), "cudaStreamWaitEvent");
        return true;
    }

    void all_reduce(typed_buffer values, std::span<const std::size_t> group, timeout_ms /*timeout*/) {
        collective_prologue(group);
        settle(dp_, ncclAllReduce(values.data, values.data, values.count, nccl_type(values.type), ncclSum, dp_, comm_),
               "ncclAllReduce");
        collective_epilogue();
    }
    /// ncclReduceScatter (ZeRO ≥ 2): `in` holds group.size() chunks of out.count elements.
    void reduce_scatter(typed_buffer in, typed_buffer out, std::span<const std::size_t> group, timeout_ms /*timeout*/) {
        if (in.count != out.count * group.size() || in.type != out.type)
            throw invalid_argument("reduce_scatter: " + std::to_string(in.count) + " elements in, " +
                                   std::to_string(out.count) + " out, for " + std::to_string(group.size()) + " members");
        collective_prologue(group);
        settle(dp_, ncclReduceScatter(in.data, out.data, out.count, nccl_type(in.type), ncclSum, dp_, comm_),
               "ncclReduceScatter");
        collective_epilogue();
    }

    /// Aborts this rank's communicators: its pending device work ends, later calls throw
    /// aborted_error; peers see their waits time out in finish_step.
    void abort(const std::string& reason) {
        if (!aborted_.empty()) return;
        aborted_ = reason.empty() ? "aborted" : reason;
        if (dp_ != nullptr) (void)ncclCommAbort(std::exchange(dp_, nullptr));
        if (world_ != nullptr) (void)ncclCommAbort(std::exchange(world_, nullptr));
    }

    /// Waits (polling) for both streams to drain; timeout_error after `timeout` (the
    /// communicators are aborted: a peer stopped), device_error when NCCL reported one. Resets
    /// the per-step group counter.
    void finish_step(timeout_ms timeout) {
        throw_if_aborted();
        end_group();
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (cudaStream_t s : {compute_, comm_})
            for (;;) {
                const cudaError_t e = cudaStreamQuery(s);
                if (e == cudaSuccess) break;
                if (e != cudaErrorNotReady) check(e, "finish_step: cudaStreamQuery");
                poll_async_error(world_, "finish_step");
                if (std::chrono::steady_clock::now() >= deadline) {
                    abort("rank " + std::to_string(rank_) + ": step did not finish within " +
                          std::to_string(timeout.count()) + " ms");
                    throw timeout_error(aborted_);
                }
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
        group_ = 0;
    }

private:
    static void check_layout(std::size_t rank, std::size_t ranks, std::size_t devices_per_replica) {
        if (ranks == 0 || rank >= ranks || devices_per_replica == 0 || ranks % devices_per_replica != 0)
            throw invalid_argument("nccl_transport: rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                                   " with " + std::to_string(devices_per_replica) + " devices per replica");
    }
    /// Streams, events, the world communicator and the data-parallel one.
    void set_up(const ncclUniqueId& id, int device) {
        if (device < 0) {
            int n = 0;
            check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
            if (n <= 0) throw device_error("nccl_transport: no CUDA device");
            device = static_cast<int>(rank_ % static_cast<std::size_t>(n));
        }
        check(cudaSetDevice(device), "cudaSetDevice");
        check(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        check(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        check(cudaEventCreateWithFlags(&compute_event_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        settle(world_, ncclCommInitRankConfig(&world_, static_cast<int>(ranks_), id, static_cast<int>(rank_), &config),
               "ncclCommInitRankConfig");
        ncclConfig_t split_config = NCCL_CONFIG_INITIALIZER;
        split_config.blocking = 0;
        settle(world_,
               ncclCommSplit(world_, static_cast<int>(rank_ % devices_), static_cast<int>(rank_ / devices_), &dp_, &split_config),
               "ncclCommSplit");
        settle(dp_, ncclSuccess, "ncclCommSplit");
        for (std::size_t r = rank_ % devices_; r < ranks_; r += devices_) dp_group_.push_back(r);
    }
    void release() noexcept {
        if (dp_ != nullptr) (void)ncclCommAbort(std::exchange(dp_, nullptr));
        if (world_ != nullptr) (void)ncclCommAbort(std::exchange(world_, nullptr));
        for (cudaEvent_t e : done_) (void)cudaEventDestroy(e);
        done_.clear();
        if (compute_event_ != nullptr) (void)cudaEventDestroy(std::exchange(compute_event_, nullptr));
        if (compute_ != nullptr) (void)cudaStreamDestroy(std::exchange(compute_, nullptr));
        if (comm_ != nullptr) (void)cudaStreamDestroy(std::exchange(comm_, nullptr));
    }

    void swap(nccl_transport& o) noexcept {
        std::swap(rank_, o.rank_);
        std::swap(ranks_, o.ranks_);
        std::swap(devices_, o.devices_);
        std::swap(timeout_, o.timeout_);
        std::swap(world_, o.world_);
        std::swap(dp_, o.dp_);
        std::swap(compute_, o.compute_);
        std::swap(comm_, o.comm_);
        std::swap(compute_event_, o.compute_event_);
        std::swap(done_, o.done_);
        std::swap(dp_group_, o.dp_group_);
        std::swap(group_, o.group_);
        std::swap(open_, o.open_);
        std::swap(aborted_, o.aborted_);
    }

    void throw_if_aborted() const {
        if (!aborted_.empty()) throw aborted_error(aborted_);
    }
    void poll_async_error(ncclComm_t c, const char* what) const {
        if (c == nullptr) return;
        ncclResult_t state = ncclSuccess;
        check(ncclCommGetAsyncError(c, &state), what);
        check(state, what);
    }
    /// A non-blocking NCCL call's result: waits (polling, up to the timeout) while it is in
    /// progress; device_error on failure, timeout_error (after aborting) when it never settles.
    void settle(ncclComm_t c, ncclResult_t first, const char* what) {
        if (first != ncclSuccess && first != ncclInProgress) check(first, what);
        const auto deadline = std::chrono::steady_clock::now() + timeout_;
        for (;;) {
            ncclResult_t state = ncclSuccess;
            check(ncclCommGetAsyncError(c, &state), what);
            if (state == ncclSuccess) return;
            if (state != ncclInProgress) check(state, what);
            if (std::chrono::steady_clock::now() >= deadline) {
                abort(std::string(what) + " did not complete within " + std::to_string(timeout_.count()) + " ms");
                throw timeout_error("rank " + std::to_string(rank_) + ": " + aborted_);
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
    void open_group(std::size_t peer) {
        throw_if_aborted();
        if (peer >= ranks_ || peer == rank_)
            throw invalid_argument("rank " + std::to_string(rank_) + ": invalid peer " + std::to_string(peer));
        if (open_) return;
        check(cudaEventRecord(compute_event_, compute_), "cudaEventRecord");
        check(cudaStreamWaitEvent(comm_, compute_event_, 0), "cudaStreamWaitEvent");
        settle(world_, ncclGroupStart(), "ncclGroupStart");
        open_ = true;
    }
    void collective_prologue(std::span<const std::size_t> group) {
        throw_if_aborted();
        if (!std::equal(group.begin(), group.end(), dp_group_.begin(), dp_group_.end()))
            throw invalid_argument("nccl_transport: rank " + std::to_string(rank_) +
                                   ": collectives run over the rank's data-parallel group only");
        end_group();
        check(cudaEventRecord(compute_event_, compute_), "cudaEventRecord");
        check(cudaStreamWaitEvent(comm_, compute_event_, 0), "cudaStreamWaitEvent");
    }
    void collective_epilogue() {
        check(cudaEventRecord(compute_event_, comm_), "cudaEventRecord");
        check(cudaStreamWaitEvent(compute_, compute_event_, 0), "cudaStreamWaitEvent");
    }

    std::size_t rank_ = 0, ranks_ = 0, devices_ = 1;
    timeout_ms timeout_{60000};
    ncclComm_t world_ = nullptr, dp_ = nullptr;
    cudaStream_t compute_ = nullptr, comm_ = nullptr;
    cudaEvent_t compute_event_ = nullptr;
    std::vector<cudaEvent_t> done_;  ///< [group of this step] completion events, reused every step
    std::vector<std::size_t> dp_group_;
    std::size_t group_ = 0;
    bool open_ = false;
    std::string aborted_;
};

static_assert(transport<nccl_transport>);

}  // namespace pipeplan::runtime::cuda
