// OpTypeName: see common/op_type.h.
#include "common/op_type.h"

namespace khorovod {

std::string_view OpTypeName(OpType op) {
  switch (op) {
    case OpType::kAllreduce:
      return "allreduce";
    case OpType::kAllgather:
      return "allgather";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kAlltoall:
      return "alltoall";
    case OpType::kReducescatter:
      return "reducescatter";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kJoin:
      return "join";
    case OpType::kProcessSet:
      return "process set";
  }
  return "invalid";
}

}  // namespace khorovod
