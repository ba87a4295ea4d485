// pipeplan/runtime/cuda/check.hpp — CUDA runtime and NCCL status codes as exceptions, and the
// device query the GPU tests skip on. Host code only (g++ compiles it; kernels live in
// runtime/cuda/src/*.cu).
#pragma once

#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "pipeplan/runtime/errors.hpp"

namespace pipeplan::runtime::cuda {

/// A CUDA runtime or NCCL call failed; the message names the call and the library's reason.
class device_error : public error {
public:
    using error::error;
};

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw device_error(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
inline void check(ncclResult_t e, const char* what) {
    if (e != ncclSuccess && e != ncclInProgress) throw device_error(std::string(what) + ": " + ncclGetErrorString(e));
}

/// The number of usable devices, or the reason there is none ("" when count > 0): the GPU
/// suites print the reason and skip.
struct device_query {
    int count = 0;
    std::string why_none;
};
[[nodiscard]] inline device_query query_devices() {
    device_query q;
    const cudaError_t e = cudaGetDeviceCount(&q.count);
    if (e != cudaSuccess) {
        q.count = 0;
        q.why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
        (void)cudaGetLastError();  // clear the sticky error
    } else if (q.count == 0) {
        q.why_none = "no CUDA device";
    }
    return q;
}

}  // namespace pipeplan::runtime::cuda
