// pipeplan/schedule/timing.hpp — the one timing and memory model of pipeline ops.
//
// Everything that runs ops in time — the simulator's replay of fixed orders (simulator.hpp),
// the greedy order discovery behind adaptive and zb-h1 (order_discovery.hpp), and the tiers
// above (plans, energy) — asks this header how long an op takes, which ops it feeds, what its
// messages carry and what memory it holds; links (links.hpp) decide when a message arrives.
//
// Durations (r_s = the scenario's checkpoint ratio of stage s, 1 by default):
//   F, f, R = forward_ms;  B = backward_ms·(1 − w) (+ r_s·forward_ms when it recomputes inline:
//   its forward was an f and no R ran);  W = backward_ms·w   (w = the schedule's w_share).
// Data flow: F/f(j, v) feeds F/f(j, v+1) (a message when the stages sit on different devices)
//   and, on the same stage, R(j, v) if the schedule has one, else B(j, v); R(j, v) feeds
//   B(j, v); B(j, v) feeds B(j, v−1) (a message) and W(j, v) (split backward). B(j, v) of the
//   last stage needs only its own forward (or R). Every message carries activation_mb[j].
//   These rules are written once, below: cross_successor() / cross_producer() between stages,
//   local_successor() / local_producer() within one; the simulator, op_index's lookups, the
//   lowering to rank programs (plan/lower.hpp) and input_count() all use them.
// Memory of (j, v) after each op: F and R keep stored_mb; f keeps (1 − r_s)·stored_mb plus its
//   input activation_mb[j] (the checkpoint); B frees everything (with W ops it keeps the share
//   w·stored_mb until W); W frees the rest. While F, f, R or B of (j, v) runs the device holds
//   its other activations plus peak_mb(j, v); while W runs, nothing extra.
// Overlapped forward/backward (an F with op::overlaps_next and the B after it, on other
//   (micro-batch, stage) pairs): both parts start together and end after
//   overlapped_ms(F, B, overlap_factor) = max(F, B) + overlap_factor·min(F, B), where F and B are
//   the parts' durations above: factor 1 = F + B (no overlap benefit), 0 = max(F, B) (the
//   shorter part hides entirely); never below max(F, B). Memory: the forward allocates and the
//   backward frees as they would alone, both at the pair's end; while the pair runs the device
//   holds its other activations plus both parts' peak_mb (the backward's includes what it frees).
#pragma once

#include <cstddef>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "pipeplan/schedule/op.hpp"
#include "pipeplan/schedule/scenario.hpp"

namespace pipeplan::schedule {

/// The model of the file comment for one scenario and backward split.
class op_model {
public:
    op_model(const scenario& sc, double w_share) noexcept : sc_(&sc), w_(w_share) {}

    [[nodiscard]] const scenario& scene() const noexcept { return *sc_; }
    [[nodiscard]] double w_share() const noexcept { return w_; }

    /// Duration of `o`; `inline_recompute`: a B whose forward was an f with no R before it.
    [[nodiscard, gnu::always_inline]] double duration_ms(op o, bool inline_recompute = false) const noexcept {
        const std::size_t k = sc_->at(o.microbatch, o.stage);
        switch (o.kind) {
            case op_kind::F:
            case op_kind::F_checkpoint:
            case op_kind::R: return sc_->forward_ms[k];
            case op_kind::B:
                return sc_->backward_ms[k] * (1.0 - w_) +
                       (inline_recompute ? sc_->ratio(o.stage) * sc_->forward_ms[k] : 0.0);
            case op_kind::W: return sc_->backward_ms[k] * w_;
        }
        return 0.0;
    }

    /// Size (MB) of the message an op sends to another stage (activation or gradient).
    [[nodiscard]] double message_mb(op o) const noexcept { return sc_->activation(o.microbatch); }

    /// Activation memory (j, v) holds once `o` on (j, v) ended.
    [[nodiscard, gnu::always_inline]] double held_after_mb(op o) const noexcept {
        const std::size_t k = sc_->at(o.microbatch, o.stage);
        switch (o.kind) {
            case op_kind::F:
            case op_kind::R: return sc_->stored_mb[k];
            case op_kind::F_checkpoint: return (1.0 - sc_->ratio(o.stage)) * sc_->stored_mb[k] + sc_->activation(o.microbatch);
            case op_kind::B: return w_ > 0.0 ? sc_->stored_mb[k] * w_ : 0.0;
            case op_kind::W: return 0.0;
        }
        return 0.0;
    }

    /// Device memory while `o` runs: `others_mb` (everything but (j, v)'s activations) plus
    /// the op's footprint; `held_mb` is what (j, v) held before it.
    [[nodiscard, gnu::always_inline]] double during_mb(op o, double others_mb, double held_mb) const noexcept {
        return others_mb + (o.kind == op_kind::W ? held_mb : sc_->peak_mb[sc_->at(o.microbatch, o.stage)]);
    }

