// pipeplan/runtime/cpu/plans.hpp — execution plans for the tiny model, from the library's planner.
//
// One cost model prices the tiny model everywhere: tiny_cost_model (split.hpp). The planner
// (plan/planner.hpp) splits a batch under it, prices each micro-batch per pipeline chunk through
// the bridge (bridge/split_to_scenario.hpp), schedules, lowers and validates: tiny_planner is
// that planner with the tiny model's pipeline, length rules and fp64 messages (hidden ×
// padded tokens doubles per message, the tensors the CPU backend sends). plan_tiny() plans a
// given split (tests that pin the micro-batches of every replica): the same cost model and
// bridge make each replica's scenario, and the plan tier joins the replicas into one plan
// (plan::join_replicas, as the planner does), validated.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/bridge/split_to_scenario.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/plan/planner.hpp"
#include "pipeplan/plan/validate.hpp"
#include "pipeplan/runtime/cpu/split.hpp"
#include "pipeplan/runtime/cpu/tiny_model.hpp"
#include "pipeplan/schedule/registry.hpp"

namespace pipeplan::runtime::cpu {

/// How to plan the tiny model.
struct tiny_plan_options {
    schedule::schedule_name schedule = schedule::schedule_name::one_f_one_b;
    std::size_t devices = 2;  ///< pipeline devices per replica (S)
    std::size_t chunks = 2;   ///< virtual stages per device for interleaved (the V schedules: always 2)
    std::uint64_t iteration = 0;
    /// dualpipe-v: the price of an overlapped forward/backward (schedule::named_schedule_options).
    double overlap_factor = 1.0;
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

/// The bridge's options for the tiny model: messages of hidden-size doubles.
[[nodiscard]] inline bridge::scenario_options tiny_scenario_options(const model_config& c) {
    bridge::scenario_options so;
    so.hidden_size = static_cast<int>(c.hidden);
    so.bytes_per_value = sizeof(double);
    return so;
}

/// The scenario of one replica's micro-batches `mbs` (sample ids into `lengths_tokens`) on the
/// pipeline `o` (devices, chunks), priced by tiny_cost_model through the bridge.
[[nodiscard]] inline schedule::scenario tiny_scenario(const model_config& c, const std::vector<std::vector<std::uint32_t>>& mbs,
                                                      const std::vector<std::size_t>& lengths_tokens,
                                                      const tiny_split_options& o) {
    std::vector<batching::sample> batch;  // the lengths are final: decoder-only samples of that length
    for (const std::size_t l : lengths_tokens) batch.push_back({static_cast<int>(l), 0});
    std::vector<std::vector<int>> ids;
    for (const auto& m : mbs) {
        if (m.empty()) throw invalid_argument("tiny model plan: an empty micro-batch");
        auto& row = ids.emplace_back();
        for (const std::uint32_t id : m) {
            if (id >= lengths_tokens.size())
                throw invalid_argument("tiny model plan: sample " + std::to_string(id) + " beyond the batch of " +
                                       std::to_string(lengths_tokens.size()));
            row.push_back(static_cast<int>(id));
        }
    }
    const tiny_cost_model model{c};
    const batching::pipeline_config cfg = tiny_pipeline(c, o);
    const batching::split_context<tiny_cost_model> ctx(model, batch, cfg, tiny_split_rules(o));
    return bridge::make_scenario_from_split(model, ctx.assemble_first_fitting("given", std::move(ids)), cfg,
                                            tiny_scenario_options(c));
}

/// The execution plan of one iteration of the tiny model for a given split: every replica's
/// micro-batches scheduled with o.schedule, lowered, joined (rank = replica · devices + device)
/// and validated (throws plan::plan_error listing violations).
[[nodiscard]] inline plan::execution_plan plan_tiny(const model_config& c, const replica_split& split,
                                                    const std::vector<std::size_t>& lengths_tokens,
                                                    const tiny_plan_options& o) {
    if (split.empty()) throw invalid_argument("tiny model plan: no replica");
    const schedule::schedule_traits& kind = schedule::traits_of(o.schedule);
    // A V schedule runs on one chunk per device that prepare_scenario() splits into the V's two.
    const bool v = schedule::places_v(kind);
    tiny_split_options to;
    to.devices = o.devices;
    to.chunks = kind.chunks == schedule::chunk_rule::splits_into_chunks && !v ? o.chunks : 1;
    schedule::named_schedule_options so;
    so.chunks = v ? 0 : to.chunks;
    so.overlap_factor = o.overlap_factor;
    so.quick = true;
    std::vector<schedule::scenario> scs;
    std::vector<schedule::pipeline_schedule> scheds;
    scs.reserve(split.size());  // stable addresses for the parts below
    scheds.reserve(split.size());
    std::vector<plan::replica_schedule> parts(split.size());
    for (std::size_t k = 0; k < split.size(); ++k) {
        scs.push_back(schedule::prepare_scenario(kind, tiny_scenario(c, split[k], lengths_tokens, to), so));
        scheds.push_back(schedule::make_generator(kind, so)(scs.back()));
        parts[k].sc = &scs.back();
        parts[k].sched = &scheds.back();
        for (const auto& ids : split[k])
            parts[k].microbatches.push_back({0, ids, {static_cast<std::uint32_t>(ids.size()),
                                                      static_cast<std::uint32_t>(padded_length(ids, lengths_tokens)), 0,
                                                      static_cast<std::uint32_t>(c.hidden)},
                                                  {}});
    }
    plan::join_options jo;
    jo.type = plan::dtype::fp64;  // the tiny model's activations and gradients are double
    jo.iteration = o.iteration;
    jo.sends = o.sends;
    plan::execution_plan out = plan::join_replicas(parts, jo);
    plan::validate_or_throw(out);
    return out;
}

/// The library's planner for the tiny model (see the file comment): splits a batch with the
/// exact split, or plans fixed micro-batches of `mbs` samples, and schedules with one named
/// schedule. Holds one planner per planning thread, kept across iterations; safe to call from
/// many threads.
class tiny_planner {
public:
    /// `o` gives the pipeline (devices, chunks, dp), the truncation and `mbs`; `schedule` the
    /// schedule every plan uses.
    tiny_planner(const model_config& c, const tiny_split_options& o, const schedule::schedule_id& schedule)
        : model_(c), cost_{c}, split_(o), planners_(cost_, options_for(c, o, schedule)) {}

