// Collective operations and one options struct per collective.
//
// Every field has a default that matches Horovod's behaviour, so `{}` is a
// valid options value for every call. Options must agree across ranks for the
// same tensor name; a disagreement is reported as StatusCode::kMismatch on
// every rank that submitted the tensor.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace khorovod {

// Values are part of the wire protocol; append only.
enum class ReduceOp : uint8_t {
  kSum = 0,
  kAverage = 1,  // sum, then divide by the world size (integers truncate toward zero)
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  // Horovod's Adasum (core/adasum.h): float16/32/64 host tensors in the
  // global set only, at a power-of-two world size; never fused.
  kAdasum = 5,
};

std::string_view ReduceOpName(ReduceOp op);

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kAverage;
  // Multiplies each rank's input before the reduction. Useful to avoid
  // overflow in low precision (e.g. 1/size with op = kSum).
  double prescale_factor = 1.0;
  // Multiplies the reduced result. Applied after kAverage's division.
  double postscale_factor = 1.0;
  // The ranks taking part (khorovod/process_set.h); 0: every rank.
  int process_set = 0;
};

struct BroadcastOptions {
  // Rank whose buffer is copied into every other rank's buffer (a global
  // rank, also with a process set).
  int root_rank = 0;
  int process_set = 0;
};

struct AllgatherOptions {
  // The first dimension may differ between ranks; all other dimensions and
  // the dtype must agree.
  int process_set = 0;
};

struct AlltoallOptions {
  // splits[r] = number of first-dimension rows this rank sends to rank r.
  // Empty means an equal split; then the first dimension must be divisible by
  // the world size.
  std::vector<int64_t> splits;
  int process_set = 0;
};

struct ReducescatterOptions {
  ReduceOp op = ReduceOp::kAverage;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  // The first dimension is split across ranks in rank order; when it is not
  // a multiple of the world size, the lowest ranks receive one extra row.
  int process_set = 0;
};

}  // namespace khorovod
