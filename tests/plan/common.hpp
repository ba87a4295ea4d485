// Shared fixtures of the plan tier's tests: small scenarios, every built-in schedule, small
// lowered plans, hand-made instructions and the message moves of the deadlock tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/batching/sample.hpp"
#include "pipeplan/core/random.hpp"
#include "pipeplan/plan/lower.hpp"
#include "pipeplan/schedule/registry.hpp"
#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::test {

/// A seeded batch of about `tokens` tokens: mostly short samples, one in eight with up to 2000
/// input tokens, targets up to 120 tokens (the planner tests' synthetic batch).
inline std::vector<batching::sample> mixed_length_batch(long long tokens, std::uint64_t seed) {
    splitmix64 rng(seed);
    std::vector<batching::sample> b;
    long long n = 0;
    while (n < tokens) {
        batching::sample s;
        s.input_tokens = 16 + static_cast<int>(rng.below(rng.below(8) == 0 ? 2000 : 400));
        s.target_tokens = 1 + static_cast<int>(rng.below(120));
        n += s.input_tokens + s.target_tokens;
        b.push_back(s);
    }
    return b;
}

/// A seeded scenario with `stages` stages and `mbs` micro-batches of random sizes (costs
/// proportional to a size in [1, 4]), activation messages and transient memory.
inline schedule::scenario random_scenario(std::size_t stages, std::size_t mbs, std::uint64_t seed) {
    splitmix64 rng(seed);
    std::vector<double> mult;
    for (std::size_t j = 0; j < mbs; ++j) mult.push_back(1.0 + static_cast<double>(rng.below(300)) / 100.0);
    std::vector<double> base;
    for (std::size_t s = 0; s < stages; ++s) base.push_back(1.0 + static_cast<double>(rng.below(50)) / 100.0);
    schedule::scenario sc = schedule::scaled_scenario(base, mult, 2.0, 100.0, 10.0, 12.0);
    sc.activation_mb.clear();
    for (double m : mult) sc.activation_mb.push_back(0.5 * m);
    return sc;
}

struct named_case {
    std::string name;
    schedule::pipeline_schedule sched;
    schedule::scenario sc;  // the scenario the schedule runs on (chunked for interleaved)
};

/// Every built-in schedule on `sc` (interleaved with 2 chunks, the V schedules on each stage
/// split into two chunks placed as a V) whose preconditions it meets; dualpipe-v with an
/// overlap factor of 0.5 (so that its plans hold overlapped pairs).
inline std::vector<named_case> all_schedules(const schedule::scenario& sc) {
    std::vector<named_case> out;
    for (auto n : {schedule::schedule_name::gpipe, schedule::schedule_name::one_f_one_b,
                   schedule::schedule_name::interleaved, schedule::schedule_name::adaptive,
                   schedule::schedule_name::zb_h1, schedule::schedule_name::merak_early,
                   schedule::schedule_name::merak_last, schedule::schedule_name::merak_critical,
                   schedule::schedule_name::zb_v, schedule::schedule_name::v_half, schedule::schedule_name::v_min,
                   schedule::schedule_name::dualpipe_v}) {
        schedule::named_schedule_options o;  // fresh per schedule: prepare_scenario() completes it
        o.chunks = n == schedule::schedule_name::interleaved ? 2 : 0;
        o.quick = true;
        o.overlap_factor = 0.5;
        schedule::scenario s = schedule::prepare_scenario(n, sc, o);
        auto g = schedule::make_generator(n, o);
        try {
            out.push_back({std::string(schedule::to_string(n)), g(s), s});
        } catch (const invalid_argument&) {
            // a schedule with a precondition the scenario misses (e.g. Merak's M >= 4)
        }
    }
    return out;
}


/// A 1F1B plan of a seeded scenario with `stages` stages and `mbs` micro-batches.
inline plan::execution_plan one_f_one_b_plan(std::size_t stages, std::size_t mbs) {
    const auto sc = random_scenario(stages, mbs, 5);
    return plan::lower(sc, schedule::one_f_one_b{}(sc));
}

/// The plan of `c` with shapes, an iteration, predictions and sample ids set (every header
/// field away from its default, for round trips).
inline plan::execution_plan sample_plan(const named_case& c) {
    plan::lowering_options o;
    o.shapes.assign(c.sc.microbatches, plan::tensor_shape{2, 512, 0, 4096});
    plan::execution_plan p = plan::lower(c.sc, c.sched, o);
    p.header.iteration = 42;
    p.header.predicted_makespan_ms = 1.0 / 3.0;
    p.header.predicted_peak_memory_mb.assign(p.programs.size(), 1234.5678901234567);
    for (std::size_t j = 0; j < p.header.microbatches.size(); ++j)
        p.header.microbatches[j].sample_ids = {std::uint32_t(2 * j), std::uint32_t(2 * j + 1)};
    return p;
}

/// A hand-made instruction: `kind` with `peer` on (micro-batch, stage); no slots, no bytes.
inline plan::instruction instr(plan::instr_kind kind, std::int32_t peer = plan::no_peer, std::uint32_t microbatch = 0,
                               std::uint32_t stage = 0) {
    plan::instruction x;
    x.kind = kind;
    x.peer = peer;
    x.microbatch = microbatch;
    x.stage = stage;
    return x;
}

/// The index of the wait of the message start at `s` in `ins` (ins.size() when none follows).
inline std::size_t wait_of_start(const std::vector<plan::instruction>& ins, std::size_t s) {
    std::size_t w = s + 1;
    while (w < ins.size() && !(ins[w].kind == plan::wait_of(ins[s].kind) && ins[w].microbatch == ins[s].microbatch &&
                               ins[w].stage == ins[s].stage))
        ++w;
    return w;
}

/// Moves a random receive (start and wait) of a random rank of `p` to a random earlier place,
/// the wait right after the start; false when the draw is not a receive that can move.
inline bool move_receive_earlier(plan::execution_plan& p, splitmix64& rng) {
    auto& ins = p.programs[rng.below(p.programs.size())].instructions;
    const std::size_t s = rng.below(ins.size());
    if (plan::category(ins[s].kind) != plan::kind_category::recv_start || s == 0) return false;
    const std::size_t w = wait_of_start(ins, s);
    if (w == ins.size()) return false;
    const std::size_t to = rng.below(s);
    const plan::instruction xs = ins[s], xw = ins[w];
    ins.erase(ins.begin() + static_cast<std::ptrdiff_t>(w));
    ins.erase(ins.begin() + static_cast<std::ptrdiff_t>(s));
    ins.insert(ins.begin() + static_cast<std::ptrdiff_t>(to), xw);
    ins.insert(ins.begin() + static_cast<std::ptrdiff_t>(to), xs);
    return true;
}


}  // namespace pipeplan::test
