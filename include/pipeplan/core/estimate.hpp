// pipeplan/core/estimate.hpp — a value that a model may be unable to give.
//
// Cost models answer queries outside their profiled range with a status instead of a sentinel
// or a NaN. `estimate<T>` is that result type: check `ok()` (or `if (e)`), read `value()`
// (throws pipeplan::error when there is no value) or `value_or(x)`. Sums and scalings propagate
// the worst status, so a per-stage total built from per-layer estimates stays honest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pipeplan/core/error.hpp"
#include "pipeplan/core/names.hpp"

namespace pipeplan {

enum class estimate_status : std::uint8_t {
    ok = 0,
    out_of_profiled_range = 1,  ///< the query lies beyond the largest profiled mbs or length
    unsupported = 2,            ///< the model has no data for this query at all
};

[[nodiscard]] constexpr auto enum_names(estimate_status) noexcept {
    return name_table<estimate_status, 3>{"estimate status",
                                          {{{estimate_status::ok, "ok"},
                                            {estimate_status::out_of_profiled_range, "out of profiled range"},
                                            {estimate_status::unsupported, "unsupported"}}}};
}
[[nodiscard]] constexpr std::string_view to_string(estimate_status s) noexcept { return name_of(s); }

template <class T = double>
class estimate {
public:
    constexpr estimate() noexcept = default;  // unsupported, no value
    constexpr estimate(T v) noexcept : value_(v), status_(estimate_status::ok) {}  // NOLINT
    constexpr static estimate failed(estimate_status s) noexcept {
        estimate e;
        e.status_ = s;
        return e;
    }
    constexpr static estimate out_of_range() noexcept {
        return failed(estimate_status::out_of_profiled_range);
    }
    constexpr static estimate unsupported() noexcept { return failed(estimate_status::unsupported); }

    [[nodiscard]] constexpr bool ok() const noexcept { return status_ == estimate_status::ok; }
    constexpr explicit operator bool() const noexcept { return ok(); }
    [[nodiscard]] constexpr estimate_status status() const noexcept { return status_; }

    /// The value; throws pipeplan::error naming the status when there is none.
    [[nodiscard]] constexpr const T& value() const {
        if (!ok()) throw error("pipeplan: estimate has no value (" + std::string(to_string(status_)) + ")");
        return value_;
    }
    [[nodiscard]] constexpr T value_or(T fallback) const noexcept { return ok() ? value_ : fallback; }

    friend constexpr estimate operator+(const estimate& a, const estimate& b) noexcept {
        if (a.ok() && b.ok()) return estimate(a.value_ + b.value_);
        return failed(a.status_ > b.status_ ? a.status_ : b.status_);
    }
    friend constexpr estimate operator*(const estimate& a, T k) noexcept {
        return a.ok() ? estimate(a.value_ * k) : a;
    }
    friend constexpr estimate operator*(T k, const estimate& a) noexcept { return a * k; }
    estimate& operator+=(const estimate& b) noexcept { return *this = *this + b; }

    friend constexpr bool operator==(const estimate&, const estimate&) noexcept = default;

private:
    T value_{};
    estimate_status status_ = estimate_status::unsupported;
};

/// The larger of two estimates (the worse status wins when either has no value).
template <class T>
[[nodiscard]] constexpr estimate<T> max(const estimate<T>& a, const estimate<T>& b) noexcept {
    if (a.ok() && b.ok()) return a.value_or(T{}) < b.value_or(T{}) ? b : a;
    return estimate<T>::failed(a.status() > b.status() ? a.status() : b.status());
}

}  // namespace pipeplan
