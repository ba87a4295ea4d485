// pipeplan/schedule/interleaved.hpp — interleaved 1F1B (Narayanan et al., SC'21, Megatron-LM).
#pragma once

#include <algorithm>
#include <cstdint>

#include "pipeplan/schedule/generator.hpp"
#include "pipeplan/schedule/one_f_one_b.hpp"

namespace pipeplan::schedule {

/// Interleaved 1F1B over a scenario of V = D·C virtual stages (C = `chunks` model chunks per
/// device, stage v on device v mod D; use split_into_chunks() to cut S stages into S·C).
/// Micro-batches are taken in groups of D; within a group a device runs chunk 0 for every
/// micro-batch of the group, then chunk 1, ...; backwards run the chunks in reverse. Device d
/// warms up with (D - d - 1)·2 + (C - 1)·D forwards, then alternates, then drains.
/// When M is not a multiple of D the orders are built for M rounded up to a multiple of D and
/// the ops of the padding micro-batches are dropped: each device order is a subsequence of a
/// deadlock-free schedule, so it is deadlock-free too (Megatron's warm-up count, applied to a
/// short last group directly, deadlocks).
/// Uniform micro-batches (M a multiple of D), no communication: M·C·(f+b)_chunk + (D-1)(f+b)_chunk.
struct interleaved_1f1b {
    std::size_t chunks = 2;  ///< model chunks per device (C >= 1; C = 1 is plain 1F1B)

    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        if (chunks == 0 || sc.stages % chunks != 0)
            throw invalid_argument("interleaved_1f1b: the scenario's " + std::to_string(sc.stages) +
                                   " stages are not a multiple of chunks = " + std::to_string(chunks));
        const std::size_t C = chunks, D = sc.stages / C, M = sc.microbatches;
        const std::size_t Mp = (M + D - 1) / D * D, total = Mp * C;  // padded to whole groups
        pipeline_schedule s;
        s.name = "interleaved";
        s.placement = stage_placement::interleaved(D, C);
        s.orders.resize(D);
        if (C == 1) {
            for (std::size_t d = 0; d < D; ++d) s.orders[d] = one_f_one_b::stage_order(D, M, d);
            return s;
        }
        // k-th forward (or backward) of a device -> (micro-batch, chunk).
        auto nth = [&](std::size_t k, bool backward) {
            const std::size_t g = k / (D * C), within = k - g * D * C;
            std::size_t c = within / D;
            if (backward) c = C - 1 - c;
            return std::pair<std::uint32_t, std::size_t>{static_cast<std::uint32_t>(g * D + within % D), c};
        };
        for (std::size_t d = 0; d < D; ++d) {
            auto& o = s.orders[d];
            o.reserve(2 * total);
            auto push = [&](std::size_t k, bool backward) {
                const auto [j, c] = nth(k, backward);
                if (j >= M) return;  // padding micro-batch
                o.push_back({backward ? op_kind::B : op_kind::F, j, static_cast<std::uint32_t>(c * D + d)});
            };
            const std::size_t w = std::min(total, (D - d - 1) * 2 + (C - 1) * D);
            for (std::size_t k = 0; k < w; ++k) push(k, false);
            for (std::size_t i = 0; i + w < total; ++i) {
                push(i + w, false);
                push(i, true);
            }
            for (std::size_t k = total - w; k < total; ++k) push(k, true);
        }
        return s;
    }
};

}  // namespace pipeplan::schedule
