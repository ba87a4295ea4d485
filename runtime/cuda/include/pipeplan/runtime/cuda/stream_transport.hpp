// pipeplan/runtime/cuda/stream_transport.hpp — every rank of a job on ONE GPU, for testing
// plans on a single device: rank r has its own compute and communication streams, a message is
// a device-to-device cudaMemcpyAsync ordered by events, and collectives are one kernel over the
// members' buffers. One host thread per rank drives its executor, as with the CPU backend.
//
// Matching is the thread transport's (the k-th send from a to b pairs with the k-th receive at
// b from a; tags and sizes must agree, or both waits throw protocol_error). Ordering:
//  - start_send records an event on the sender's compute stream (after the producing op);
//  - the copy is enqueued by whichever side posts second, on the receiver's communication
//    stream, after that event and after an event recorded on the receiver's compute stream when
//    it posted the receive (the destination bytes are free by then); an event marks its end;
//  - wait (send or receive) blocks the host until the copy is enqueued (at most `timeout`,
//    else false), then makes the rank's compute stream wait on the copy's end event; the host
//    never waits for the device inside a step (finish_step does, with a timeout).
// Under these rules a host blocks at a wait only until the peer posts the matching start, the
// rendezvous the plan tier's deadlock check runs plans under (plan/deadlock.hpp; a grouping
// transport: executors run only plans checked under the `grouped` rule or a stricter one).
// All-reduce / reduce-scatter: each member records an event on its compute stream; the last
// member to arrive makes its communication stream wait on every member's event, launches one
// kernel summing in member order (kernels.hpp) and records an end event every member's compute
// stream waits on.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeplan/runtime/cuda/check.hpp"
#include "pipeplan/runtime/cuda/kernels.hpp"
#include "pipeplan/runtime/transport.hpp"

