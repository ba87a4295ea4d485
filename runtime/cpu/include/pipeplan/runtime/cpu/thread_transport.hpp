// pipeplan/runtime/cpu/thread_transport.hpp — the in-process transport: one thread per rank.
//
// A thread_hub holds the mailboxes of every ordered pair of ranks of one step; each rank's
// thread talks through its own thread_transport endpoint (hub.endpoint(rank)), which models
// pipeplan::runtime::transport. Sends are eager (the bytes are copied into the receiver's
// mailbox, so a send request is complete at once); a receive completes when the matching
// message (the k-th receive from a peer matches the k-th send of that peer to this rank) is
// there. All-reduce (fp64 or fp32) sums the members' contributions in group order, in the
// element type, so every member gets bit-identical results whatever the arrival order.
//
// One mutex guards the hub (the CPU backend is for correctness, not speed). After a failed
// step (timeout or abort) the hub's state is undefined: use a fresh hub for the next step.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/runtime/errors.hpp"
#include "pipeplan/runtime/transport.hpp"

namespace pipeplan::runtime::cpu {

class thread_transport;

/// The shared state of one step's ranks (see the file comment).
class thread_hub {
public:
    explicit thread_hub(std::size_t ranks) : ranks_(ranks), send_seq_(ranks * ranks, 0), recv_seq_(ranks * ranks, 0) {
        if (ranks == 0) throw invalid_argument("thread_hub: at least one rank is needed");
    }
    thread_hub(const thread_hub&) = delete;
    thread_hub& operator=(const thread_hub&) = delete;

    [[nodiscard]] std::size_t ranks() const noexcept { return ranks_; }
    /// Rank `r`'s endpoint (cheap; it refers to this hub, which must outlive it).
    [[nodiscard]] thread_transport endpoint(std::size_t r);

    /// Wakes every pending wait with aborted_error carrying `reason` (the first abort wins).
    void abort(const std::string& reason) {
        {
            std::lock_guard lk(mu_);
            if (!aborted_) aborted_ = reason;
        }
        cv_.notify_all();
    }
    [[nodiscard]] bool aborted() const {
        std::lock_guard lk(mu_);
        return aborted_.has_value();
    }

private:
    friend class thread_transport;
    struct message {
        std::uint64_t tag = 0;
        std::vector<std::byte> bytes;
    };
    struct contribution {
        plan::dtype type = plan::dtype::fp64;
        std::size_t count = 0;
        std::vector<std::byte> bytes;
    };
    struct collective {
        std::uint64_t generation = 0;
        std::size_t arrived = 0;
        std::vector<contribution> contributions;
        std::vector<std::byte> result;
    };

    [[nodiscard]] std::size_t pair(std::size_t src, std::size_t dst) const noexcept { return src * ranks_ + dst; }
    void throw_if_aborted() const {
        if (aborted_) throw aborted_error(*aborted_);
    }

    std::size_t ranks_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::optional<std::string> aborted_;
    std::vector<std::uint64_t> send_seq_;                              // [pair]
    std::vector<std::uint64_t> recv_seq_;                              // [pair]
    std::map<std::pair<std::size_t, std::uint64_t>, message> mail_;   // (pair, seq) -> message
    std::map<std::vector<std::size_t>, collective> collectives_;
};

/// One rank's endpoint of a thread_hub; models pipeplan::runtime::transport.
class thread_transport {
public:
    struct request {
        bool is_send = false;
        bool done = false;
        std::size_t peer = 0;
        std::uint64_t tag = 0;
        std::uint64_t seq = 0;
        std::span<std::byte> in;
    };

    thread_transport(thread_hub& hub, std::size_t rank) : hub_(&hub), rank_(rank) {
        if (rank >= hub.ranks())
            throw invalid_argument("thread_transport: rank " + std::to_string(rank) + " outside 0.." +
                                   std::to_string(hub.ranks() - 1));
    }

