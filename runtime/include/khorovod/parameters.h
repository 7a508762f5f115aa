// Helpers for data-parallel training loops, in the shape Horovod users know:
// broadcast_parameters (make every rank start from the root's weights) and
// allreduce_gradients (average named gradients, all submitted before any is
// awaited so the runtime can fuse them).
//
// Thread-safety: as Runtime; the tensors must not be touched by other
// threads until the call returns.
#pragma once

#include <string>
#include <vector>

#include "khorovod/runtime.h"

namespace khorovod {

struct NamedTensor {
  std::string name;
  TensorView view;
};

// Broadcasts every tensor from `root_rank`, in place. Names are prefixed with
// "broadcast." so they never collide with gradient names.
Status broadcast_parameters(Runtime& runtime, const std::vector<NamedTensor>& parameters,
                            int root_rank = 0);

// Reduces every gradient in place (default: average). Names are prefixed
// with "allreduce.". Returns the first error, after every submitted
// operation finished.
Status allreduce_gradients(Runtime& runtime, const std::vector<NamedTensor>& gradients,
                           const AllreduceOptions& options = {});

}  // namespace khorovod
