// pipeplan/schedule/placement.hpp — which device runs each virtual stage.
//
// linear:      V = D stages, stage v on device v.
// interleaved: V = C·D stages (C model chunks per device, Megatron-LM's interleaved 1F1B),
//              stage v on device v mod D; chunk of v = v / D.
// v_shape:     V = C·D stages in a zig-zag: chunk c runs on devices 0..D-1 when c is even and
//              D-1..0 when odd, so consecutive chunks meet on the same device (the V-shaped
//              placement of the zero-bubble V schedules; no message at the turn).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"

namespace pipeplan::schedule {

enum class placement_kind : std::uint8_t { linear, interleaved, v_shape };

[[nodiscard]] constexpr auto enum_names(placement_kind) noexcept {
    return name_table<placement_kind, 3>{"placement",
                                         {{{placement_kind::linear, "linear"},
                                           {placement_kind::interleaved, "interleaved"},
                                           {placement_kind::v_shape, "v-shape"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(placement_kind k) noexcept { return name_of(k); }

/// Maps virtual stages to devices (see the file comment).
class stage_placement {
public:
    stage_placement() = default;
    /// `devices` devices with `chunks` virtual stages each; linear requires chunks == 1.
    stage_placement(placement_kind kind, std::size_t devices, std::size_t chunks = 1)
        : kind_(kind), devices_(devices), chunks_(chunks) {
        if (devices == 0 || chunks == 0) throw invalid_argument("stage_placement: devices and chunks must be >= 1");
        if (kind == placement_kind::linear && chunks != 1)
            throw invalid_argument("stage_placement: a linear placement has one chunk per device");
    }
    static stage_placement linear(std::size_t devices) { return {placement_kind::linear, devices, 1}; }
    static stage_placement interleaved(std::size_t devices, std::size_t chunks) {
        return {chunks == 1 ? placement_kind::linear : placement_kind::interleaved, devices, chunks};
    }
    static stage_placement v_shape(std::size_t devices, std::size_t chunks = 2) {
        return {placement_kind::v_shape, devices, chunks};
    }

    [[nodiscard]] placement_kind kind() const noexcept { return kind_; }
    [[nodiscard]] std::size_t devices() const noexcept { return devices_; }
    [[nodiscard]] std::size_t chunks() const noexcept { return chunks_; }
    [[nodiscard]] std::size_t virtual_stages() const noexcept { return devices_ * chunks_; }

    /// Device running virtual stage v.
    [[nodiscard]] std::size_t device_of(std::size_t v) const noexcept {
        const std::size_t c = v / devices_, r = v % devices_;
        if (kind_ == placement_kind::v_shape && (c % 2 == 1)) return devices_ - 1 - r;
        return r;
    }
    /// Chunk (0-based model chunk on its device) of virtual stage v.
    [[nodiscard]] std::size_t chunk_of(std::size_t v) const noexcept { return v / devices_; }
    /// Virtual stage of (device, chunk).
    [[nodiscard]] std::size_t stage_of(std::size_t device, std::size_t chunk) const noexcept {
        if (kind_ == placement_kind::v_shape && (chunk % 2 == 1)) return chunk * devices_ + (devices_ - 1 - device);
        return chunk * devices_ + device;
    }
    /// Lowest virtual stage on a device.
    [[nodiscard]] std::size_t first_stage_on(std::size_t device) const noexcept {
        std::size_t best = stage_of(device, 0);
        for (std::size_t c = 1; c < chunks_; ++c) best = std::min(best, stage_of(device, c));
        return best;
    }

private:
    placement_kind kind_ = placement_kind::linear;
    std::size_t devices_ = 1;
    std::size_t chunks_ = 1;
};

}  // namespace pipeplan::schedule
