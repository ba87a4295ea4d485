// pipeplan/schedule/scenario.hpp — what a pipeline schedule is run on.
//
// A scenario holds, per (micro-batch, stage), the forward and backward time, the activation
// memory the forward stores for the backward, and the peak memory footprint while the
// micro-batch's forward or backward runs on the stage (that peak includes its own stored
// activations, so peak_mb >= stored_mb); per stage the model-state memory (weights, gradients,
// optimizer state); per micro-batch the activation message size sent across every stage
// boundary; and the network. Units: ms and MB (10^6 bytes); bandwidth in Gbit/s.
//
// Scenarios come from a micro-batch split + cost model (the batching tier builds them with
// make_scenario from plain vectors) or are given directly (schedule/scenario_json.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pipeplan::schedule {

/// Point-to-point network between devices. A message of `size_mb` from device a to b takes
/// latency + size / bandwidth; links are per ordered device pair and carry one message at a
/// time. Devices `devices_per_node` apart share a node and use the intra-node figures.
/// A bandwidth of 0 means infinite (size costs nothing); zero latency and zero sizes make
/// communication a pure dependency.
struct network_model {
    double latency_ms = 0.0;                ///< inter-node latency per message
    double bandwidth_gbps = 0.0;            ///< inter-node bandwidth (Gbit/s); 0 = infinite
    double intra_node_latency_ms = 0.0;     ///< latency between devices of one node
    double intra_node_bandwidth_gbps = 0.0; ///< bandwidth within a node; 0 = infinite
    std::uint32_t devices_per_node = 1;     ///< devices d and e share a node iff d/n == e/n

    [[nodiscard]] bool same_node(std::size_t a, std::size_t b) const noexcept {
        return devices_per_node > 1 && a / devices_per_node == b / devices_per_node;
    }
    /// Transfer time (latency excluded) of `size_mb` from device a to b, in ms.
    [[nodiscard]] double wire_ms(double size_mb, std::size_t a, std::size_t b) const noexcept {
        const double bw = same_node(a, b) ? intra_node_bandwidth_gbps : bandwidth_gbps;
        if (bw <= 0.0 || size_mb <= 0.0) return 0.0;
        return size_mb * 8.0 / bw;  // MB * 8e6 bit / (bw * 1e9 bit/s) = size*8/bw ms
    }
    [[nodiscard]] double latency(std::size_t a, std::size_t b) const noexcept {
        return same_node(a, b) ? intra_node_latency_ms : latency_ms;
    }
    /// True when no message ever costs time.
    [[nodiscard]] bool is_free() const noexcept {
        return latency_ms <= 0.0 && intra_node_latency_ms <= 0.0 &&
               (bandwidth_gbps <= 0.0) && (intra_node_bandwidth_gbps <= 0.0);
    }
};

/// The allowed range of every kind of scenario value. The one set of limits: the scenario JSON
/// reader (scenario_json.hpp) and scenario::validate() both check it, so a scenario built in
/// code is held to the same ranges as a file. Lower bounds are 0 (ratios: [0, 1]).
struct scenario_limits {
    static constexpr double max_time_ms = 1e9;           ///< an op's time, a latency (11.6 days)
    static constexpr double max_memory_mb = 1e9;         ///< a memory figure or message size (1 PB)
    static constexpr double max_bandwidth_gbps = 1e6;    ///< a link (1 Pbit/s); 0 = messages are free
    static constexpr long long max_stages = 1000000;     ///< stages
    static constexpr long long max_devices_per_node = 1 << 20;
};