namespace pipeplan::runtime::cuda {

/// Events created once and reused (cudaStreamWaitEvent captures an event's latest record when it
/// is called, so an event may be re-recorded once every wait on it was enqueued).
class event_pool {
public:
    event_pool() = default;
    event_pool(const event_pool&) = delete;
    event_pool& operator=(const event_pool&) = delete;
    ~event_pool() {
        for (cudaEvent_t e : all_) (void)cudaEventDestroy(e);
    }
    [[nodiscard]] cudaEvent_t take() {
        if (free_.empty()) {
            cudaEvent_t e = nullptr;
            check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
            all_.push_back(e);
            return e;
        }
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
    }
    void give(cudaEvent_t e) { free_.push_back(e); }
    [[nodiscard]] std::size_t created() const noexcept { return all_.size(); }

private:
    std::vector<cudaEvent_t> all_, free_;
};

/// A rank's two streams (non-blocking with respect to the legacy default stream).
struct rank_streams {
    cudaStream_t compute = nullptr;
    cudaStream_t comm = nullptr;
};

class stream_transport;

/// The shared state of the ranks of one GPU (see the file comment).
class gpu_hub {
public:
    gpu_hub(std::size_t ranks, int device = 0) : ranks_(ranks), device_(device), seq_(2 * ranks * ranks, 0) {
        if (ranks == 0) throw invalid_argument("gpu_hub: at least one rank is needed");
        check(cudaSetDevice(device), "cudaSetDevice");
        streams_.resize(ranks);
        for (auto& s : streams_) {
            check(cudaStreamCreateWithFlags(&s.compute, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
            check(cudaStreamCreateWithFlags(&s.comm, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        }
    }
    gpu_hub(const gpu_hub&) = delete;
    gpu_hub& operator=(const gpu_hub&) = delete;
    ~gpu_hub() {
        (void)cudaDeviceSynchronize();
        for (auto& s : streams_) {
            (void)cudaStreamDestroy(s.compute);
            (void)cudaStreamDestroy(s.comm);
        }
    }

    [[nodiscard]] std::size_t ranks() const noexcept { return ranks_; }
    [[nodiscard]] int device() const noexcept { return device_; }
    [[nodiscard]] const rank_streams& streams(std::size_t r) const { return streams_.at(r); }
    /// Rank r's endpoint (refers to this hub, which must outlive it).
    [[nodiscard]] stream_transport endpoint(std::size_t r);

    /// Wakes every pending host wait with aborted_error carrying `reason` (the first abort wins).
    void abort(const std::string& reason) {
        {
            std::lock_guard lk(mu_);
            if (!aborted_) aborted_ = reason;
        }
        cv_.notify_all();
    }

    /// Waits until every stream finished, polling up to `timeout`; throws timeout_error naming
    /// the first busy rank, or device_error when a kernel failed.
    void finish_step(timeout_ms timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (std::size_t r = 0; r < ranks_; ++r)
            for (cudaStream_t s : {streams_[r].compute, streams_[r].comm})
                for (;;) {
                    const cudaError_t e = cudaStreamQuery(s);
                    if (e == cudaSuccess) break;
                    if (e != cudaErrorNotReady) check(e, "finish_step: cudaStreamQuery");
                    if (std::chrono::steady_clock::now() >= deadline)
                        throw timeout_error("gpu_hub: rank " + std::to_string(r) + "'s streams still busy after " +
                                            std::to_string(timeout.count()) + " ms");
                    std::this_thread::sleep_for(std::chrono::microseconds(50));
                }
        std::lock_guard lk(mu_);
        if (!mail_.empty())
            throw protocol_error("gpu_hub: " + std::to_string(mail_.size()) + " messages were not waited for by both sides");
    }

private:
    friend class stream_transport;
    struct side {
        bool posted = false;
        bool waited = false;
        std::uint64_t tag = 0;
        std::size_t bytes = 0;
        void* ptr = nullptr;
        cudaEvent_t ready = nullptr;  // recorded on the poster's compute stream
    };
    struct message {
        side send, recv;
        bool enqueued = false;
        std::string mismatch;  // non-empty: tags or sizes differ
        cudaEvent_t done = nullptr;
    };
    struct member {
        void* ptr = nullptr;
        void* out = nullptr;
        cudaEvent_t ready = nullptr;
    };
    struct collective {
        std::uint64_t generation = 0;
        std::size_t arrived = 0;
        std::size_t count = 0;
        plan::dtype type = plan::dtype::fp64;
        bool scatter = false;
        std::vector<member> members;
        cudaEvent_t done = nullptr;
        std::size_t pending_waits = 0;
        std::string mismatch;
    };

    /// Key of the k-th message from src to dst.
    using mail_key = std::tuple<std::size_t, std::size_t, std::uint64_t>;

    void throw_if_aborted() const {
        if (aborted_) throw aborted_error(*aborted_);
    }
    /// Enqueues a matched message's copy (lock held).
    void enqueue_copy(message& m, std::size_t dst) {
        if (m.send.tag != m.recv.tag || m.send.bytes != m.recv.bytes) {
            m.mismatch = "message has tag " + std::to_string(m.send.tag) + " and " + std::to_string(m.send.bytes) +
                         " bytes, the receive expects tag " + std::to_string(m.recv.tag) + " and " +
                         std::to_string(m.recv.bytes) + " bytes";
        } else {
            const cudaStream_t s = streams_[dst].comm;
            check(cudaStreamWaitEvent(s, m.send.ready, 0), "cudaStreamWaitEvent");
            check(cudaStreamWaitEvent(s, m.recv.ready, 0), "cudaStreamWaitEvent");
            if (m.send.bytes > 0)
                check(cudaMemcpyAsync(m.recv.ptr, m.send.ptr, m.send.bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
            m.done = events_.take();
            check(cudaEventRecord(m.done, s), "cudaEventRecord");
        }
        events_.give(m.send.ready);
        events_.give(m.recv.ready);
        m.enqueued = true;
        cv_.notify_all();
    }

    std::size_t ranks_;
    int device_;
    std::vector<rank_streams> streams_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::optional<std::string> aborted_;
    std::vector<std::uint64_t> seq_;  // [2 · (src · ranks + dst) + is_recv]: messages posted per pair and side
    std::map<mail_key, message> mail_;
    std::map<std::vector<std::size_t>, collective> collectives_;
    event_pool events_;
};

/// One rank's endpoint of a gpu_hub; models transport, grouping (no-op: copies never block on
/// the peer) and streaming (the rank's compute stream).
class stream_transport {
public:
    struct request {
        bool is_send = false;
        std::size_t peer = 0;
        std::uint64_t seq = 0;
    };

    stream_transport(gpu_hub& hub, std::size_t rank) : hub_(&hub), rank_(rank) {
        if (rank >= hub.ranks())
            throw invalid_argument("stream_transport: rank " + std::to_string(rank) + " outside 0.." +
                                   std::to_string(hub.ranks() - 1));
    }

    [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
    [[nodiscard]] std::size_t ranks() const noexcept { return hub_->ranks(); }
    [[nodiscard]] void* compute_stream() const noexcept { return hub_->streams_[rank_].compute; }
    void end_group() noexcept {}

    request start_send(std::size_t peer, std::uint64_t tag, std::span<const std::byte> out) {
        return post(true, peer, tag, const_cast<std::byte*>(out.data()), out.size());
    }
    request start_recv(std::size_t peer, std::uint64_t tag, std::span<std::byte> in) {
        return post(false, peer, tag, in.data(), in.size());
    }

    /// See the file comment. Throws protocol_error when the matched message's tag or size differ.
    bool wait(request& r, timeout_ms timeout) {
        const std::size_t src = r.is_send ? rank_ : r.peer, dst = r.is_send ? r.peer : rank_;
        const gpu_hub::mail_key key{src, dst, r.seq};
        std::unique_lock lk(hub_->mu_);
        const bool ready = hub_->cv_.wait_for(lk, timeout, [&] {
            if (hub_->aborted_) return true;
            const auto it = hub_->mail_.find(key);
            return it != hub_->mail_.end() && it->second.enqueued;
        });
        hub_->throw_if_aborted();
        if (!ready) return false;
        auto it = hub_->mail_.find(key);
        gpu_hub::message& m = it->second;
        if (!m.mismatch.empty())
            throw protocol_error("rank " + std::to_string(rank_) + ": message " + std::to_string(r.seq) + " from rank " +
                                 std::to_string(src) + " to rank " + std::to_string(dst) + ": " + m.mismatch);
        check(cudaStreamWaitEvent(hub_->streams_[rank_].compute, m.done, 0), "cudaStreamWaitEvent");
        (r.is_send ? m.send : m.recv).waited = true;
        if (m.send.waited && m.recv.waited) {
            hub_->events_.give(m.done);
            hub_->mail_.erase(it);
        }
        return true;
    }

    void all_reduce(typed_buffer values, std::span<const std::size_t> group, timeout_ms timeout) {
        collective(values, typed_buffer{}, group, timeout, false);
    }
    /// Reduce-scatter (ZeRO ≥ 2): `in` holds group.size() chunks of out.count elements; member k
    /// of the group receives the sum of every member's chunk k in `out`.
    void reduce_scatter(typed_buffer in, typed_buffer out, std::span<const std::size_t> group, timeout_ms timeout) {
        collective(in, out, group, timeout, true);
    }

    void abort(const std::string& reason) { hub_->abort(reason); }

private:
    request post(bool is_send, std::size_t peer, std::uint64_t tag, std::byte* ptr, std::size_t bytes) {
        if (peer >= hub_->ranks() || peer == rank_)
            throw invalid_argument("rank " + std::to_string(rank_) + ": invalid peer " + std::to_string(peer));
        const std::size_t src = is_send ? rank_ : peer, dst = is_send ? peer : rank_;
        std::lock_guard lk(hub_->mu_);
        hub_->throw_if_aborted();
        const std::uint64_t seq = hub_->seq_[2 * (src * hub_->ranks() + dst) + (is_send ? 0 : 1)]++;
        gpu_hub::message& m = hub_->mail_[{src, dst, seq}];
        gpu_hub::side& me = is_send ? m.send : m.recv;
        me = {true, false, tag, bytes, ptr, hub_->events_.take()};
        check(cudaEventRecord(me.ready, hub_->streams_[rank_].compute), "cudaEventRecord");
        if (m.send.posted && m.recv.posted) hub_->enqueue_copy(m, dst);
        return request{is_send, peer, seq};
    }

    void collective(typed_buffer in, typed_buffer out, std::span<const std::size_t> group, timeout_ms timeout,
                    bool scatter) {
        if (in.type != plan::dtype::fp64 && in.type != plan::dtype::fp32)
            throw invalid_argument("collective: the stream transport sums fp64 and fp32, not " +
                                   std::string(plan::to_string(in.type)));
        std::vector<std::size_t> key(group.begin(), group.end());
        if (key.size() > kernels::max_members)
            throw invalid_argument("collective: at most " + std::to_string(kernels::max_members) + " members on one GPU");
        const auto pos = std::find(key.begin(), key.end(), rank_);
        if (pos == key.end())
            throw invalid_argument("collective: rank " + std::to_string(rank_) + " is not in its group");
        if (scatter && in.count != out.count * key.size())
            throw invalid_argument("reduce_scatter: " + std::to_string(in.count) + " elements in, " +
                                   std::to_string(out.count) + " out, for " + std::to_string(key.size()) + " members");
        const std::size_t me = static_cast<std::size_t>(pos - key.begin());
        std::unique_lock lk(hub_->mu_);
        hub_->throw_if_aborted();
        auto& c = hub_->collectives_[key];
        // A member arriving for the next round waits until this round's waits are all enqueued.
        if (!hub_->cv_.wait_for(lk, timeout, [&] { return hub_->aborted_ || c.pending_waits == 0; }))
            throw timeout_error("rank " + std::to_string(rank_) + ": collective over its group still busy after " +
                                std::to_string(timeout.count()) + " ms");
        hub_->throw_if_aborted();
        if (c.arrived == 0) {
            c.members.assign(key.size(), {});
            c.count = in.count;
            c.type = in.type;
            c.scatter = scatter;
            c.mismatch.clear();
        } else if (c.count != in.count || c.type != in.type || c.scatter != scatter) {
            c.mismatch = "members contribute different counts, dtypes or operations";
        }
        c.members[me] = {in.data, out.data, hub_->events_.take()};
        check(cudaEventRecord(c.members[me].ready, hub_->streams_[rank_].compute), "cudaEventRecord");
        const std::uint64_t gen = c.generation;
        if (++c.arrived == key.size()) {
            launch(c, key);
            hub_->cv_.notify_all();
        } else if (!hub_->cv_.wait_for(lk, timeout, [&] { return hub_->aborted_ || c.generation != gen; })) {
            throw timeout_error("rank " + std::to_string(rank_) + ": collective over its group timed out after " +
                                std::to_string(timeout.count()) + " ms (" + std::to_string(c.arrived) + " of " +
                                std::to_string(key.size()) + " arrived)");
        }
        hub_->throw_if_aborted();
        if (!c.mismatch.empty()) throw protocol_error("rank " + std::to_string(rank_) + ": collective: " + c.mismatch);
        check(cudaStreamWaitEvent(hub_->streams_[rank_].compute, c.done, 0), "cudaStreamWaitEvent");
        if (--c.pending_waits == 0) {
            hub_->events_.give(c.done);
            hub_->cv_.notify_all();
        }
    }

    /// The last member's part (lock held): one kernel on its communication stream.
    void launch(gpu_hub::collective& c, const std::vector<std::size_t>& key) {
        c.done = hub_->events_.take();
        if (c.mismatch.empty()) {
            const cudaStream_t s = hub_->streams_[rank_].comm;
            std::vector<void*> ptrs;
            for (const auto& m : c.members) {
                check(cudaStreamWaitEvent(s, m.ready, 0), "cudaStreamWaitEvent");
                ptrs.push_back(m.ptr);
            }
            if (c.scatter) {
                const std::size_t chunk = c.count / key.size();
                for (std::size_t k = 0; k < key.size(); ++k)
                    kernels::sum_chunk(ptrs.data(), ptrs.size(), k, chunk, c.members[k].out, c.type, s);
            } else {
                kernels::sum_to_all(ptrs.data(), ptrs.size(), c.count, c.type, s);
            }
        }
        check(cudaEventRecord(c.done, hub_->streams_[rank_].comm), "cudaEventRecord");
        for (const auto& m : c.members) hub_->events_.give(m.ready);
        c.pending_waits = key.size();
        c.arrived = 0;
        ++c.generation;
    }

    gpu_hub* hub_;
    std::size_t rank_;
};

inline stream_transport gpu_hub::endpoint(std::size_t r) { return stream_transport(*this, r); }

static_assert(transport<stream_transport>);

}  // namespace pipeplan::runtime::cuda
