// Shared by the plan fuzz targets: the validator's memory rule says "over" for a rank exactly
// when the header records a device memory and the rank's arena plus model state exceeds it.
#pragma once

#include <algorithm>

#include "pipeplan/plan/plan.hpp"
#include "pipeplan/plan/validate.hpp"

namespace pipeplan::fuzz {

/// Traps when validate_header()'s memory verdict on any rank of `p` disagrees with rank_memory_mb().
inline void check_memory_rule(const plan::execution_plan& p) {
    for (const auto& prog : p.programs) {
        const auto rep = plan::validate_header(plan::rank_plan{p.header, prog}, plan::validate_options{std::size_t(1) << 20});
        const bool said = std::any_of(rep.violations.begin(), rep.violations.end(), [](const auto& v) { return v.rule == "memory"; });
        const bool over = plan::records_memory(p.header) && prog.rank < p.header.ranks() &&
                          !(plan::rank_memory_mb(p.header, prog) <= p.header.device_memory_mb);
        if (said != over) __builtin_trap();
    }
}

}  // namespace pipeplan::fuzz
