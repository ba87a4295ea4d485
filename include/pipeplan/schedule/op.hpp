// pipeplan/schedule/op.hpp — the tiny action IR of pipeline schedules.
//
// A schedule is, per device, a sequence of operations on (micro-batch, virtual stage):
//   F  forward that stores its activations for the backward,
//   f  forward under no-grad that keeps only the stage input (a checkpoint; op_kind::F_checkpoint),
//   R  recomputation of an `f` forward (restores the full activations),
//   B  backward (input gradient; the whole backward when the schedule has no W ops),
//   W  weight-gradient part of a split backward (zero-bubble schedules).
// A `B` whose forward was an `f` with no `R` before it recomputes inline (classic activation
// checkpointing: the recomputation runs inside the backward, after the gradient arrived).
// An F with `overlaps_next` set runs together with the B that follows it in its device order,
// as one overlapped forward/backward op (DualPipe's F&B; PyTorch's OVERLAP_F_B): both start when
// both inputs are there and both end after timing.hpp's overlapped duration.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/names.hpp"

namespace pipeplan::schedule {

/// The kind of a pipeline operation (see the file comment).
enum class op_kind : std::uint8_t { F = 0, B = 1, W = 2, F_checkpoint = 3, R = 4 };

[[nodiscard]] constexpr auto enum_names(op_kind) noexcept {
    return name_table<op_kind, 5>{
        "op kind",
        {{{op_kind::F, "F"}, {op_kind::B, "B"}, {op_kind::W, "W"}, {op_kind::F_checkpoint, "f"}, {op_kind::R, "R"}}}};
}

/// The letter used in device orders and traces: F, B, W, f, R.
[[nodiscard]] constexpr char letter(op_kind k) noexcept { return name_of(k)[0]; }

/// True for the kinds that run a forward pass (F, f).
[[nodiscard]] constexpr bool is_forward(op_kind k) noexcept { return k == op_kind::F || k == op_kind::F_checkpoint; }

/// One operation: kind on (micro-batch `microbatch`, virtual stage `stage`).
struct op {
    op_kind kind = op_kind::F;
    std::uint32_t microbatch = 0; ///< micro-batch index (0-based, in scenario order)
    std::uint32_t stage = 0;  ///< virtual stage index (0-based)
    /// An F only: runs overlapped with the next op of its device order, a B (see the file comment).
    bool overlaps_next = false;

    friend constexpr bool operator==(const op&, const op&) noexcept = default;
};

/// The per-device operation lists of a schedule: `orders[d]` runs on device d, in order.
using device_orders = std::vector<std::vector<op>>;

/// Formats an op as in the CLI: "F3" (micro-batch 3), or with chunks "F3.1" (chunk 1 of the
/// device: virtual stage = chunk * devices + device for interleaved placements). `chunk` < 0
/// leaves the chunk out.
[[nodiscard]] inline std::string to_string(op o, int chunk = -1) {
    std::string s(1, letter(o.kind));
    s += std::to_string(o.microbatch);
    if (chunk >= 0) {
        s += '.';
        s += std::to_string(chunk);
    }
    return s;
}

/// Parses "F3", "B12", "f0", "R5", "W2" or with a chunk "F3.1". Returns the kind, micro-batch
/// and chunk (0 when absent), or nullopt when the text is not an op.
struct parsed_op {
    op_kind kind;
    std::uint32_t microbatch;
    std::uint32_t chunk;
};
[[nodiscard]] inline std::optional<parsed_op> parse_op(std::string_view s) {
    if (s.size() < 2) return std::nullopt;
    parsed_op p{op_kind::F, 0, 0};
    const auto kind = find_name<op_kind>(s.substr(0, 1));
    if (!kind) return std::nullopt;
    p.kind = *kind;
    const char* b = s.data() + 1;
    const char* e = s.data() + s.size();
    auto [q, ec] = std::from_chars(b, e, p.microbatch);
    if (ec != std::errc{} || q == b) return std::nullopt;
    if (q != e) {
        if (*q != '.') return std::nullopt;
        const char* c = q + 1;
        auto [q2, ec2] = std::from_chars(c, e, p.chunk);
        if (ec2 != std::errc{} || q2 != e || q2 == c) return std::nullopt;
    }
    return p;
}

}  // namespace pipeplan::schedule
