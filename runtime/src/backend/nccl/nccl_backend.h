// NcclBackend: the data plane for CUDA device tensors, registered as "nccl".
//
// Every collective runs on the runtime's own non-blocking CUDA stream, so it
// never serializes with the user's streams; the background thread learns
// of completion by querying a CUDA event (NcclComm::WaitForStream) and never
// blocks inside CUDA or NCCL. Inputs must be ready when the operation is
// submitted (the caller synchronizes its own stream first), as with host
// tensors whose buffers must not change until the handle completes.
//
// Fusion: AllreduceSpans copies small spans into a device fusion buffer with
// cudaMemcpyAsync on the same stream, reduces it and the large spans (in
// place) in one NCCL group, and copies the small ones back. kAverage uses
// ncclAvg (AveragesNatively()).
//
// Formation: rank 0 calls ncclGetUniqueId and broadcasts it over the
// session's Gloo context; every runtime session (and so every elastic
// reset) forms a new communicator with a new id. A failure aborts the
// communicator (see NcclComm) and the backend then refuses all work.
//
// Thread-safety: one caller at a time (the runtime's background thread);
// construction may happen on another thread.
#pragma once

#include <memory>

#include "backend/registry.h"

namespace khorovod {

// Creates the backend for init.config (device, rank, size, timeout), forming
// the communicator over init.gloo_context. Exposed for the GPU tests, which
// form communicators without a whole runtime.
StatusOr<std::unique_ptr<Backend>> MakeNcclBackend(const BackendInit& init);

}  // namespace khorovod