/// Per (micro-batch, stage) costs of one training step. Stages here are the pipeline's
/// (virtual) stages; a placement (placement.hpp) maps them to devices.
/// Per-(mb, stage) arrays are flat and stage-major, index `stage * microbatches + mb` (use
/// at()): a stage's micro-batches are contiguous, which is how simulations walk them.
struct scenario {
    std::size_t stages = 0;
    std::size_t microbatches = 0;
    std::vector<double> forward_ms;      ///< [at(mb, s)]
    std::vector<double> backward_ms;     ///< [at(mb, s)] (whole backward: B + W)
    std::vector<double> stored_mb;       ///< [at(mb, s)] activations kept for the backward
    std::vector<double> peak_mb;         ///< [at(mb, s)] footprint while F/B runs (>= stored)
    std::vector<double> model_state_mb;  ///< [s]
    std::vector<double> activation_mb;   ///< [mb] message size per boundary; also f's checkpoint
    network_model network;
    /// Devices the stages run on; 0 = one stage per device (devices = stages).
    std::size_t devices = 0;
    /// [s] device of (virtual) stage s; empty = stage s on device s. With devices D < stages,
    /// the usual interleaved placement is s mod D (placement.hpp).
    std::vector<std::uint32_t> placement;
    /// [s] share r_s in [0, 1] of stage s's stored activations that a checkpointed forward (f)
    /// drops and recomputes; empty = 1 on every stage (full checkpointing). An f keeps
    /// (1 - r_s)·stored + its input; its inline recomputation costs r_s·forward (docs/schedules.md).
    std::vector<double> checkpoint_ratio;

    [[nodiscard]] std::size_t at(std::size_t mb, std::size_t s) const noexcept { return s * microbatches + mb; }
    [[nodiscard]] double fwd(std::size_t mb, std::size_t s) const noexcept { return forward_ms[at(mb, s)]; }
    [[nodiscard]] double bwd(std::size_t mb, std::size_t s) const noexcept { return backward_ms[at(mb, s)]; }
    [[nodiscard]] double stored(std::size_t mb, std::size_t s) const noexcept { return stored_mb[at(mb, s)]; }
    [[nodiscard]] double peak(std::size_t mb, std::size_t s) const noexcept { return peak_mb[at(mb, s)]; }
    [[nodiscard]] double activation(std::size_t mb) const noexcept {
        return activation_mb.empty() ? 0.0 : activation_mb[mb];
    }
    /// Checkpoint ratio r_s of stage s (1 when the scenario gives none).
    [[nodiscard]] double ratio(std::size_t s) const noexcept {
        return checkpoint_ratio.empty() ? 1.0 : checkpoint_ratio[s];
    }
    /// Number of devices (`devices`, or one per stage).
    [[nodiscard]] std::size_t device_count() const noexcept { return devices == 0 ? stages : devices; }
    /// Device of stage s (`placement`, or s).
    [[nodiscard]] std::size_t device_of(std::size_t s) const noexcept {
        return placement.empty() ? s : placement[s];
    }

    /// Checks sizes and ranges (scenario_limits, as the JSON reader does); throws
    /// pipeplan::invalid_argument naming the first bad value as `field[mb][stage]` with its
    /// allowed range, e.g. "scenario: microbatches[3].forward_ms[1] must be a number in
    /// [0, 1e+09] ms, is 1e+12".
    void validate() const {
        using L = scenario_limits;
        if (stages == 0 || stages > static_cast<std::size_t>(L::max_stages))
            throw invalid_argument("scenario: stages must lie in [1, " + std::to_string(L::max_stages) + "], is " +
                                   std::to_string(stages));
        if (microbatches == 0) throw invalid_argument("scenario: at least one micro-batch is needed");
        const std::size_t n = stages * microbatches;
        auto check_size = [](const std::vector<double>& v, std::size_t want, const char* name) {
            if (v.size() != want)
                throw invalid_argument(std::string("scenario: ") + name + " has " + std::to_string(v.size()) +
                                       " values, expected " + std::to_string(want));
        };
        check_size(forward_ms, n, "forward_ms");
        check_size(backward_ms, n, "backward_ms");
        check_size(stored_mb, n, "stored_mb");
        check_size(peak_mb, n, "peak_mb");
        check_size(model_state_mb, stages, "model_state_mb");
        if (!activation_mb.empty()) check_size(activation_mb, microbatches, "activation_mb");
        validate_ranges();
        validate_layout();
    }

