// pipeplan/runtime/cpu/plans.hpp — execution plans for the tiny model.
//
// The tiny model's own cost model makes the scenario a schedule runs on: per (micro-batch,
// virtual stage) a forward time proportional to the padded tokens times the stage's blocks
// (backward twice that), stored activations of one hidden-size tensor per block, and an
// activation message of exactly hidden × padded tokens doubles (activation_mb in 10^6 bytes,
// so the plan's buffers hold the doubles the CPU backend sends). Each data-parallel replica's
// micro-batches are scheduled and lowered by the plan tier (plan/lower.hpp) with its rank and
// micro-batch offsets, then the replicas' programs form one execution plan, validated.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/runtime/cpu/tiny_model.hpp"
#include "pipeplan/schedule/registry.hpp"

namespace pipeplan::runtime::cpu {

/// Sample ids (indices into the batch) of each micro-batch: [replica][micro-batch] → ids.
using replica_split = std::vector<std::vector<std::vector<std::uint32_t>>>;

/// How to plan the tiny model.
struct tiny_plan_options {
    schedule::schedule_name schedule = schedule::schedule_name::one_f_one_b;
    std::size_t devices = 2;  ///< pipeline devices per replica (S)
    std::size_t chunks = 2;   ///< virtual stages per device for interleaved
    std::uint64_t iteration = 0;
    /// The send rule of the transport that runs the plan (plan/send_rule.hpp): buffered for the
    /// thread transport, grouped for the CUDA transports.
    plan::send_rule sends = plan::send_rule::buffered;
};

/// Padded length of micro-batch `ids` (its longest sample).
[[nodiscard]] inline std::size_t padded_length(const std::vector<std::uint32_t>& ids, const std::vector<std::size_t>& lengths_tokens) {
    std::size_t l = 0;
    for (auto id : ids) l = std::max(l, lengths_tokens.at(id));
    return l;
}

/// The tiny model's scenario of one replica's micro-batches over `devices` stages (see the file
/// comment).
[[nodiscard]] inline schedule::scenario tiny_scenario(const model_config& c, const std::vector<std::vector<std::uint32_t>>& mbs,
                                                      const std::vector<std::size_t>& lengths_tokens, std::size_t devices) {
    const auto layouts = split_layers(c.blocks, devices);
    std::vector<std::vector<double>> fwd, bwd, stored, peak;
    std::vector<double> message_mb;
    for (const auto& ids : mbs) {
        if (ids.empty()) throw invalid_argument("tiny model plan: an empty micro-batch");
        const double tokens = static_cast<double>(ids.size() * padded_length(ids, lengths_tokens));
        const double tensor_mb = tokens * static_cast<double>(c.hidden) * sizeof(double) / 1e6;
        std::vector<double> f, b, s, p;
        for (const auto& l : layouts) {
            const double blocks = static_cast<double>(l.end_block - l.first_block) + (l.head ? 1.0 : 0.0);
            f.push_back(tokens * blocks * 1e-3);
            b.push_back(2 * tokens * blocks * 1e-3);
            s.push_back(tensor_mb * blocks);
            p.push_back(tensor_mb * (blocks + 1));
        }
        fwd.push_back(f);
        bwd.push_back(b);
        stored.push_back(s);
        peak.push_back(p);
        message_mb.push_back(tensor_mb);
    }
    return schedule::make_scenario(fwd, bwd, stored, peak, std::vector<double>(devices, 0.0), message_mb);
}

/// The execution plan of one iteration of the tiny model: every replica's micro-batches
/// scheduled with o.schedule, lowered, joined (rank = replica · devices + device) and validated
/// (throws plan::plan_error listing violations).
[[nodiscard]] inline plan::execution_plan plan_tiny(const model_config& c, const replica_split& split,
                                                    const std::vector<std::size_t>& lengths_tokens,
                                                    const tiny_plan_options& o) {
    if (split.empty()) throw invalid_argument("tiny model plan: no replica");
    schedule::named_schedule_options so;
    so.chunks = o.chunks;
    so.quick = true;
    plan::execution_plan out;
    std::uint32_t mb_offset = 0;
    for (std::size_t k = 0; k < split.size(); ++k) {
        const schedule::scenario base = tiny_scenario(c, split[k], lengths_tokens, o.devices);
        const schedule::scenario sc = schedule::prepare_scenario(o.schedule, base, so);
        const schedule::pipeline_schedule s = schedule::make_generator(o.schedule, so)(sc);
        plan::lowering_options lo;
        lo.type = plan::dtype::fp64;  // the tiny model's activations and gradients are double
        lo.sends = o.sends;
        lo.rank_offset = static_cast<std::uint32_t>(k * o.devices);
        lo.mb_offset = mb_offset;
        for (const auto& ids : split[k])
            lo.shapes.push_back({static_cast<std::uint32_t>(ids.size()),
                                 static_cast<std::uint32_t>(padded_length(ids, lengths_tokens)), 0,
                                 static_cast<std::uint32_t>(c.hidden)});
        plan::execution_plan part = plan::lower(sc, s, lo);
        if (k == 0) {
            out.header = part.header;
            out.header.microbatches.clear();  // the joined table is built below, replica by replica
        }
        for (std::size_t j = 0; j < split[k].size(); ++j)
            out.header.microbatches.push_back({static_cast<std::uint32_t>(k), split[k][j], lo.shapes[j]});
        for (auto& p : part.programs) out.programs.push_back(std::move(p));
        mb_offset += static_cast<std::uint32_t>(split[k].size());
    }
    out.header.dp = static_cast<std::uint32_t>(split.size());
    out.header.iteration = o.iteration;
    plan::validate_or_throw(out);
    return out;
}

/// The rank plans of an execution plan (what each rank loads).
[[nodiscard]] inline std::vector<plan::rank_plan> rank_plans(const plan::execution_plan& p) {
    std::vector<plan::rank_plan> out;
    for (std::size_t r = 0; r < p.programs.size(); ++r) out.push_back(plan::share_of(p, r));
    return out;
}

}  // namespace pipeplan::runtime::cpu
