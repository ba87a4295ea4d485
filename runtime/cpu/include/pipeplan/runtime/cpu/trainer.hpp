// pipeplan/runtime/cpu/trainer.hpp — the CPU backend: the tiny model's handlers for one rank,
// and a cluster of ranks (one thread each) that trains iterations from execution plans.
//
// How the tiny model meets the plan:
//  - the micro-batch table gives each micro-batch's sample ids (indices into the iteration's
//    batch of sequence lengths) and its padded length (shape.seqlen); sample i's tokens are
//    seeded by i, so the reference (reference.hpp) sees the same batch;
//  - virtual stage v owns split_layers(blocks, V)[v] and runs on the device the plan's
//    placement gives it; activations and gradients cross stages through the rank's arena
//    buffers (and the transport between ranks), as hidden × tokens doubles (plans.hpp sizes
//    the plan's messages for them; a buffer too small for the doubles is an error);
//  - the stash of a forward lives in the handler (Eigen matrices), keyed by (micro-batch, stage);
//  - reduce_gradients all-reduces every owned gradient tensor over the data-parallel group;
//    optimizer_step applies SGD or Adam to the owned tensors;
//  - set_frequency has no clock to set on a CPU: its handler records the requested clock
//    (clocks_mhz(), one entry per set_frequency, in program order) so tests can check what a
//    GPU trainer's handler would have applied.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "pipeplan/runtime/cpu/reference.hpp"
#include "pipeplan/runtime/cpu/thread_transport.hpp"
#include "pipeplan/runtime/executor.hpp"

namespace pipeplan::runtime::cpu {

using optimizer = std::variant<sgd, adam>;

/// The loss tokens of a plan: the real tokens of every micro-batch of every replica.
[[nodiscard]] inline double plan_tokens(const plan::plan_header& h, const std::vector<std::size_t>& lengths_tokens) {
    double n = 0;
    for (const auto& m : h.microbatches)
        for (auto id : m.sample_ids) n += static_cast<double>(lengths_tokens.at(id));
    return n;
}

/// One rank of the CPU backend: its parameters, gradients, optimizer and the handlers that run
/// the tiny model's stages of this rank.
class rank_trainer {
public:
    rank_trainer(model_config c, model_params initial, optimizer opt)
        : c_(c), params_(std::move(initial)), grads_(zero_params(c_)), opt_(std::move(opt)) {}

    [[nodiscard]] const model_params& params() const noexcept { return params_; }
    [[nodiscard]] const model_params& grads() const noexcept { return grads_; }
    /// The loss of the micro-batches whose last stage ran here (this iteration).
    [[nodiscard]] double loss() const noexcept { return loss_; }
    /// The clocks (MHz) the plan's set_frequency instructions asked for this iteration, in order.
    [[nodiscard]] const std::vector<std::uint64_t>& clocks_mhz() const noexcept { return clocks_mhz_; }
    /// The virtual stages this rank owns (set by begin()).
    [[nodiscard]] const std::vector<stage_layout>& owned() const noexcept { return owned_; }

    /// Prepares an iteration of `p` on this rank over the batch `lengths_tokens`: zero
    /// gradients and loss, the stage modules of the rank's virtual stages.
    void begin(const plan::rank_plan& p, const std::vector<std::size_t>& lengths_tokens) {
        plan_ = &p;
        lengths_ = &lengths_tokens;
        tokens_ = plan_tokens(p.header, lengths_tokens);
        grads_ = zero_params(c_);
        loss_ = 0;
        clocks_mhz_.clear();
        data_.clear();
        caches_.clear();
        const auto layouts = split_layers(c_.blocks, p.header.virtual_stages());
        modules_.clear();
        owned_.clear();
        for (std::size_t v = 0; v < layouts.size(); ++v) {
            modules_.emplace_back(c_, params_, grads_, layouts[v]);
            if (p.header.device_of_stage(static_cast<std::uint32_t>(v)) == p.header.device_of_rank(p.program.rank))
                owned_.push_back(layouts[v]);
        }
    }

