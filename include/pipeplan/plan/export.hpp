// pipeplan/plan/export.hpp — plans in other tools' formats: torch.distributed.pipelining's
// schedule CSV, and a Chrome / Perfetto trace with flow arrows for messages.
//
// Torch CSV (docs/formats.md): one row per pipeline rank of one data-parallel replica, the
// rank's actions comma-separated in PyTorch's `_Action` text form `<stage><type><mb>`
// (torch/distributed/pipelining/schedules.py, `_Action.from_str`; micro-batch numbers are the
// replica's own, 0-based). Compute-only form: `F` per forward (a checkpointed forward and its
// recompute fold into it), `B` per whole backward, `I` + `W` for a split one. With
// communication: also `<s>SEND_F<mb>` on the sender (s = the sending stage), `<s+1>RECV_F<mb>`
// on the receiver, `<s>SEND_B<mb>` / `<s-1>RECV_B<mb>` for gradients, at the position of the
// message's start (PyTorch's runtime waits itself), and `<s>REDUCE_GRAD` for each stage of
// the rank where reduce_gradients is. An overlap_f_b and its two parts are one action in
// PyTorch's sub-action form `(<forward>;<backward>)OVERLAP_F_B`, e.g. `(0F3;5B2)OVERLAP_F_B`
// (`I` for an input-only backward part), at the overlap_f_b's position.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/plan/messages.hpp"
#include "pipeplan/plan/plan.hpp"
#include "pipeplan/schedule/simulator.hpp"
#include "pipeplan/schedule/trace.hpp"

