// What Runtime's collectives (core/runtime_ops.cc) need from RuntimeImpl
// (core/runtime.cc): submitting checked operations, and the root check
// that needs the running session's size.
//
// Thread-safety: both may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "core/process_set_table.h"
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
// The running session's process sets; null before init().
std::shared_ptr<const ProcessSetTable> ProcessSets(const RuntimeImpl& impl);
// The running session's count of blocked callers (TensorQueue::waiters);
// null before init(). A blocking collective counts itself in it before it
// submits (core/waiter_signal.h).
std::shared_ptr<std::atomic<int>> Waiters(const RuntimeImpl& impl);
}  // namespace detail

}  // namespace khorovod