    /// The plan of iteration `iteration` of `batch`.
    [[nodiscard]] plan::execution_plan plan(std::span<const batching::sample> batch, std::uint64_t iteration) {
        if (split_.mbs == 0) return planners_.plan(batch, iteration).plan;
        return planners_.plan_microbatches(batch, tiny_fixed_split(model_, batch, split_).microbatches, iteration).plan;
    }

    [[nodiscard]] const model_config& model() const noexcept { return model_; }
    [[nodiscard]] const tiny_split_options& split_options() const noexcept { return split_; }

private:
    static plan::planner_options options_for(const model_config& c, const tiny_split_options& o,
                                                 const schedule::schedule_id& schedule) {
        plan::planner_options po;
        po.config = tiny_pipeline(c, o);
        po.split = tiny_split_rules(o);
        po.hidden_size = static_cast<int>(c.hidden);
        po.type = plan::dtype::fp64;  // the tiny model's activations and gradients are double
        po.schedule = schedule;
        return po;
    }

    model_config model_;
    tiny_cost_model cost_;
    tiny_split_options split_;
    plan::planner_pool<tiny_cost_model> planners_;
};

/// The rank plans of an execution plan (what each rank loads).
[[nodiscard]] inline std::vector<plan::rank_plan> rank_plans(const plan::execution_plan& p) {
    std::vector<plan::rank_plan> out;
    for (std::size_t r = 0; r < p.programs.size(); ++r) out.push_back(plan::share_of(p, r));
    return out;
}

}  // namespace pipeplan::runtime::cpu