    [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
    [[nodiscard]] std::size_t ranks() const noexcept { return hub_->ranks(); }

    request start_send(std::size_t peer, std::uint64_t tag, std::span<const std::byte> out) {
        check_peer(peer);
        std::lock_guard lk(hub_->mu_);
        hub_->throw_if_aborted();
        const std::size_t p = hub_->pair(rank_, peer);
        const std::uint64_t seq = hub_->send_seq_[p]++;
        hub_->mail_[{p, seq}] = thread_hub::message{tag, std::vector<std::byte>(out.begin(), out.end())};
        hub_->cv_.notify_all();
        return request{true, true, peer, tag, seq, {}};
    }

    request start_recv(std::size_t peer, std::uint64_t tag, std::span<std::byte> in) {
        check_peer(peer);
        std::lock_guard lk(hub_->mu_);
        hub_->throw_if_aborted();
        const std::uint64_t seq = hub_->recv_seq_[hub_->pair(peer, rank_)]++;
        return request{false, false, peer, tag, seq, in};
    }

    /// See the transport contract. Throws protocol_error when the matched message's tag or size
    /// differs from the receive's.
    bool wait(request& r, timeout_ms timeout) {
        if (r.done) return true;
        std::unique_lock lk(hub_->mu_);
        const auto key = std::make_pair(hub_->pair(r.peer, rank_), r.seq);
        const bool ready = hub_->cv_.wait_for(lk, timeout, [&] { return hub_->aborted_ || hub_->mail_.count(key) > 0; });
        hub_->throw_if_aborted();
        if (!ready) return false;
        auto node = hub_->mail_.extract(key);
        const thread_hub::message& m = node.mapped();
        if (m.tag != r.tag || m.bytes.size() != r.in.size())
            throw protocol_error("rank " + std::to_string(rank_) + ": message " + std::to_string(r.seq) + " from rank " +
                                 std::to_string(r.peer) + " has tag " + std::to_string(m.tag) + " and " +
                                 std::to_string(m.bytes.size()) + " bytes, the receive expects tag " +
                                 std::to_string(r.tag) + " and " + std::to_string(r.in.size()) + " bytes");
        if (!m.bytes.empty()) std::memcpy(r.in.data(), m.bytes.data(), m.bytes.size());
        r.done = true;
        return true;
    }

    void all_reduce(typed_buffer values, std::span<const std::size_t> group, timeout_ms timeout) {
        if (values.type != plan::dtype::fp64 && values.type != plan::dtype::fp32)
            throw invalid_argument("all_reduce: the thread transport sums fp64 and fp32, not " +
                                   std::string(plan::to_string(values.type)));
        std::vector<std::size_t> key(group.begin(), group.end());
        const auto pos = std::find(key.begin(), key.end(), rank_);
        if (pos == key.end())
            throw invalid_argument("all_reduce: rank " + std::to_string(rank_) + " is not in its group");
        const std::size_t me = static_cast<std::size_t>(pos - key.begin());
        const auto* in = static_cast<const std::byte*>(values.data);
        std::unique_lock lk(hub_->mu_);
        hub_->throw_if_aborted();
        auto& c = hub_->collectives_[key];
        if (c.contributions.size() != key.size()) c.contributions.resize(key.size());
        const std::uint64_t gen = c.generation;
        c.contributions[me] = {values.type, values.count, std::vector<std::byte>(in, in + values.size_bytes())};
        if (++c.arrived == key.size()) {
            finish(c, key);
            hub_->cv_.notify_all();
        } else if (!hub_->cv_.wait_for(lk, timeout, [&] { return hub_->aborted_ || c.generation != gen; })) {
            throw timeout_error("rank " + std::to_string(rank_) + ": all-reduce over " + describe(key) +
                                " timed out after " + std::to_string(timeout.count()) + " ms (" +
                                std::to_string(c.arrived) + " of " + std::to_string(key.size()) + " arrived)");
        }
        hub_->throw_if_aborted();
        if (!c.result.empty()) std::memcpy(values.data, c.result.data(), c.result.size());
    }

    /// Reduce-scatter: `in` holds group.size() chunks of out.count elements; this rank receives
    /// the sum (in group order, as all_reduce) of every member's chunk at its group position.
    void reduce_scatter(typed_buffer in, typed_buffer out, std::span<const std::size_t> group, timeout_ms timeout) {
        if (in.type != out.type || in.count != out.count * group.size())
            throw invalid_argument("reduce_scatter: " + std::to_string(in.count) + " " +
                                   std::string(plan::to_string(in.type)) + " values in, " + std::to_string(out.count) +
                                   " " + std::string(plan::to_string(out.type)) + " out, for " +
                                   std::to_string(group.size()) + " members");
        const auto pos = std::find(group.begin(), group.end(), rank_);
        std::vector<std::byte> sum(in.size_bytes());
        if (!sum.empty()) std::memcpy(sum.data(), in.data, sum.size());
        all_reduce({sum.data(), in.count, in.type}, group, timeout);
        const auto me = static_cast<std::size_t>(pos - group.begin());  // all_reduce checked membership
        if (out.size_bytes() > 0) std::memcpy(out.data, sum.data() + me * out.size_bytes(), out.size_bytes());
    }

    void abort(const std::string& reason) { hub_->abort(reason); }

private:
    void check_peer(std::size_t peer) const {
        if (peer >= hub_->ranks() || peer == rank_)
            throw invalid_argument("rank " + std::to_string(rank_) + ": invalid peer " + std::to_string(peer));
    }
    void finish(thread_hub::collective& c, const std::vector<std::size_t>& key) {
        const auto& first = c.contributions[0];
        for (std::size_t i = 1; i < c.contributions.size(); ++i)
            if (c.contributions[i].count != first.count || c.contributions[i].type != first.type) {
                const std::string why = "all-reduce over " + describe(key) + ": members contribute " +
                                        std::to_string(first.count) + " " + std::string(plan::to_string(first.type)) +
                                        " and " + std::to_string(c.contributions[i].count) + " " +
                                        std::string(plan::to_string(c.contributions[i].type)) + " values";
                if (!hub_->aborted_) hub_->aborted_ = why;  // the others must not wait for a result
                hub_->cv_.notify_all();
                throw protocol_error(why);
            }
        if (first.type == plan::dtype::fp64)
            sum_in_group_order<double>(c);
        else
            sum_in_group_order<float>(c);
        c.arrived = 0;
        ++c.generation;
    }
    /// result = Σ contributions, member by member in group order (identical bits for everyone).
    template <class T>
    static void sum_in_group_order(thread_hub::collective& c) {
        const std::size_t n = c.contributions[0].count;
        std::vector<T> sum(n, T(0)), v(n);
        for (const auto& m : c.contributions) {
            if (n > 0) std::memcpy(v.data(), m.bytes.data(), n * sizeof(T));
            for (std::size_t j = 0; j < n; ++j) sum[j] += v[j];
        }
        c.result.resize(n * sizeof(T));
        if (n > 0) std::memcpy(c.result.data(), sum.data(), n * sizeof(T));
    }
    static std::string describe(const std::vector<std::size_t>& key) {
        std::string s = "ranks {";
        for (std::size_t i = 0; i < key.size(); ++i) s.append(i ? "," : "").append(std::to_string(key[i]));
        return s + "}";
    }

    thread_hub* hub_;
    std::size_t rank_;
};

inline thread_transport thread_hub::endpoint(std::size_t r) { return thread_transport(*this, r); }

static_assert(transport<thread_transport>);

}  // namespace pipeplan::runtime::cpu
