// A reference execution of a plan for the tests: runs every rank's program with blocking
// waits and symbolic values, the way an executor following plan/instruction.hpp would, and
// reports the weight gradients each rank reduced. Independent of plan/validate.hpp: the
// mutation test uses it as the oracle of what an edit broke.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "pipeplan/plan/plan.hpp"

namespace pipeplan::test {

struct run_outcome {
    bool finished = false;  ///< every program ran to its end (no deadlock, no fault)
    std::string fault;      ///< why not
    /// per rank: (mb, stage) -> weight gradient value, as reduced
    std::vector<std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t>> grads;
    std::vector<int> steps;  ///< optimizer steps after the reduce, per rank
    friend bool operator==(const run_outcome& a, const run_outcome& b) {
        return a.finished == b.finished && a.grads == b.grads && a.steps == b.steps;
    }
};

namespace detail {

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
    std::uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
inline constexpr std::uint64_t garbage = 0xBADBADBADull;

struct slot_state {
    bool valid = false;
    std::uint64_t value = garbage;
    std::uint64_t version = 0;
};

struct msg {
    std::uint64_t value;
    std::uint64_t bytes;
    std::uint32_t slot;
    std::uint64_t version;
};

}  // namespace detail

/// Runs the plan (see the file comment). Never throws; faults end the run.
inline run_outcome reference_run(const plan::execution_plan& p) {
    using namespace plan;
    using detail::mix;
    run_outcome out;
    const std::size_t R = p.programs.size();
    if (R != p.header.ranks() || R == 0) return out.fault = "rank count", out;
    std::vector<std::vector<detail::slot_state>> mem(R);
    for (std::size_t r = 0; r < R; ++r) mem[r].resize(p.programs[r].buffers.size());
    // channels a->b: sent messages (FIFO), and per rank the count of posted receives / sends
    std::map<std::pair<std::size_t, std::size_t>, std::vector<detail::msg>> chan;
    std::map<std::pair<std::size_t, std::size_t>, std::size_t> recvs_posted;
    std::vector<std::map<std::tuple<int, std::uint32_t, std::uint32_t, int>, std::size_t>> open(R);  // start -> channel index
    std::vector<std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t>> grads(R), pending_w(R);
    std::vector<std::map<std::pair<std::uint32_t, std::uint32_t>, bool>> ckpt(R), recomputed(R);
    std::vector<std::map<std::uint32_t, bool>> loaded(R);
    std::vector<std::size_t> pos(R, 0);
    std::vector<char> at_reduce(R, 0);
    out.grads.resize(R);
    out.steps.assign(R, 0);
    std::vector<char> reduced(R, 0);
    auto fault = [&](std::size_t r, const std::string& why) {
        out.fault = "rank " + std::to_string(r) + " at " + std::to_string(pos[r]) + ": " + why;
        return out;
    };
    const auto read = [&](std::size_t r, std::uint32_t s) -> std::uint64_t {
        if (s == no_slot || s >= mem[r].size() || !mem[r][s].valid) return detail::garbage;
        return mem[r][s].value;
    };
    const auto write = [&](std::size_t r, std::uint32_t s, std::uint64_t v) {
        if (s == no_slot || s >= mem[r].size()) return;
        const auto& bs = p.programs[r].buffers;
        for (std::size_t q = 0; q < bs.size(); ++q)  // overlapping buffers are clobbered
            if (q != s && bs[q].size_bytes > 0 && bs[s].size_bytes > 0 && bs[q].offset_bytes < bs[s].offset_bytes + bs[s].size_bytes &&
                bs[s].offset_bytes < bs[q].offset_bytes + bs[q].size_bytes) {
                mem[r][q].valid = false;
                ++mem[r][q].version;
            }
        mem[r][s] = {true, v, mem[r][s].version + 1};
    };
    const std::uint32_t V = p.header.virtual_stages();
    bool progress = true;
    std::size_t done = 0;
    while (done < R && progress) {
        progress = false;
        for (std::size_t r = 0; r < R; ++r) {
            const auto& prog = p.programs[r].instructions;
            const auto& bufs = p.programs[r].buffers;
            while (pos[r] < prog.size()) {
                const instruction& x = prog[pos[r]];
                const auto unit = std::make_pair(x.microbatch, x.stage);
                const bool act = is_activation_message(x.kind);
                const auto okey = std::make_tuple(int(static_cast<std::uint8_t>(x.kind) & ~1u), x.microbatch, x.stage, x.peer);
                if (is_message(x.kind) && (x.peer < 0 || std::size_t(x.peer) >= R || std::size_t(x.peer) == r))
                    return fault(r, "bad peer");
                const std::size_t peer = std::size_t(x.peer);
                bool blocked = false;
                switch (x.kind) {
                    case instr_kind::load_microbatch: loaded[r][x.microbatch] = true; break;
                    case instr_kind::forward: {
                        std::uint64_t in = x.stage == 0 ? (loaded[r][x.microbatch] ? mix(x.microbatch, 77) : detail::garbage) : read(r, x.in);
                        if (x.stage + 1 == V && !loaded[r][x.microbatch]) in = detail::garbage;  // labels
                        write(r, x.out, mix(in, 1000 + x.stage));
                        ckpt[r][unit] = x.mode == 1;
                        if (x.mode == 0) write(r, x.stash, mix(in, 2000 + x.stage));
                        break;
                    }
                    case instr_kind::recompute: {
                        const std::uint64_t in = x.stage == 0 ? (loaded[r][x.microbatch] ? mix(x.microbatch, 77) : detail::garbage) : read(r, x.in);
                        write(r, x.stash, mix(in, 2000 + x.stage));
                        recomputed[r][unit] = true;
                        break;
                    }
                    case instr_kind::backward:
                    case instr_kind::backward_weight: {
                        std::uint64_t stash = read(r, x.stash);
                        if (ckpt[r][unit] && !recomputed[r][unit]) {  // inline recompute from the checkpoint
                            const std::uint64_t in = x.stage == 0 ? (loaded[r][x.microbatch] ? mix(x.microbatch, 77) : detail::garbage) : stash;
                            stash = mix(in, 2000 + x.stage);
                        }
                        if (x.kind == instr_kind::backward) {
                            const std::uint64_t g = x.stage + 1 == V ? mix(stash, 3) : read(r, x.in);
                            write(r, x.out, mix(mix(g, stash), 4000 + x.stage));
                            if (x.mode == 0) grads[r][unit] += mix(g, stash);
                            else pending_w[r][unit] = g;
                        } else {
                            auto it = pending_w[r].find(unit);
                            grads[r][unit] += mix(it == pending_w[r].end() ? detail::garbage : it->second, stash);
                        }
                        break;
                    }
                    case instr_kind::send_activation_start:
                    case instr_kind::send_grad_start: {
                        auto& c = chan[{r, peer}];
                        const std::uint32_t s = x.in;
                        const std::uint64_t v = read(r, s);
                        open[r][okey] = c.size();
                        c.push_back({mix(v, act ? 11 : 13), x.bytes, s, s < mem[r].size() ? mem[r][s].version : 0});
                        break;
                    }
                    case instr_kind::send_activation_wait:
                    case instr_kind::send_grad_wait: {
                        auto it = open[r].find(okey);
                        if (it == open[r].end()) return fault(r, "wait without start");
                        if (recvs_posted[{r, peer}] <= it->second) { blocked = true; break; }
                        const auto& m = chan[{r, peer}][it->second];
                        if (m.slot >= mem[r].size() || !mem[r][m.slot].valid || mem[r][m.slot].version != m.version)
                            return fault(r, "send buffer changed before the send completed");
                        open[r].erase(it);
                        break;
                    }
                    case instr_kind::recv_activation_start:
                    case instr_kind::recv_grad_start:
                        open[r][okey] = recvs_posted[{peer, r}]++;
                        if (x.out < mem[r].size()) { mem[r][x.out].valid = false; ++mem[r][x.out].version; }
                        break;
                    case instr_kind::recv_activation_wait:
                    case instr_kind::recv_grad_wait: {
                        auto it = open[r].find(okey);
                        if (it == open[r].end()) return fault(r, "wait without start");
                        const auto& c = chan[{peer, r}];
                        if (c.size() <= it->second) { blocked = true; break; }
                        const auto& m = c[it->second];
                        if (x.out >= bufs.size() || m.bytes != x.bytes) return fault(r, "receive size mismatch");
                        write(r, x.out, m.value);
                        open[r].erase(it);
                        break;
                    }
                    case instr_kind::free:
                        if (x.in < mem[r].size()) { mem[r][x.in].valid = false; ++mem[r][x.in].version; }
                        break;
                    case instr_kind::reduce_gradients: {
                        at_reduce[r] = 1;
                        for (std::size_t q = p.header.device_of_rank(std::uint32_t(r)); q < R; q += p.header.devices)
                            if (!at_reduce[q]) blocked = true;
                        if (!blocked) {
                            if (reduced[r]) return fault(r, "reduced twice");
                            reduced[r] = 1;
                            out.grads[r] = grads[r];
                        }
                        break;
                    }
                    case instr_kind::optimizer_step:
                        if (reduced[r]) ++out.steps[r];
                        break;
                    default: break;
                }
                if (blocked) break;
                ++pos[r];
                progress = true;
                if (pos[r] == prog.size()) ++done;
            }
        }
    }
    if (done < R) return fault(0, "deadlock");
    for (std::size_t r = 0; r < R; ++r)
        if (!open[r].empty()) return fault(r, "message left open");
    out.finished = true;
    return out;
}

}  // namespace pipeplan::test
