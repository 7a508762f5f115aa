// DeviceAdasum: op=Adasum on a device tensor, with the result Horovod's
// NCCL build gives (its AdasumGpuAllreduceOp, checked by Horovod's
// test_horovod_adasum_multiple_allreduce_gpu_nccl): the tensors of each
// host's ranks are summed, the host sums are combined by Adasum's tree
// across hosts, and the result is divided by the ranks per host. On one
// host that is the average. Horovod's CPU Adasum (core/adasum.h) is flat over
// all ranks instead; the two agree when every host has one rank.
//
// How: the tensor is staged to host memory through the device backend's
// DeviceOps, and the host backend (the session's Gloo or shared memory)
// carries two allreduces: one of the ranks per host, then the data, each
// rank adding its (prescaled) tensor into its host's slot of a buffer of
// cross_size slots, so every rank ends with every host's sum. Each rank then
// runs the tree locally (AdasumTree: the same bytes everywhere), divides,
// postscales and copies the result to the device. The data allreduce moves
// cross_size times the tensor: simple and exact rather than bandwidth-
// optimal, which is the price of keeping Adasum off the device.
//
// Refusals, kInvalidArgument and alike on every rank (decided from the
// allreduced counts or the shared placement): a number of hosts that is not
// a power of two, hosts with different numbers of ranks, an unsupported
// dtype. A joined rank (no op) contributes zeros and still counts for its
// host, as in the host path.
//
// Thread-safety: none; called by the executor on the background thread,
// the same call in the same order on every rank.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "core/message.h"
#include "core/tensor_queue.h"
#include "khorovod/placement.h"

namespace khorovod {

// Reduces `op`'s device input into its device output (or only takes part,
// when `op` is empty). `scratch` is reused host memory.
Status DeviceAdasum(DeviceOps& device, Backend& host, const Placement& placement,
                    const Response& response, const std::optional<PendingOp>& op,
                    std::vector<std::byte>& scratch);

}  // namespace khorovod
