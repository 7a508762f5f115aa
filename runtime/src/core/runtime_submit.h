// What Runtime's collectives (core/runtime_ops.cc) need from RuntimeImpl
// (core/runtime.cc): submitting checked operations, and the root check
// that needs the running session's size.
//
// Thread-safety: both may be called from any thread.
#pragma once

#include <vector>

#include "core/tensor_queue.h"
#include "khorovod/handle.h"
#include "khorovod/status.h"

namespace khorovod {

class RuntimeImpl;

namespace detail {
// Validates device placement against the session and enqueues `ops` as
// one batch; a refused batch returns a failed handle.
Handle Submit(RuntimeImpl& impl, std::vector<PendingOp> ops);
Status CheckRoot(const RuntimeImpl& impl, int root);
}  // namespace detail

}  // namespace khorovod