    /// Checks every number against scenario_limits (part of validate(); sizes must be right).
    void validate_ranges() const {
        using L = scenario_limits;
        auto check = [](double x, double hi, const char* unit, const auto& name) {
            if (!(x >= 0.0 && x <= hi))  // NaN fails too
                throw invalid_argument("scenario: " + name() + " must be a number in " + range_text(0.0, hi) + " " + unit +
                                       ", is " + number_text(x));
        };
        auto where = [&](const char* name, std::size_t i) {
            return [this, name, i] {
                return "microbatches[" + std::to_string(i % microbatches) + "]." + name + "[" +
                       std::to_string(i / microbatches) + "]";
            };
        };
        const std::size_t n = forward_ms.size();
        for (std::size_t b = 0; b < n; b += range_block) {
            const std::size_t e = std::min(n, b + range_block);
            if (in_ranges(b, e)) continue;  // the common case, without building the error's text
            for (std::size_t i = b; i < e; ++i) {
                check(forward_ms[i], L::max_time_ms, "ms", where("forward_ms", i));
                check(backward_ms[i], L::max_time_ms, "ms", where("backward_ms", i));
                check(stored_mb[i], L::max_memory_mb, "MB", where("stored_mb", i));
                check(peak_mb[i], L::max_memory_mb, "MB", where("peak_mb", i));
                if (peak_mb[i] < stored_mb[i])
                    throw invalid_argument("scenario: " + where("peak_mb", i)() + " (" + number_text(peak_mb[i]) +
                                           ") is below stored_mb (" + number_text(stored_mb[i]) +
                                           "): the peak includes the stored activations");
            }
        }
        auto indexed = [](const char* name, std::size_t i) {
            return [name, i] { return std::string(name) + "[" + std::to_string(i) + "]"; };
        };
        for (std::size_t s = 0; s < model_state_mb.size(); ++s)
            check(model_state_mb[s], L::max_memory_mb, "MB", indexed("model_state_mb", s));
        for (std::size_t j = 0; j < activation_mb.size(); ++j)
            check(activation_mb[j], L::max_memory_mb, "MB", indexed("network.activation_mb", j));
        auto named = [](const char* name) { return [name] { return std::string(name); }; };
        const auto& nw = network;
        check(nw.latency_ms, L::max_time_ms, "ms", named("network.latency_ms"));
        check(nw.intra_node_latency_ms, L::max_time_ms, "ms", named("network.intra_node_latency_ms"));
        check(nw.bandwidth_gbps, L::max_bandwidth_gbps, "Gbit/s", named("network.bandwidth_gbps"));
        check(nw.intra_node_bandwidth_gbps, L::max_bandwidth_gbps, "Gbit/s", named("network.intra_node_bandwidth_gbps"));
        if (nw.devices_per_node < 1 || nw.devices_per_node > L::max_devices_per_node)
            throw invalid_argument("scenario: network.devices_per_node must lie in [1, " +
                                   std::to_string(L::max_devices_per_node) + "], is " + std::to_string(nw.devices_per_node));
    }

    /// Values per block of validate_ranges()'s branch-free pass (a block out of range is
    /// checked again value by value, for the error's text).
    static constexpr std::size_t range_block = 512;

