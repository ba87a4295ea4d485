// pipeplan/schedule/one_f_one_b.hpp — 1F1B (PipeDream-Flush / Megatron-LM's non-interleaved).
#pragma once

#include <algorithm>
#include <cstdint>

#include "pipeplan/schedule/generator.hpp"

namespace pipeplan::schedule {

/// Stage s of S runs w = min(S - s - 1, M) warm-up forwards, then alternates one forward and
/// one backward, then drains the last w backwards. At most min(S - s, M) micro-batches are in
/// flight on stage s. Uniform micro-batches without communication: (M + S - 1)(f + b).
/// For S = 4, M = 6, stage 0 runs F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5.
struct one_f_one_b {
    /// The op list of stage `s` (kinds F and B only).
    [[nodiscard]] static std::vector<op> stage_order(std::size_t S, std::size_t M, std::size_t s) {
        std::vector<op> o;
        o.reserve(2 * M);
        const auto st = static_cast<std::uint32_t>(s);
        const std::size_t w = std::min(S - s - 1, M);
        for (std::size_t j = 0; j < w; ++j) o.push_back({op_kind::F, static_cast<std::uint32_t>(j), st});
        for (std::size_t i = 0; i + w < M; ++i) {
            o.push_back({op_kind::F, static_cast<std::uint32_t>(i + w), st});
            o.push_back({op_kind::B, static_cast<std::uint32_t>(i), st});
        }
        for (std::size_t j = M - w; j < M; ++j) o.push_back({op_kind::B, static_cast<std::uint32_t>(j), st});
        return o;
    }

    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        pipeline_schedule s;
        s.name = "1f1b";
        s.placement = stage_placement::linear(sc.stages);
        s.orders.resize(sc.stages);
        for (std::size_t d = 0; d < sc.stages; ++d) s.orders[d] = stage_order(sc.stages, sc.microbatches, d);
        return s;
    }
};

}  // namespace pipeplan::schedule
