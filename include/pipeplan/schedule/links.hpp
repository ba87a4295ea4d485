// pipeplan/schedule/links.hpp — the state of the network's links during a simulation.
//
// Every ordered device pair has its own link, which carries one message at a time (see
// network_model): a message departs when both it and the link are ready, occupies the link for
// its wire time and arrives a latency later. link_channels keeps, per link, the time it is free
// again; the simulator and order discovery share it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::schedule {

/// Per-link "free again at" times of a network_model over D devices. Dense (a D x D table)
/// for up to 256 devices, a hash map beyond. reset() reuses the storage, so a reused
/// link_channels allocates nothing on the dense path.
class link_channels {
public:
    static constexpr std::size_t max_dense_devices = 256;

    /// Forgets every message sent: all links are free at time 0. `network` must outlive the
    /// following arrival() calls.
    void reset(std::size_t devices, const network_model& network) {
        net_ = &network;
        devices_ = devices;
        free_ = network.is_free();
        dense_ = devices <= max_dense_devices;
        sparse_.clear();
        if (!free_ && dense_) table_.assign(devices * devices, 0.0);
        else table_.clear();
    }

    /// True when no message ever costs time (arrival(t, ...) == t).
    [[nodiscard]] bool is_free() const noexcept { return free_; }

    /// Sends `size_mb` from device `from` to `to`, ready at time `t` (ms); returns its arrival
    /// time. A message to the sending device itself arrives at once.
    double arrival(double t, std::size_t from, std::size_t to, double size_mb) {
        if (from == to || free_) return t;
        const double wire_ms = net_->wire_ms(size_mb, from, to);
        double& link_free_ms =
            dense_ ? table_[from * devices_ + to] : sparse_[(static_cast<std::uint64_t>(from) << 32) | to];
        const double depart_ms = std::max(t, link_free_ms);
        link_free_ms = depart_ms + wire_ms;
        return depart_ms + wire_ms + net_->latency(from, to);
    }

private:
    const network_model* net_ = nullptr;
    std::size_t devices_ = 0;
    bool free_ = true;
    bool dense_ = true;
    std::vector<double> table_;                          ///< [from * devices + to]
    std::unordered_map<std::uint64_t, double> sparse_;  ///< key (from << 32) | to
};

}  // namespace pipeplan::schedule