    /// Whether every (stage, micro-batch) value in [b, e) lies in scenario_limits' ranges
    /// (peak not below stored; NaN fails); with SSE2 two values at a time without a branch
    /// (g++ 12 does not vectorise the scalar loop): ~17 against ~33 instructions per value
    /// (simulate() runs it on every call; callgrind, 1F1B at S 64, M 4096).
    [[nodiscard]] bool in_ranges(std::size_t b, std::size_t e) const noexcept {
        using L = scenario_limits;
        const double *f = forward_ms.data(), *bw = backward_ms.data(), *st = stored_mb.data(), *pk = peak_mb.data();
        bool all = true;
        std::size_t i = b;
#if defined(__SSE2__)
        const __m128d zero = _mm_setzero_pd(), t_hi = _mm_set1_pd(L::max_time_ms), m_hi = _mm_set1_pd(L::max_memory_mb);
        __m128d ok = _mm_cmpeq_pd(zero, zero);
        for (; i + 2 <= e; i += 2) {
            const __m128d x = _mm_loadu_pd(f + i), y = _mm_loadu_pd(bw + i), s = _mm_loadu_pd(st + i),
                          p = _mm_loadu_pd(pk + i);
            const __m128d xy = _mm_and_pd(_mm_and_pd(_mm_cmpge_pd(x, zero), _mm_cmple_pd(x, t_hi)),
                                          _mm_and_pd(_mm_cmpge_pd(y, zero), _mm_cmple_pd(y, t_hi)));
            const __m128d sp = _mm_and_pd(_mm_and_pd(_mm_cmpge_pd(s, zero), _mm_cmple_pd(s, m_hi)),
                                          _mm_and_pd(_mm_cmple_pd(p, m_hi), _mm_cmpge_pd(p, s)));
            ok = _mm_and_pd(ok, _mm_and_pd(xy, sp));
        }
        all = _mm_movemask_pd(ok) == 3;
#endif
        for (; i < e; ++i)
            all = all && f[i] >= 0.0 && f[i] <= L::max_time_ms && bw[i] >= 0.0 && bw[i] <= L::max_time_ms &&
                  st[i] >= 0.0 && st[i] <= L::max_memory_mb && pk[i] <= L::max_memory_mb && pk[i] >= st[i];
        return all;
    }

    /// Checks devices, placement and checkpoint_ratio (part of validate()).
    void validate_layout() const {
        if (devices > stages)
            throw invalid_argument("scenario: devices (" + std::to_string(devices) + ") exceeds stages (" +
                                   std::to_string(stages) + ")");
        auto per_stage = [&](std::size_t n, const char* name) {
            if (n != stages)
                throw invalid_argument(std::string("scenario: ") + name + " has " + std::to_string(n) +
                                       " values, expected " + std::to_string(stages) + " (one per stage)");
        };
        if (!placement.empty()) {
            per_stage(placement.size(), "placement");
            std::vector<char> used(device_count(), 0);
            for (std::size_t s = 0; s < stages; ++s) {
                if (placement[s] >= device_count())
                    throw invalid_argument("scenario: placement[" + std::to_string(s) + "] = " +
                                           std::to_string(placement[s]) + " is not a device (devices = " +
                                           std::to_string(device_count()) + ")");
                used[placement[s]] = 1;
            }
            for (std::size_t d = 0; d < used.size(); ++d)
                if (!used[d]) throw invalid_argument("scenario: placement runs no stage on device " + std::to_string(d));
        } else if (devices != 0 && devices != stages) {
            throw invalid_argument("scenario: devices (" + std::to_string(devices) + ") differs from stages (" +
                                   std::to_string(stages) + ") but no placement is given");
        }
        if (!checkpoint_ratio.empty()) {
            per_stage(checkpoint_ratio.size(), "checkpoint_ratio");
            for (std::size_t s = 0; s < stages; ++s)
                if (!(checkpoint_ratio[s] >= 0.0 && checkpoint_ratio[s] <= 1.0))
                    throw invalid_argument("scenario: checkpoint_ratio[" + std::to_string(s) + "] must lie in [0, 1], is " +
                                           std::to_string(checkpoint_ratio[s]));
        }
    }

    /// Total forward + backward time of micro-batch `mb` over all stages.
    [[nodiscard]] double work_ms(std::size_t mb) const noexcept {
        double t = 0;
        for (std::size_t s = 0; s < stages; ++s) t += fwd(mb, s) + bwd(mb, s);
        return t;
    }
};

