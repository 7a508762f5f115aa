#include "core/eager_allreduce.h"

#include <cstring>
#include <string>

#include "common/reduce_kernels.h"

namespace khorovod {
namespace {

size_t WordsFor(size_t bytes) { return (bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t); }

size_t ResponseBytes(const Response& r) {
  return static_cast<size_t>(r.total_elements()) * DataTypeSize(r.dtype);
}

}  // namespace

bool EagerEligible(const Response& r) {
  return r.kind == Response::Kind::kExecute && r.op == OpType::kAllreduce && r.group_size <= 1 &&
         r.reduce_op != ReduceOp::kAdasum &&  // not element-wise: core/adasum.h
         r.names.size() == 1 && r.device.kind == DeviceKind::kCPU &&
         1 + WordsFor(ResponseBytes(r)) <= kEagerPayloadWords - 1;
}

bool EagerPayloadWriter::Append(uint32_t slot, const PendingOp& op, const Response& response) {
  const size_t bytes = ResponseBytes(response);
  if (op.input.device.kind != DeviceKind::kCPU || op.output.device.kind != DeviceKind::kCPU ||
      op.input.num_bytes() != bytes || op.input.dtype != response.dtype) {
    return false;
  }
  const size_t words = 1 + WordsFor(bytes);
  if (1 + used_ + words > kEagerPayloadWords) return false;
  uint64_t* entry = block_ + 1 + used_;
  entry[0] = (uint64_t{slot} << 32) | bytes;
  auto* data = reinterpret_cast<std::byte*>(entry + 1);
  if (bytes) std::memcpy(data, op.input.data, bytes);
  Scale(data, static_cast<size_t>(response.total_elements()), response.dtype, response.prescale);
  used_ += words;
  block_[0] = used_;
  return true;
}

Status ParseEagerPayload(const uint64_t* block, int rank, EagerEntries* out) {
  out->clear();
  const uint64_t used = block[0];
  auto malformed = [&](const std::string& why) {
    return Status::Internal("rank " + std::to_string(rank) + " sent a malformed eager payload (" +
                            why + "); are all ranks running the same khorovod?");
  };
  if (used > kEagerPayloadWords - 1) return malformed("length " + std::to_string(used));
  size_t at = 0;
  while (at < used) {
    const uint64_t header = block[1 + at];
    const auto slot = static_cast<uint32_t>(header >> 32);
    const size_t bytes = header & 0xffffffffu;
    const size_t words = 1 + WordsFor(bytes);
    if (at + words > used) return malformed("entry for slot " + std::to_string(slot) + " overruns");
    (*out)[slot] = {reinterpret_cast<const std::byte*>(block + 1 + at + 1), bytes};
    at += words;
  }
  return Status::Ok();
}

void ReduceEager(const Response& r, const std::vector<const std::byte*>& contributions, void* out) {
  const size_t count = static_cast<size_t>(r.total_elements());
  const size_t bytes = count * DataTypeSize(r.dtype);
  if (bytes) std::memcpy(out, contributions.front(), bytes);
  const ReduceFn reduce = GetReduceFn(r.dtype, r.reduce_op);
  for (size_t i = 1; i < contributions.size(); ++i) reduce(out, out, contributions[i], count);
  if (r.reduce_op == ReduceOp::kAverage)
    Divide(out, count, r.dtype, static_cast<int64_t>(contributions.size()));
  Scale(out, count, r.dtype, r.postscale);
}

}  // namespace khorovod
