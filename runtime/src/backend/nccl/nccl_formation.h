// FormNcclComm: forms the NCCL communicator of a new session, collectively
// over the session's Gloo context.
//
// One allgather of a fixed-size record per rank carries (a) which GPU the
// rank uses on which machine (the PCI bus id and the kernel's boot id), and
// (b) what it brings from the last session (NcclLegacy: the communicator,
// its id and this rank's old rank, and its NCCL's features). Then:
//   - Two ranks on one GPU are refused with kFailedPrecondition naming them,
//     since NCCL cannot run them (production never does), unless the job
//     opted in with KHOROVOD_GPU_SHARE=1 (tests and benchmarks on one GPU).
//     Opted in, the runtime sets, where the user has not,
//     NCCL_MULTI_RANK_GPU_ENABLE=1 on NCCL >= 2.30, else a per-process
//     NCCL_HOSTID (each rank then looks like its own node and NCCL talks over
//     its socket transport; NCCL_SOCKET_IFNAME=lo when all ranks share one
//     machine). This happens before NCCL reads them, at the first formation.
//   - PlanReform (nccl_reform.h) picks reuse, shrink, grow, shrink+grow or a
//     new communicator from a new unique id, and this executes it, logging
//     one line "khorovod: nccl: <path> (<why>) ...".
// Every rank reaches this at the same point of the session, so the
// collectives pair up; a failure on any rank fails the session, and the
// next one starts from whatever is left (an aborted parent: init).
//
// Thread-safety: called by one thread (the session's background thread).
#pragma once

#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_device.h"
#include "backend/nccl/nccl_comm.h"
#include "backend/nccl/nccl_reform.h"
#include "backend/registry.h"

namespace khorovod {

// What an NCCL backend leaves to the next session (Backend::Retire).
struct NcclLegacy final : BackendLegacy {
  std::unique_ptr<NcclComm> comm;  // alive: healthy, or revoked
  uint64_t comm_id = 0;
  int rank = -1;
  int size = 0;
};

struct NcclFormed {
  std::unique_ptr<NcclComm> comm;
  uint64_t comm_id = 0;
  ReformPlan plan;
};

StatusOr<NcclFormed> FormNcclComm(const BackendInit& init, std::shared_ptr<const NcclLibrary> lib,
                                  const cuda::CudaStream& stream);

}  // namespace khorovod
