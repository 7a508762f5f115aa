// Runtime's process-set calls (khorovod/process_set.h): registration and
// removal are global operations negotiated like any other (OpType::
// kProcessSet); the queries read the session's ProcessSetTable.
#include <string>
#include <vector>

#include "core/process_set_table.h"
#include "core/runtime_impl.h"
#include "khorovod/runtime.h"

namespace khorovod {
namespace {

// One name for every registration and removal: each is a blocking call that
// every rank makes in the same order, so at most one is in flight per rank.
constexpr const char* kProcessSetOpName = "khorovod.process_set";

PendingOp ProcessSetOp(std::vector<int64_t> ranks, int remove_id) {
  PendingOp op;
  op.request.op = OpType::kProcessSet;
  op.request.name = kProcessSetOpName;
  op.request.shape = {0};
  op.request.splits = std::move(ranks);
  op.request.root = remove_id;
  return op;
}

}  // namespace

StatusOr<int> Runtime::add_process_set(const std::vector<int>& ranks) {
  Handle h = impl_->Submit({ProcessSetOp(std::vector<int64_t>(ranks.begin(), ranks.end()), -1)});
  KH_RETURN_IF_ERROR(h.wait());
  return h.join_last_rank();
}

Status Runtime::remove_process_set(int process_set) {
  if (process_set == kGlobalProcessSet) {
    return Status::InvalidArgument("the global process set cannot be removed");
  }
  if (process_set < 0) {
    return Status::InvalidArgument("process set " + std::to_string(process_set) +
                                   " is not registered");
  }
  return impl_->Submit({ProcessSetOp({}, process_set)}).wait();
}

std::vector<int> Runtime::process_set_ids() const {
  auto sets = impl_->process_sets();
  return sets ? sets->Ids() : std::vector<int>{};
}

std::vector<int> Runtime::process_set_ranks(int process_set) const {
  auto sets = impl_->process_sets();
  if (!sets) return {};
  auto set = sets->Find(process_set);
  return set ? set->ranks : std::vector<int>{};
}

int Runtime::process_set_rank(int process_set) const {
  auto sets = impl_->process_sets();
  if (!sets) return -1;
  auto set = sets->Find(process_set);
  return set ? set->rank : -1;
}

int Runtime::process_set_size(int process_set) const {
  auto sets = impl_->process_sets();
  if (!sets) return -1;
  auto set = sets->Find(process_set);
  return set ? static_cast<int>(set->ranks.size()) : -1;
}

}  // namespace khorovod
