// pipeplan/runtime/transport.hpp — the point of extension through which executors talk.
//
// A transport is one rank's end of the job's communication: non-blocking point-to-point
// messages (start_send / start_recv return a request, wait completes it within a timeout) and
// a sum all-reduce over a group of ranks. Executors never name a backend: the CPU thread
// transport (runtime/cpu), the NCCL transport and the single-GPU stream transport
// (runtime/cuda) all model this concept.
//
// Contract:
//  - messages between one ordered pair of ranks are matched in order (first send with first
//    receive); the tag and byte size of a matched pair must agree, or wait throws
//    protocol_error;
//  - the send buffer must stay alive and unchanged, and the receive buffer alive, until wait
//    returned true for the request;
//  - wait(r, timeout) returns true once r completed, false when the timeout passed first
//    (the request stays pending and may be waited on again), and throws aborted_error when
//    another rank aborted the step;
//  - all_reduce sums `values` (a typed_buffer: pointer, element count, plan dtype; a device
//    pointer on the CUDA transports) element-wise and in place over the ranks of `group` (every
//    member calls it with the same group, in the same order of collectives, with equal counts
//    and dtypes); every member receives bit-identical results; it throws timeout_error or
//    aborted_error, and invalid_argument for a dtype the transport cannot sum;
//  - abort(reason) wakes every rank's pending waits with aborted_error.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "pipeplan/plan/instruction.hpp"

namespace pipeplan::runtime {

/// The wait timeout every runtime API takes.
using timeout_ms = std::chrono::milliseconds;

/// The plan dtype of a C++ element type (double → fp64, float → fp32); other types have none.
template <class T>
inline constexpr bool has_dtype_v = std::is_same_v<T, double> || std::is_same_v<T, float>;
template <class T>
    requires has_dtype_v<T>
inline constexpr plan::dtype dtype_of_v = std::is_same_v<T, double> ? plan::dtype::fp64 : plan::dtype::fp32;

/// A typed buffer for collectives: `count` elements of `type` at `data` (host or device memory,
/// as the transport expects).
struct typed_buffer {
    void* data = nullptr;
    std::size_t count = 0;
    plan::dtype type = plan::dtype::fp32;

    [[nodiscard]] std::size_t size_bytes() const noexcept { return count * plan::dtype_bytes(type); }

    /// A view of a span of double or float.
    template <class T>
        requires has_dtype_v<T>
    [[nodiscard]] static typed_buffer of(std::span<T> values) noexcept {
        return {values.data(), values.size(), dtype_of_v<T>};
    }
};

template <class T>
concept transport = requires(T& t, std::size_t peer, std::uint64_t tag, std::span<const std::byte> out,
                             std::span<std::byte> in, typename T::request& req, timeout_ms timeout,
                             typed_buffer values, std::span<const std::size_t> group,
                             const std::string& reason) {
    typename T::request;
    { t.rank() } -> std::convertible_to<std::size_t>;
    { t.ranks() } -> std::convertible_to<std::size_t>;
    { t.start_send(peer, tag, out) } -> std::same_as<typename T::request>;
    { t.start_recv(peer, tag, in) } -> std::same_as<typename T::request>;
    { t.wait(req, timeout) } -> std::same_as<bool>;
    { t.all_reduce(values, group, timeout) } -> std::same_as<void>;
    { t.abort(reason) } -> std::same_as<void>;
};

}  // namespace pipeplan::runtime
