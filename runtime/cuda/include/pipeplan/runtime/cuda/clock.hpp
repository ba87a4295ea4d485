// pipeplan/runtime/cuda/clock.hpp — set_frequency on a GPU, in stream order: the CUDA launcher
// of runtime/stream_clock.hpp (cudaLaunchHostFunc on the compute stream).
//
//   cuda::stream_clock clock({}, [dev](std::uint64_t mhz) {         // the user's setter, e.g.
//       nvmlDeviceSetGpuLockedClocks(dev, unsigned(mhz), unsigned(mhz));   // NVML (not linked
//   });                                                              // by pipeplan)
//   clock.register_on(handlers);
//
// The setter runs on CUDA's host-function thread once the stream reaches the set_frequency:
// after the kernels enqueued before it, before those enqueued after it. It must not call the
// CUDA API (CUDA forbids that in host functions); NVML calls are fine. Host functions
// serialize the stream: each set_frequency costs the stream a round trip to the host, which
// is why plan/frequency.hpp inserts one only where the clock changes.
#pragma once

#include <cuda_runtime_api.h>

#include "pipeplan/runtime/cuda/check.hpp"
#include "pipeplan/runtime/stream_clock.hpp"

namespace pipeplan::runtime::cuda {

/// Enqueues a host function on a CUDA stream (the void* is a cudaStream_t).
struct cuda_host_launcher {
    void launch(void* stream, void (*fn)(void*), void* data) const {
        check(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, data), "cudaLaunchHostFunc");
    }
};
static_assert(host_launcher<cuda_host_launcher>);

/// stream_clock on CUDA streams.
using stream_clock = runtime::stream_clock<cuda_host_launcher>;

}  // namespace pipeplan::runtime::cuda
