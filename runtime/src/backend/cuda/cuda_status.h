// Conversions from CUDA runtime errors to khorovod::Status.
//
// A CUDA error inside a collective is reported as kUnavailable: the device
// or the driver is in a state the runtime cannot continue from, and the
// elastic path treats it like a dead peer (tear down, reset). A missing
// driver or device (cudaErrorNoDevice, cudaErrorInsufficientDriver) is
// kFailedPrecondition, so that callers can tell "no GPU here" apart.
//
// Thread-safety: pure functions.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "khorovod/status.h"

namespace khorovod::cuda {

inline bool IsNoDeviceError(cudaError_t e) {
  return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice;
}

inline Status FromCuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  std::string msg =
      std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (IsNoDeviceError(e)) return Status::FailedPrecondition(std::move(msg));
  return Status::Unavailable(std::move(msg));
}

}  // namespace khorovod::cuda

#define KH_CUDA_RETURN_IF_ERROR(expr) KH_RETURN_IF_ERROR(::khorovod::cuda::FromCuda((expr), #expr))
