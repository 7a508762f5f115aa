// Emulated device memory and the "emulated" device backend, for testing the
// runtime's device path on machines without a GPU.
//
// Memory: Device{kCUDA, i} tensors live in host pages mapped PROT_NONE. Only
// the emulated backend's copier (and the test's Upload/Download) open a
// page range for the length of one memcpy, so any host access the runtime
// makes to "device" memory (a memcpy, a scaling loop, a zero-fill meant for
// the host path) crashes the test with SIGSEGV instead of passing silently.
// Copies outside an emulated allocation are refused with an error.
//
// Backend: registered as "emulated" (KHOROVOD_GPU_OPERATIONS=emulated). It
// is the production StagingBackend over the configured host backend (Gloo),
// with this memory behind its DeviceCopier; its device is cuda:<local_rank>
// unless KHOROVOD_GPU_DEVICE pins another. Counters say how often a
// process created the backend and how many are alive, so tests can check
// lazy creation and rebuilding.
//
// Thread-safety: everything here may be used from any thread. Windows on
// one allocation are reference-counted, so the test thread reading a result
// never closes a window the background thread opened.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "khorovod/status.h"
#include "khorovod/tensor.h"

namespace khorovod::testing {

// PROT_NONE pages holding `bytes`; unmapped when the last reference goes.
// Null for 0 bytes.
std::shared_ptr<void> EmulatedAlloc(size_t bytes);
// True when [p, p + bytes) lies inside one live emulated allocation.
bool IsEmulatedDeviceMemory(const void* p, size_t bytes);
// memmove where either side may be emulated device memory; an error when a
// pointer that should be device memory (`dst_on_device`, `src_on_device`)
// is not.
Status EmulatedCopy(void* dst, bool dst_on_device, const void* src, bool src_on_device,
                    size_t bytes);

// Process-wide counters of the "emulated" backend.
int EmulatedBackendsCreated();
int EmulatedBackendsAlive();

// A device tensor for tests: emulated memory plus host-side helpers.
struct DeviceTensor {
  Tensor host;  // what was uploaded, and where Download() puts the bytes
  std::shared_ptr<void> memory;
  Device device;

  // Uploads `host` to emulated memory on `device`.
  static DeviceTensor From(Tensor host, Device device);
  TensorView view();
  // Copies the device bytes back into `host` and returns it.
  const Tensor& Download();
};

// The bytes of a device result (Tensor with device_storage), on the host.
Tensor DownloadResult(const Tensor& result);

}  // namespace khorovod::testing
