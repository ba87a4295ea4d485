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
#include <vector>

#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::schedule {

/// Per-link "free again at" times of a network_model over D devices. Dense (a D x D table)
/// for up to 256 devices; beyond, per sending device the list of links it has used (a pipeline
/// device sends to 1-3 peers, so a look-up scans 1-3 entries; a device that sends to k peers
/// costs O(k) per message), and reset() clears only the lists of the devices that sent: no
/// hashing and no D x D table at S = 1024. reset() reuses the storage, so a reused
/// link_channels allocates nothing once it has seen the links.
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
        for (std::size_t d : senders_) peers_[d].clear();
        senders_.clear();
        if (!free_ && dense_) table_.assign(devices * devices, 0.0);
        else table_.clear();
        if (!free_ && !dense_ && peers_.size() < devices) peers_.resize(devices);
    }

    /// True when no message ever costs time (arrival(t, ...) == t).
    [[nodiscard]] bool is_free() const noexcept { return free_; }

    /// Sends `size_mb` from device `from` to `to`, ready at time `t` (ms); returns its arrival
    /// time. A message to the sending device itself arrives at once.
    double arrival(double t, std::size_t from, std::size_t to, double size_mb) {
        if (from == to || free_) return t;
        const double wire_ms = net_->wire_ms(size_mb, from, to);
        double& link_free_ms = dense_ ? table_[from * devices_ + to] : listed_link(from, to);
        const double depart_ms = std::max(t, link_free_ms);
        link_free_ms = depart_ms + wire_ms;
        return depart_ms + wire_ms + net_->latency(from, to);
    }

private:
    /// One link out of a device: its receiver and the time it is free again (ms).
    struct peer {
        std::size_t to;
        double free_ms;
    };

    /// The free-again time of link from -> to in from's list (added, free at 0, when new).
    double& listed_link(std::size_t from, std::size_t to) {
        std::vector<peer>& out = peers_[from];
        for (peer& p : out)
            if (p.to == to) return p.free_ms;
        if (out.empty()) senders_.push_back(from);
        out.push_back({to, 0.0});
        return out.back().free_ms;
    }

    const network_model* net_ = nullptr;
    std::size_t devices_ = 0;
    bool free_ = true;
    bool dense_ = true;
    std::vector<double> table_;                          ///< [from * devices + to]
    std::vector<std::vector<peer>> peers_;  ///< [from] the links used since reset() (beyond 256 devices)
    std::vector<std::size_t> senders_;      ///< the devices whose list is not empty
};

}  // namespace pipeplan::schedule