    /// Device memory while an overlapped pair runs: `others_mb` (everything but the two parts'
    /// (micro-batch, stage) activations) plus both parts' peak_mb (the file comment).
    [[nodiscard]] double during_overlapped_mb(op forward, op backward, double others_mb) const noexcept {
        return others_mb + sc_->peak_mb[sc_->at(forward.microbatch, forward.stage)] +
               sc_->peak_mb[sc_->at(backward.microbatch, backward.stage)];
    }

private:
    const scenario* sc_;
    double w_;
};

/// Duration of an overlapped forward/backward op whose parts take `forward_ms` and
/// `backward_ms` alone: max(F, B) + overlap_factor·min(F, B) (the file comment); overlap_factor
/// lies in [0, 1].
[[nodiscard]] constexpr double overlapped_ms(double forward_ms, double backward_ms, double overlap_factor) noexcept {
    const double lo = forward_ms < backward_ms ? forward_ms : backward_ms;
    const double hi = forward_ms < backward_ms ? backward_ms : forward_ms;
    return hi + overlap_factor * lo;
}

/// The op of another stage that `o`'s output feeds (the data flow of the file comment), with
/// `stages` virtual stages: F/f → the forward of the next stage (kind F: the receiver's own
/// kind is the schedule's choice), B → the B of the previous stage. `has` is false when there
/// is none (the last forward, the first backward, R and W).
struct cross_target {
    bool has = false;
    op to{};
};
[[nodiscard, gnu::always_inline]] constexpr cross_target cross_successor(op o, std::size_t stages) noexcept {
    if (is_forward(o.kind) && o.stage + 1 < stages) return {true, {op_kind::F, o.microbatch, o.stage + 1}};
    if (o.kind == op_kind::B && o.stage > 0) return {true, {op_kind::B, o.microbatch, o.stage - 1}};
    return {};
}

/// The op of another stage whose output `o` takes as its data input (the inverse of
/// cross_successor()): F/f(j, v) ← the forward of stage v − 1 (kind F: whether it was
/// checkpointed is the schedule's choice), B(j, v) ← B(j, v + 1). `has` is false for the
/// first forward, the last stage's B, R and W.
[[nodiscard, gnu::always_inline]] constexpr cross_target cross_producer(op o, std::size_t stages) noexcept {
    if (is_forward(o.kind) && o.stage > 0) return {true, {op_kind::F, o.microbatch, o.stage - 1}};
    if (o.kind == op_kind::B && o.stage + 1 < stages) return {true, {op_kind::B, o.microbatch, o.stage + 1}};
    return {};
}

/// The kind of the op of the same (micro-batch, stage) that an op of kind `k` feeds:
/// F/f → R when the schedule recomputes (j, v) (`recomputed`), else B; R → B; B → W when the
/// schedule splits backwards (`split_backward`); nothing after W (or after B without a split).
[[nodiscard]] constexpr std::optional<op_kind> local_successor(op_kind k, bool recomputed, bool split_backward) noexcept {
    switch (k) {
        case op_kind::F:
        case op_kind::F_checkpoint: return recomputed ? op_kind::R : op_kind::B;
        case op_kind::R: return op_kind::B;
        case op_kind::B: return split_backward ? std::optional<op_kind>(op_kind::W) : std::nullopt;
        case op_kind::W: return std::nullopt;
    }
    return std::nullopt;
}

/// The kind of the op of the same (micro-batch, stage) whose output an op of kind `k` reads
/// (the inverse of local_successor()): R ← the forward (kind F: f or F); B ← R when
/// `recomputed`, else the forward; W ← B; nothing before a forward.
[[nodiscard, gnu::always_inline]] constexpr std::optional<op_kind> local_producer(op_kind k, bool recomputed) noexcept {
    switch (k) {
        case op_kind::F:
        case op_kind::F_checkpoint: return std::nullopt;
        case op_kind::R: return op_kind::F;
        case op_kind::B: return recomputed ? op_kind::R : op_kind::F;
        case op_kind::W: return op_kind::B;
    }
    return std::nullopt;
}

/// Number of inputs `o` waits for (its in-degree in the data flow): its cross_producer() and
/// its local_producer() — a forward on stage 0 none, other forwards 1; R 1 (its f); B 1 (its
/// activations) + 1 (the gradient) below the last stage; W 1 (its B).
[[nodiscard]] constexpr std::uint8_t input_count(op o, std::size_t stages) noexcept {
    return static_cast<std::uint8_t>((cross_producer(o, stages).has ? 1 : 0) + (local_producer(o.kind, false) ? 1 : 0));
}

namespace detail {
/// The time past which a replay or discovery that may give up (discovery_policy /
/// simulation_options::give_up_above_ms) gives up: `cut_ms` plus a relative 1e-9, so that a run
/// ending at the cut up to rounding still runs to its end; infinite when `cut_ms` is.
[[nodiscard]] inline double give_up_past_ms(double cut_ms) noexcept {
    return std::isfinite(cut_ms) ? cut_ms + 1e-9 * std::fabs(cut_ms) : std::numeric_limits<double>::infinity();
}
}  // namespace detail

}  // namespace pipeplan::schedule