    /// The handlers of every kind the tiny model's plans use.
    [[nodiscard]] handler_registry handlers() {
        using plan::instr_kind;
        handler_registry h;
        h.on(instr_kind::load_microbatch, [this](const plan::instruction& in, step_context&) { (void)data(in.microbatch); });
        h.on(instr_kind::forward, [this](const plan::instruction& in, step_context& ctx) { forward(in, ctx); });
        h.on(instr_kind::recompute, [this](const plan::instruction& in, step_context&) {
            modules_.at(in.stage).recompute(data(in.microbatch), caches_[{in.microbatch, in.stage}], tokens_);
        });
        h.on(instr_kind::backward, [this](const plan::instruction& in, step_context& ctx) { backward(in, ctx); });
        h.on(instr_kind::backward_weight, [this](const plan::instruction& in, step_context&) {
            auto it = caches_.find({in.microbatch, in.stage});
            if (it == caches_.end()) throw error("backward_weight without a backward before it");
            modules_.at(in.stage).backward_weight(data(in.microbatch), it->second);
            caches_.erase(it);
        });
        h.on(instr_kind::reduce_gradients, [this](const plan::instruction&, step_context& ctx) {
            for (const auto& l : owned_)
                for_each_tensor(l, [&](auto& t) { ctx.all_reduce(std::span<double>(t.data(), static_cast<std::size_t>(t.size()))); }, grads_);
        });
        h.on(instr_kind::set_frequency,
             [this](const plan::instruction& in, step_context&) { clocks_mhz_.push_back(plan::frequency_mhz(in)); });
        h.on(instr_kind::optimizer_step, [this](const plan::instruction&, step_context&) {
            std::visit([&](auto& o) { o.step(params_, grads_, owned_); }, opt_);
        });
        return h;
    }

private:
    const microbatch_data& data(std::uint32_t mb) {
        auto it = data_.find(mb);
        if (it != data_.end()) return it->second;
        const auto& e = plan_->header.microbatches.at(mb);
        std::vector<std::uint64_t> ids;
        std::vector<std::size_t> lens;
        for (auto id : e.sample_ids) {
            ids.push_back(id);
            lens.push_back(lengths_->at(id));
        }
        return data_.emplace(mb, make_microbatch(c_, ids, lens, e.shape.seqlen)).first->second;
    }

    /// The hidden × tokens doubles in buffer `slot`.
    [[nodiscard]] matrix read(step_context& ctx, std::uint32_t slot, const microbatch_data& mb) const {
        const auto bytes = ctx.buffer(slot);
        matrix m(static_cast<Eigen::Index>(c_.hidden), static_cast<Eigen::Index>(mb.columns()));
        check_fits(bytes.size(), m.size(), slot);
        std::memcpy(m.data(), bytes.data(), static_cast<std::size_t>(m.size()) * sizeof(double));
        return m;
    }
    void write(step_context& ctx, std::uint32_t slot, const matrix& m) const {
        const auto bytes = ctx.buffer(slot);
        check_fits(bytes.size(), m.size(), slot);
        std::memcpy(bytes.data(), m.data(), static_cast<std::size_t>(m.size()) * sizeof(double));
    }
    static void check_fits(std::size_t bytes, Eigen::Index values, std::uint32_t slot) {
        if (slot == plan::no_slot) throw error("the instruction names no buffer where the tiny model needs one");
        if (bytes < static_cast<std::size_t>(values) * sizeof(double))
            throw error("buffer " + std::to_string(slot) + " has " + std::to_string(bytes) + " bytes, the tiny model needs " +
                        std::to_string(values * 8) + " (plan it with plans.hpp)");
    }

    void forward(const plan::instruction& in, step_context& ctx) {
        const auto& mb = data(in.microbatch);
        const auto& m = modules_.at(in.stage);
        const matrix x = m.layout().embedding ? matrix() : read(ctx, in.in, mb);
        auto [it, fresh] = caches_.try_emplace({in.microbatch, in.stage});
        if (!fresh) throw error("a second forward of this micro-batch on this stage");
        double loss = 0;
        const bool store = in.mode == static_cast<std::uint8_t>(plan::forward_mode::store);
        const matrix y = m.forward(mb, x, it->second, store, tokens_, loss);
        if (m.layout().head)
            loss_ += loss;
        else
            write(ctx, in.out, y);
    }

    void backward(const plan::instruction& in, step_context& ctx) {
        const auto& mb = data(in.microbatch);
        const auto& m = modules_.at(in.stage);
        auto it = caches_.find({in.microbatch, in.stage});
        if (it == caches_.end()) throw error("backward without a forward before it");
        const matrix dy = m.layout().head ? matrix() : read(ctx, in.in, mb);
        const bool whole = in.mode == static_cast<std::uint8_t>(plan::backward_mode::whole);
        const matrix dx = whole ? m.backward(mb, it->second, dy, tokens_) : m.backward_input(mb, it->second, dy, tokens_);
        if (whole) caches_.erase(it);
        if (!m.layout().embedding) write(ctx, in.out, dx);
    }

    model_config c_;
    model_params params_, grads_;
    optimizer opt_;
    const plan::rank_plan* plan_ = nullptr;
    const std::vector<std::size_t>* lengths_ = nullptr;
    double tokens_ = 1, loss_ = 0;
    std::vector<std::uint64_t> clocks_mhz_;
    std::vector<stage_module> modules_;  ///< every virtual stage's module (only owned ones run)
    std::vector<stage_layout> owned_;
    std::map<std::uint32_t, microbatch_data> data_;
    std::map<std::pair<std::uint32_t, std::uint32_t>, stage_cache> caches_;  ///< (mb, stage)
};

/// What one iteration of a cpu_cluster produced.
struct iteration_result {
    double loss = 0;              ///< summed over every rank
    model_params grads;           ///< assembled from replica 0's ranks (before the optimizer step)
    double replica_divergence = 0;///< largest relative gradient difference between replicas
};

/// Every rank of a job in one process, one thread per rank per iteration.
class cpu_cluster {
public:
    cpu_cluster(const model_config& c, std::size_t ranks, const optimizer& opt, executor_options o = {})
        : c_(c), o_(o) {
        const model_params init = init_params(c);
        for (std::size_t r = 0; r < ranks; ++r) trainers_.emplace_back(c, init, opt);
    }