/// Builds a scenario from per-micro-batch, per-stage vectors (`x[mb][stage]`), the interface
/// the batching tier feeds: forward/backward times, stored and peak activation memory, the
/// per-stage model state, and optionally per-micro-batch activation message sizes and a
/// network. Throws pipeplan::invalid_argument on ragged or negative input.
[[nodiscard]] inline scenario make_scenario(const std::vector<std::vector<double>>& forward_ms,
                                            const std::vector<std::vector<double>>& backward_ms,
                                            const std::vector<std::vector<double>>& stored_mb,
                                            const std::vector<std::vector<double>>& peak_mb,
                                            std::vector<double> model_state_mb,
                                            std::vector<double> activation_mb = {},
                                            network_model network = {}) {
    scenario sc;
    sc.microbatches = forward_ms.size();
    sc.stages = forward_ms.empty() ? 0 : forward_ms.front().size();
    auto flatten = [&](const std::vector<std::vector<double>>& x, const char* name) {
        if (x.size() != sc.microbatches)
            throw invalid_argument(std::string("make_scenario: ") + name + " has " + std::to_string(x.size()) +
                                   " micro-batches, forward_ms has " + std::to_string(sc.microbatches));
        std::vector<double> flat(sc.microbatches * sc.stages);
        for (std::size_t j = 0; j < x.size(); ++j) {
            if (x[j].size() != sc.stages)
                throw invalid_argument(std::string("make_scenario: ") + name + "[" + std::to_string(j) + "] has " +
                                       std::to_string(x[j].size()) + " stages, expected " +
                                       std::to_string(sc.stages));
            for (std::size_t s = 0; s < sc.stages; ++s) flat[sc.at(j, s)] = x[j][s];
        }
        return flat;
    };
    sc.forward_ms = flatten(forward_ms, "forward_ms");
    sc.backward_ms = flatten(backward_ms, "backward_ms");
    sc.stored_mb = flatten(stored_mb, "stored_mb");
    sc.peak_mb = flatten(peak_mb, "peak_mb");
    sc.model_state_mb = std::move(model_state_mb);
    sc.activation_mb = std::move(activation_mb);
    sc.network = network;
    sc.validate();
    return sc;
}

/// A scenario whose micro-batch m has costs `base * multiplier[m]` on every stage:
/// forward base_forward_ms[s]·m, backward backward_factor·forward, stored stored_mb·m, peak
/// peak_mb·m, model state model_state_mb on every stage, no communication.
[[nodiscard]] inline scenario scaled_scenario(const std::vector<double>& base_forward_ms,
                                              const std::vector<double>& multipliers,
                                              double backward_factor, double model_state_mb,
                                              double stored_mb_per_unit, double peak_mb_per_unit) {
    std::vector<std::vector<double>> f, b, st, pk;
    for (double m : multipliers) {
        std::vector<double> fr, br, sr, pr;
        for (double x : base_forward_ms) {
            fr.push_back(x * m);
            br.push_back(x * m * backward_factor);
            sr.push_back(stored_mb_per_unit * m);
            pr.push_back(peak_mb_per_unit * m);
        }
        f.push_back(std::move(fr));
        b.push_back(std::move(br));
        st.push_back(std::move(sr));
        pk.push_back(std::move(pr));
    }
    return make_scenario(f, b, st, pk, std::vector<double>(base_forward_ms.size(), model_state_mb));
}