namespace pipeplan::plan {

/// Micro-batch numbers local to each replica (PyTorch numbers a schedule's micro-batches 0..n-1).
[[nodiscard]] inline std::vector<std::uint32_t> local_microbatch_numbers(const plan_header& h) {
    std::vector<std::uint32_t> local(h.microbatches.size()), next(h.dp, 0);
    for (std::size_t j = 0; j < h.microbatches.size(); ++j) {
        const auto rep = h.microbatches[j].replica;
        local[j] = rep < next.size() ? next[rep]++ : 0;
    }
    return local;
}

/// One instruction as PyTorch actions (none for instructions PyTorch has no action for).
[[nodiscard]] inline std::vector<std::string> torch_actions(const instruction& x, std::uint32_t local_mb, bool comms,
                                                            const std::vector<std::uint32_t>& stages_of_rank) {
    const std::string mb = std::to_string(local_mb);
    const auto s = [](std::uint32_t v) { return std::to_string(v); };
    switch (x.kind) {
        case instr_kind::forward: return {s(x.stage) + "F" + mb};
        case instr_kind::backward:
            return {s(x.stage) + (x.mode == static_cast<std::uint8_t>(backward_mode::input_only) ? "I" : "B") + mb};
        case instr_kind::backward_weight: return {s(x.stage) + "W" + mb};
        default: break;
    }
    if (!comms) return {};
    switch (x.kind) {
        case instr_kind::send_activation_start: return {s(x.stage) + "SEND_F" + mb};
        case instr_kind::recv_activation_start: return {s(x.stage + 1) + "RECV_F" + mb};
        case instr_kind::send_grad_start: return {s(x.stage) + "SEND_B" + mb};
        case instr_kind::recv_grad_start: return {s(x.stage - 1) + "RECV_B" + mb};
        case instr_kind::reduce_gradients: {
            std::vector<std::string> out;
            for (auto v : stages_of_rank) out.push_back(s(v) + "REDUCE_GRAD");
            return out;
        }
        default: return {};
    }
}

/// PyTorch's `(<forward>;<backward>)OVERLAP_F_B` for the overlap_f_b at `i` of `ins` (a valid
/// plan: validate.hpp's overlap rule); marks its two parts in `folded`.
[[nodiscard]] inline std::string overlap_action(const std::vector<instruction>& ins, std::size_t i,
                                                const std::vector<std::uint32_t>& local, std::vector<char>& folded) {
    std::string parts;
    std::size_t found = 0;
    for (std::size_t j = i + 1; j < ins.size() && found < 2; ++j) {
        if (!is_compute(ins[j].kind)) continue;
        const std::uint32_t mb = ins[j].microbatch < local.size() ? local[ins[j].microbatch] : ins[j].microbatch;
        const std::vector<std::string> a = torch_actions(ins[j], mb, false, {});
        if (a.empty()) break;  // a recompute: not a part
        parts += (found == 0 ? "" : ";") + a.front();
        folded[j] = 1;
        ++found;
    }
    if (found != 2) throw invalid_argument("to_torch_csv: an overlap_f_b without its two compute parts");
    return "(" + parts + ")OVERLAP_F_B";
}

/// The torch.distributed.pipelining CSV of replica `replica` (see the file comment); with
/// dp > 1 write one file per replica (replica_file_name).
[[nodiscard]] inline std::string to_torch_csv(const execution_plan& p, bool with_comms, std::uint32_t replica = 0) {
    const plan_header& h = p.header;
    if (replica >= h.dp || p.programs.size() != h.ranks())
        throw invalid_argument("to_torch_csv: replica " + std::to_string(replica) + " out of range or plan incomplete");
    const auto local = local_microbatch_numbers(h);
    std::string out;
    for (std::uint32_t d = 0; d < h.devices; ++d) {
        const rank_program& prog = p.programs[replica * h.devices + d];
        std::vector<std::uint32_t> stages;
        for (std::uint32_t v = 0; v < h.virtual_stages(); ++v)
            if (h.device_of_stage(v) == d) stages.push_back(v);
        bool first = true;
        auto emit = [&](const std::string& a) {
            if (!first) out += ',';
            out += a;
            first = false;
        };
        const auto& ins = prog.instructions;
        std::vector<char> folded(ins.size(), 0);  // the parts of an overlap_f_b, written with it
        for (std::size_t i = 0; i < ins.size(); ++i) {
            const instruction& x = ins[i];
            if (folded[i]) continue;
            const std::uint32_t mb = x.microbatch < local.size() ? local[x.microbatch] : x.microbatch;
            if (x.kind == instr_kind::overlap_f_b) {
                emit(overlap_action(ins, i, local, folded));
                continue;
            }
            for (const std::string& a : torch_actions(x, mb, with_comms, stages)) emit(a);
        }
        out += '\n';
    }
    return out;
}

/// The file of replica `replica`'s torch CSV when a plan has `dp` replicas: `path` itself when
/// dp = 1, else `<stem>_r<replica><extension>` beside it (plan.csv → plan_r0.csv, plan_r1.csv):
/// PyTorch loads one schedule per pipeline, and each replica runs its own micro-batches.
[[nodiscard]] inline std::string replica_file_name(const std::string& path, std::uint32_t replica, std::uint32_t dp) {
    if (dp <= 1) return path;
    const std::size_t slash = path.find_last_of('/');
    const std::size_t dot = path.find_last_of('.');
    const std::size_t name = slash == std::string::npos ? 0 : slash + 1;
    const bool has_ext = dot != std::string::npos && dot > name;  // a leading dot is not an extension
    const std::string stem = has_ext ? path.substr(0, dot) : path;
    const std::string ext = has_ext ? path.substr(dot) : std::string();
    return stem + "_r" + std::to_string(replica) + ext;
}

namespace detail {

struct trace_span {
    double start_ms, end_ms;
};

inline void write_message_flows(std::ostream& out, const execution_plan& p, std::uint32_t replica,
                                const std::vector<std::vector<trace_span>>& when, std::uint64_t& id);

/// The trace events of one replica (pid = replica): its ranks' compute spans and the flow
/// arrows of its messages; `id` numbers the flows across replicas.
inline void write_replica_trace(std::ostream& out, const execution_plan& p, std::uint32_t replica,
                                const schedule::simulation_result& sim, std::uint64_t& id) {
    const auto num = schedule::trace_number;
    const plan_header& h = p.header;
    if (sim.timeline.size() != h.devices) throw invalid_argument("write_plan_trace: the simulation has another device count");
    const std::uint32_t base = replica * h.devices;
    out << (replica == 0 ? "" : ",\n") << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << replica << ",\"args\":{\"name\":\"replica " << replica
        << " (plan " << schedule::trace_escape(h.schedule) << ")\"}}";
    out << ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << replica << ",\"args\":{\"sort_index\":" << replica << "}}";
    std::vector<std::vector<trace_span>> when(h.devices);  // per device of the replica, per instruction
    for (std::uint32_t d = 0; d < h.devices; ++d) {
        const std::uint32_t r = base + d;
        out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << replica << ",\"tid\":" << r
            << ",\"args\":{\"name\":\"rank " << r << "\"}}";
        const auto& prog = p.programs[r].instructions;
        when[d].assign(prog.size(), {0.0, 0.0});
        std::size_t k = 0;
        double last_end = 0.0;
        std::uint64_t clock_mhz = 0;
        bool clock_changed = false;
        for (std::size_t i = 0; i < prog.size(); ++i) {
            const instruction& x = prog[i];
            if (x.kind == instr_kind::set_frequency) {
                clock_mhz = frequency_mhz(x);
                clock_changed = true;
            }
            if (!is_compute(x.kind)) {
                when[d][i] = {last_end, last_end};
                continue;
            }
            if (k >= sim.timeline[d].size()) throw invalid_argument("write_plan_trace: the simulation does not match the plan");
            const auto& t = sim.timeline[d][k++];
            when[d][i] = {t.start_ms, t.end_ms};
            last_end = t.end_ms;
            if (clock_changed)
                out << ",\n{\"name\":\"clock_mhz\",\"ph\":\"C\",\"pid\":" << replica << ",\"tid\":" << r << ",\"ts\":" << num(t.start_ms * 1000.0)
                    << ",\"args\":{\"rank " << r << "\":" << clock_mhz << "}}";
            clock_changed = false;
            const char* letter = x.kind == instr_kind::forward ? (x.mode ? "f" : "F")
                                 : x.kind == instr_kind::recompute ? "R"
                                 : x.kind == instr_kind::backward ? "B" : "W";
            out << ",\n{\"name\":\"" << letter << x.microbatch << " s" << x.stage << "\",\"cat\":\"" << kind_name(x.kind)
                << "\",\"ph\":\"X\",\"pid\":" << replica << ",\"tid\":" << r << ",\"ts\":" << num(t.start_ms * 1000.0)
                << ",\"dur\":" << num((t.end_ms - t.start_ms) * 1000.0) << ",\"args\":{\"mb\":" << x.microbatch
                << ",\"stage\":" << x.stage << ",\"instruction\":" << i;
            if (clock_mhz > 0) out << ",\"frequency_mhz\":" << clock_mhz;
            out << "}}";
        }
    }
    write_message_flows(out, p, replica, when, id);
}

/// The flow arrows of one replica's messages: a send start's producer (the compute op before
/// it) -> the consumer after the receive's wait (the message paired by messages.hpp).
inline void write_message_flows(std::ostream& out, const execution_plan& p, std::uint32_t replica,
                                const std::vector<std::vector<trace_span>>& when, std::uint64_t& id) {
    const auto num = schedule::trace_number;
    const plan_header& h = p.header;
    const std::uint32_t base = replica * h.devices;
    const message_sequence seq = pair_sequence(p);
    std::vector<std::vector<std::uint32_t>> wait_of_start(h.devices);  // [device][start] its wait
    for (std::uint32_t d = 0; d < h.devices; ++d) {
        const auto& prog = p.programs[base + d].instructions;
        wait_of_start[d].assign(prog.size(), no_instruction);
        const wait_pairing w = start_of_wait(p.header, p.programs[base + d]);
        for (std::uint32_t i = 0; i < prog.size(); ++i)
            if (w.start_of[i] != no_instruction) wait_of_start[d][w.start_of[i]] = i;
    }
    for (std::uint32_t d = 0; d < h.devices; ++d) {
        const auto& prog = p.programs[base + d].instructions;
        for (std::size_t i = 0; i < prog.size(); ++i) {
            const instruction& x = prog[i];
            if (category(x.kind) != kind_category::send_start || x.peer < 0) continue;
            const message_end there = counterpart(p, seq, base + d, i);
            if (!there.found() || there.rank < base || there.rank >= base + h.devices) continue;
            const std::uint32_t peer = there.rank;
            std::size_t prod = i;
            while (prod > 0 && !is_compute(prog[prod].kind)) --prod;
            const auto& other = p.programs[peer].instructions;
            const std::uint32_t w = wait_of_start[peer - base][there.index];
            if (w == no_instruction) continue;
            std::size_t cons = w;
            while (cons < other.size() && !is_compute(other[cons].kind)) ++cons;
            if (cons >= other.size()) continue;
            const trace_span sp = when[d][prod], sc = when[peer - base][cons];
            const std::string name = is_activation_message(x.kind) ? "activation" : "gradient";
            out << ",\n{\"name\":\"" << name << "\",\"cat\":\"message\",\"ph\":\"s\",\"id\":" << id << ",\"pid\":" << replica
                << ",\"tid\":" << base + d << ",\"ts\":" << num((sp.start_ms + sp.end_ms) * 500.0) << "}";
            out << ",\n{\"name\":\"" << name << "\",\"cat\":\"message\",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << id++
                << ",\"pid\":" << replica << ",\"tid\":" << peer << ",\"ts\":" << num((sc.start_ms + sc.end_ms) * 500.0) << "}";
        }
    }
}

}  // namespace detail

/// Writes a Chrome / Perfetto trace of the plan with the compute times of `sims[k]`, the
/// simulation of replica k's schedule (timeline recorded): one process per data-parallel
/// replica ("replica k"), one track per rank ("rank r", r = k · devices + device), a complete
/// event per compute instruction (named like "F3 s1", args mb, stage, instruction index, and
/// frequency_mhz once a set_frequency set the rank's clock), a counter track "clock_mhz" per
/// rank stepping at each set_frequency, and a flow arrow per message from the end of its
/// producing op to the start of its consumer. Needs one simulation per replica. (The torch CSV
/// has no clock action: it skips set_frequency.)
inline void write_plan_trace(std::ostream& out, const execution_plan& p, std::span<const schedule::simulation_result> sims) {
    const plan_header& h = p.header;
    if (sims.size() != h.dp || p.programs.size() != h.ranks())
        throw invalid_argument("write_plan_trace: " + std::to_string(sims.size()) + " simulations for " +
                               std::to_string(h.dp) + " replicas, or the plan is incomplete");
    out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
    std::uint64_t id = 0;
    for (std::uint32_t k = 0; k < h.dp; ++k) detail::write_replica_trace(out, p, k, sims[k], id);
    out << "\n]}\n";
}

/// One replica's plan (dp = 1): write_plan_trace with its one simulation.
inline void write_plan_trace(std::ostream& out, const execution_plan& p, const schedule::simulation_result& sim) {
    write_plan_trace(out, p, std::span<const schedule::simulation_result>(&sim, 1));
}

}  // namespace pipeplan::plan
