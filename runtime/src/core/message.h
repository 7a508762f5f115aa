// Request and Response: the negotiation protocol between ranks.
//
// A Request says "this rank has submitted tensor `name` for operation `op`
// with these parameters". The coordinator (rank 0) collects Requests until
// every rank has submitted a name, checks that they agree, and answers with
// a Response that every rank executes in the same order. A Response names one
// or more tensors (several after fusion) or carries an error for them.
//
// The binary encoding is little-endian, length-prefixed and versioned by
// kProtocolVersion; Decode* validate every length and enum, so a corrupt or
// truncated message yields an error Status rather than undefined behaviour.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/op_type.h"
#include "khorovod/dtype.h"
#include "khorovod/ops.h"
#include "khorovod/status.h"
#include "khorovod/tensor.h"

namespace khorovod {

inline constexpr uint32_t kProtocolVersion = 2;

struct Request {
  int32_t rank = 0;
  OpType op = OpType::kAllreduce;
  std::string name;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t root = 0;
  Device device;
  Shape shape;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> splits;  // alltoall only
  std::string group;            // non-empty for grouped allreduce
  int32_t group_size = 0;
  int32_t process_set = 0;  // 0: the global set (every rank)

  // True when two requests for the same name describe the same operation
  // from the same rank's point of view (everything but `rank`).
  bool SameParameters(const Request& other) const;
};

struct Response {
  enum class Kind : uint8_t { kExecute = 0, kError = 1 };

  Kind kind = Kind::kExecute;
  OpType op = OpType::kAllreduce;
  std::vector<std::string> names;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t root = 0;
  Device device;
  double prescale = 1.0;
  double postscale = 1.0;
  // allreduce/broadcast: element count of each named tensor.
  // allgather: first-dimension rows of every rank, in rank order.
  // alltoall: size x size row counts, [sender * size + receiver].
  // reducescatter: one entry, the total number of rows.
  std::vector<int64_t> sizes;
  int64_t row_elements =
      0;  // elements per first-dimension row (allgather, alltoall, reducescatter)
  std::string group;
  int32_t group_size = 0;
  int32_t join_last_rank = -1;
  // The set whose members execute this response; the others skip it.
  // kProcessSet: the id of the set registered (or removed).
  int32_t process_set = 0;
  // kProcessSet registration: the member ranks, ascending.
  std::vector<int64_t> members;
  StatusCode error_code = StatusCode::kOk;
  std::string error_message;

  int64_t total_elements() const;  // allreduce: sum of sizes
};

std::string EncodeRequests(const std::vector<Request>& requests);
Status DecodeRequests(const std::string& bytes, std::vector<Request>* out);
std::string EncodeResponses(const std::vector<Response>& responses);
Status DecodeResponses(const std::string& bytes, std::vector<Response>* out);

}  // namespace khorovod
