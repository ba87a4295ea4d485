// pipeplan/schedule/gpipe.hpp — GPipe: all forwards, then all backwards (Huang et al., 2019).
#pragma once

#include <cstdint>

#include "pipeplan/schedule/generator.hpp"

namespace pipeplan::schedule {

/// GPipe on a linear placement: every stage runs F0..F(M-1), then B0..B(M-1).
/// Uniform micro-batches without communication: makespan (M + S - 1)(f + b).
struct gpipe {
    [[nodiscard]] pipeline_schedule operator()(const scenario& sc) const {
        pipeline_schedule s;
        s.name = "gpipe";
        s.placement = stage_placement::linear(sc.stages);
        s.orders.resize(sc.stages);
        for (std::size_t d = 0; d < sc.stages; ++d) {
            auto& o = s.orders[d];
            o.reserve(2 * sc.microbatches);
            const auto st = static_cast<std::uint32_t>(d);
            for (std::uint32_t j = 0; j < sc.microbatches; ++j) o.push_back({op_kind::F, j, st});
            for (std::uint32_t j = 0; j < sc.microbatches; ++j) o.push_back({op_kind::B, j, st});
        }
        return s;
    }
};

}  // namespace pipeplan::schedule