    [[nodiscard]] const rank_trainer& rank(std::size_t r) const { return trainers_.at(r); }
    /// Fault injection: rank `r` fails just before its instruction `before` in every run.
    void inject_fault(std::size_t r, std::size_t before) {
        fault_rank_ = r;
        fault_before_ = before;
    }
    [[nodiscard]] std::size_t ranks() const noexcept { return trainers_.size(); }

    /// Runs one iteration: plans[r] on rank r, over the batch `lengths_tokens`. Throws the
    /// first rank's error (by rank order) when any rank failed; every rank's error is in `errors`.
    iteration_result run(const std::vector<plan::rank_plan>& plans, const std::vector<std::size_t>& lengths_tokens) {
        if (plans.size() != trainers_.size())
            throw invalid_argument("cpu_cluster: " + std::to_string(plans.size()) + " rank plans for " +
                                   std::to_string(trainers_.size()) + " ranks");
        errors.assign(trainers_.size(), {});
        // Every rank's plan is checked before any rank runs anything, and then the ranks
        // together: that they finish under the plan's send rule.
        for (std::size_t r = 0; r < plans.size(); ++r)
            (void)check_before_run(plans[r], plans.size(), trainers_[r].handlers(), o_.validate);
        check_finishes(plans);
        thread_hub hub(trainers_.size());
        std::vector<std::exception_ptr> failures(trainers_.size());
        std::vector<std::thread> threads;
        for (std::size_t r = 0; r < trainers_.size(); ++r)
            threads.emplace_back([&, r] {
                try {
                    trainers_[r].begin(plans[r], lengths_tokens);
                    auto t = hub.endpoint(r);
                    executor_options eo = o_;
                    if (r == fault_rank_) eo.fail_before = fault_before_;
                    executor<thread_transport> ex(t, trainers_[r].handlers(), eo);
                    ex.run(plans[r]);
                } catch (const std::exception& e) {
                    errors[r] = e.what();
                    failures[r] = std::current_exception();
                    hub.abort("rank " + std::to_string(r) + " failed: " + e.what());
                }
            });
        for (auto& t : threads) t.join();
        // The root cause first: a rank's own failure before the aborts it caused elsewhere.
        for (int pass = 0; pass < 2; ++pass)
            for (std::size_t r = 0; r < failures.size(); ++r)
                if (failures[r] && (pass == 1 || errors[r].find("step aborted") == std::string::npos))
                    std::rethrow_exception(failures[r]);
        return collect(plans.front().header);
    }

    std::vector<std::string> errors;  ///< per rank, of the last run ("" = fine)

private:
    /// Throws rejected_plan_error when the ranks' programs together deadlock under the send
    /// rule of rank 0's header (plan/deadlock.hpp), naming where each blocked rank stops.
    static void check_finishes(const std::vector<plan::rank_plan>& plans) {
        plan::execution_plan whole{plans.front().header, {}};
        whole.programs.reserve(plans.size());
        for (const auto& p : plans) whole.programs.push_back(p.program);
        const std::vector<plan::blocked_rank> stuck = plan::find_deadlock(whole);
        if (stuck.empty()) return;
        std::string where;
        for (const plan::blocked_rank& b : stuck)
            where += (where.empty() ? "" : "; ") + ("rank " + std::to_string(b.rank) + " at instruction " +
                                                    std::to_string(b.index) + " (" +
                                                    plan::describe(whole.programs[b.rank].instructions[b.index]) + ")");
        throw rejected_plan_error("cpu_cluster: the plan deadlocks under its send rule '" +
                                  std::string(name_of(whole.header.sends)) + "': " + where);
    }

    iteration_result collect(const plan::plan_header& h) const {
        iteration_result out{0.0, zero_params(c_), 0.0};
        for (const auto& t : trainers_) out.loss += t.loss();
        for (std::uint32_t d = 0; d < h.devices; ++d)
            for (const auto& l : trainers_[d].owned())
                for_each_tensor(l, [](auto& dst, const auto& src) { dst = src; }, out.grads, trainers_[d].grads());
        for (std::uint32_t r = h.devices; r < trainers_.size(); ++r)
            for (const auto& l : trainers_[r].owned())
                out.replica_divergence = std::max(out.replica_divergence, max_relative_error(trainers_[r].grads(), out.grads, l));
        return out;
    }

    model_config c_;
    executor_options o_;
    std::vector<rank_trainer> trainers_;
    std::size_t fault_rank_ = executor_options::no_fault, fault_before_ = executor_options::no_fault;
};

}  // namespace pipeplan::runtime::cpu
