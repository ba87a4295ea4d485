// pipeplan/batching/errors.hpp — the typed error micro-batch splitting throws.
//
// A split_error says which constraint failed and by how much: `required()` is what the
// offending sample or micro-batch needs, `limit()` what the constraint allows (same unit,
// given by `unit()`), and `sample()` the 0-based sample id concerned (or -1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"

namespace pipeplan::batching {

/// Why no split could be produced.
enum class split_failure : std::uint8_t {
    empty_batch = 0,       ///< the batch has no samples
    sample_too_long = 1,   ///< a sample is longer than the cost model can price
    model_states = 2,      ///< model states alone exceed the device memory
    stored_memory = 3,     ///< a single sample's stored activations exceed every stored limit
    peak_memory = 4,       ///< a single sample's (or a fixed micro-batch's) peak exceeds the available memory
    unpriceable = 5,       ///< the cost model has no data for a needed query
};

[[nodiscard]] constexpr auto enum_names(split_failure) noexcept {
    return name_table<split_failure, 6>{"split failure",
                                        {{{split_failure::empty_batch, "empty batch"},
                                          {split_failure::sample_too_long, "sample too long"},
                                          {split_failure::model_states, "model states exceed device memory"},
                                          {split_failure::stored_memory, "stored activations exceed the limit"},
                                          {split_failure::peak_memory, "peak memory exceeds the available memory"},
                                          {split_failure::unpriceable, "cost model cannot price the query"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(split_failure f) noexcept { return name_of(f); }

/// No split exists (or none of the requested kind); nothing is returned.
class split_error : public error {
public:
    split_error(split_failure kind, const std::string& message, double required = 0, double limit = 0,
                std::string unit = "", long long sample = -1)
        : error(message), kind_(kind), required_(required), limit_(limit), unit_(std::move(unit)), sample_(sample) {}

    [[nodiscard]] split_failure kind() const noexcept { return kind_; }
    /// What the offending sample / micro-batch needs (in unit()).
    [[nodiscard]] double required() const noexcept { return required_; }
    /// What the constraint allows (in unit()).
    [[nodiscard]] double limit() const noexcept { return limit_; }
    /// By how much the constraint is exceeded: required() - limit().
    [[nodiscard]] double excess() const noexcept { return required_ - limit_; }
    /// "MB" or "tokens" (empty for an empty batch).
    [[nodiscard]] const std::string& unit() const noexcept { return unit_; }
    /// The 0-based sample id concerned, or -1.
    [[nodiscard]] long long sample() const noexcept { return sample_; }

private:
    split_failure kind_;
    double required_;
    double limit_;
    std::string unit_;
    long long sample_;
};

}  // namespace pipeplan::batching