/// Writes into `r` the scenario `sc` with micro-batches taken in `order` (order[i] = old index
/// of the new micro-batch i), reusing r's storage (r may hold a previous reordering of sc).
/// `order` must be a permutation of 0..M-1.
inline void reorder_into(scenario& r, const scenario& sc, const std::vector<std::uint32_t>& order) {
    if (order.size() != sc.microbatches) throw invalid_argument("reorder: order has the wrong length");
    std::vector<char> seen(sc.microbatches, 0);
    for (auto j : order) {
        if (j >= sc.microbatches || seen[j]) throw invalid_argument("reorder: order is not a permutation");
        seen[j] = 1;
    }
    if (&r == &sc) throw invalid_argument("reorder_into: the target must not be the source");
    if ((r.stages != sc.stages || r.microbatches != sc.microbatches || r.forward_ms.size() != sc.forward_ms.size() ||
                      r.activation_mb.size() != sc.activation_mb.size()))
        r = sc;
    const std::size_t S = sc.stages;
    for (std::size_t i = 0; i < order.size(); ++i) {
        const std::size_t from = order[i];
        for (std::size_t s = 0; s < S; ++s) {
            r.forward_ms[r.at(i, s)] = sc.forward_ms[sc.at(from, s)];
            r.backward_ms[r.at(i, s)] = sc.backward_ms[sc.at(from, s)];
            r.stored_mb[r.at(i, s)] = sc.stored_mb[sc.at(from, s)];
            r.peak_mb[r.at(i, s)] = sc.peak_mb[sc.at(from, s)];
        }
        if (!sc.activation_mb.empty()) r.activation_mb[i] = sc.activation_mb[from];
    }
}

/// The same scenario with micro-batches taken in `order` (order[i] = old index of the new
/// micro-batch i). `order` must be a permutation of 0..M-1.
[[nodiscard]] inline scenario reorder(const scenario& sc, const std::vector<std::uint32_t>& order) {
    scenario r = sc;
    reorder_into(r, sc, order);
    return r;
}

/// Splits every stage into `chunks` equal model chunks (for interleaved placements): the
/// result has stages * chunks virtual stages, virtual stage c * stages + s holding 1/chunks of
/// stage s's times, memory and model state, on the device of stage s (the result records that
/// placement). Activation messages keep their size.
[[nodiscard]] inline scenario split_into_chunks(const scenario& sc, std::size_t chunks) {
    if (chunks == 0) throw invalid_argument("split_into_chunks: chunks must be >= 1");
    if (chunks == 1) return sc;
    scenario r;
    r.stages = sc.stages * chunks;
    r.microbatches = sc.microbatches;
    const double k = 1.0 / static_cast<double>(chunks);
    const std::size_t n = r.stages * r.microbatches;
    r.forward_ms.resize(n);
    r.backward_ms.resize(n);
    r.stored_mb.resize(n);
    r.peak_mb.resize(n);
    for (std::size_t j = 0; j < sc.microbatches; ++j)
        for (std::size_t c = 0; c < chunks; ++c)
            for (std::size_t s = 0; s < sc.stages; ++s) {
                const std::size_t v = c * sc.stages + s;
                r.forward_ms[r.at(j, v)] = sc.fwd(j, s) * k;
                r.backward_ms[r.at(j, v)] = sc.bwd(j, s) * k;
                r.stored_mb[r.at(j, v)] = sc.stored(j, s) * k;
                r.peak_mb[r.at(j, v)] = sc.peak(j, s) * k;
            }
    r.model_state_mb.resize(r.stages);
    for (std::size_t c = 0; c < chunks; ++c)
        for (std::size_t s = 0; s < sc.stages; ++s) r.model_state_mb[c * sc.stages + s] = sc.model_state_mb[s] * k;
    r.activation_mb = sc.activation_mb;
    r.network = sc.network;
    // Chunk c of stage s runs where stage s ran.
    r.devices = sc.device_count();
    r.placement.resize(r.stages);
    for (std::size_t v = 0; v < r.stages; ++v) r.placement[v] = static_cast<std::uint32_t>(sc.device_of(v % sc.stages));
    if (!sc.checkpoint_ratio.empty()) {
        r.checkpoint_ratio.resize(r.stages);
        for (std::size_t v = 0; v < r.stages; ++v) r.checkpoint_ratio[v] = sc.checkpoint_ratio[v % sc.stages];
    }
    return r;
}

}  // namespace pipeplan::schedule
