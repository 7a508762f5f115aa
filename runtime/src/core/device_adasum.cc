#include "core/device_adasum.h"

#include <string>

#include "common/reduce_kernels.h"
#include "core/adasum.h"

namespace khorovod {
namespace {

// The ranks each host holds, summed over the job; the divisor when every
// host holds the same number, else a refusal every rank reaches alike.
StatusOr<int> RanksPerHost(Backend& host, const Placement& placement) {
  std::vector<double> ranks(static_cast<size_t>(placement.cross_size), 0.0);
  ranks[static_cast<size_t>(placement.cross_rank)] = 1.0;
  KH_RETURN_IF_ERROR(
      host.Allreduce(ranks.data(), ranks.data(), ranks.size(), DataType::kFloat64, ReduceOp::kSum));
  for (double n : ranks) {
    if (n != ranks.front()) {
      return Status::InvalidArgument(
          "Running GPU Adasum on heterogeneous cluster is not supported yet (hosts hold " +
          std::to_string(static_cast<int>(n)) + " and " +
          std::to_string(static_cast<int>(ranks.front())) + " ranks)");
    }
  }
  return static_cast<int>(ranks.front());
}

Status CheckShape(const Response& response, const Placement& placement) {
  if (placement.cross_size < 1 || !PowerOfTwo(static_cast<size_t>(placement.cross_size))) {
    return Status::InvalidArgument(
        "Running GPU Adasum with non-power of 2 nodes is not supported yet (" +
        std::to_string(placement.cross_size) + " hosts)");
  }
  if (!AdasumSupports(response.dtype)) {
    return Status::InvalidArgument("Adasum supports float16, float32 and float64, not " +
                                   std::string(DataTypeName(response.dtype)));
  }
  return Status::Ok();
}

}  // namespace

Status DeviceAdasum(DeviceOps& device, Backend& host, const Placement& placement,
                    const Response& response, const std::optional<PendingOp>& op,
                    std::vector<std::byte>& scratch) {
  KH_RETURN_IF_ERROR(CheckShape(response, placement));
  StatusOr<int> per_host = RanksPerHost(host, placement);
  if (!per_host.ok()) return per_host.status();

  const size_t count = static_cast<size_t>(response.total_elements());
  const size_t bytes = count * DataTypeSize(response.dtype);
  const auto hosts = static_cast<size_t>(placement.cross_size);
  scratch.assign(hosts * bytes, std::byte{0});
  std::byte* mine = scratch.data() + static_cast<size_t>(placement.cross_rank) * bytes;
  if (op && bytes) {
    KH_RETURN_IF_ERROR(device.ToHost(mine, op->input.data, bytes));
    Scale(mine, count, response.dtype, response.prescale);
  }
  KH_RETURN_IF_ERROR(host.Allreduce(scratch.data(), scratch.data(), hosts * count, response.dtype,
                                    ReduceOp::kSum));
  if (count) {
    std::vector<void*> sums(hosts);
    for (size_t h = 0; h < hosts; ++h) sums[h] = scratch.data() + h * bytes;
    AdasumTree(sums, count, response.dtype);
  }
  Divide(scratch.data(), count, response.dtype, *per_host);
  Scale(scratch.data(), count, response.dtype, response.postscale);
  if (op && bytes) KH_RETURN_IF_ERROR(device.ToDevice(op->output.data, scratch.data(), bytes));
  return device.Flush();
}

}  // namespace khorovod
