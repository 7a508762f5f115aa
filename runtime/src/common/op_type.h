// OpType: the kinds of collective operation, named on the wire (the
// negotiation protocol, core/message.h), in the worker metrics' "op" label
// (observability/worker_metrics.h) and in error messages (OpTypeName).
//
// Thread-safety: plain values and a pure function.
#pragma once

#include <cstdint>
#include <string_view>

namespace khorovod {

// Values are part of the wire protocol; append only.
enum class OpType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  // Registers (splits = member ranks) or removes (root = id) a process set;
  // always in the global set (core/process_set_table.h).
  kProcessSet = 7,
};

std::string_view OpTypeName(OpType op);

}  // namespace khorovod
