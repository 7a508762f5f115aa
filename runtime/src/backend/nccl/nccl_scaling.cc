#include "backend/nccl/nccl_scaling.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/half.h"

namespace khorovod {
namespace {

bool IsInteger(DataType d) {
  return d == DataType::kInt8 || d == DataType::kUInt8 || d == DataType::kInt32 ||
         d == DataType::kInt64;
}

// The factor in the tensor's own type, as PreMulSum's host scalar wants it.
void EncodeScalar(DataType dtype, double factor, unsigned char* out) {
  auto put = [&](auto v) { std::memcpy(out, &v, sizeof v); };
  switch (dtype) {
    case DataType::kFloat32:
      return put(static_cast<float>(factor));
    case DataType::kFloat64:
      return put(factor);
    case DataType::kFloat16:
      return put(FloatToHalf(static_cast<float>(factor)));
    case DataType::kBFloat16:
      return put(FloatToBFloat16(static_cast<float>(factor)));
    case DataType::kInt8:
      return put(static_cast<int8_t>(factor));
    case DataType::kUInt8:
      return put(static_cast<uint8_t>(factor));
    case DataType::kInt32:
      return put(static_cast<int32_t>(factor));
    case DataType::kInt64:
      return put(static_cast<int64_t>(factor));
    case DataType::kInt16:
      return put(static_cast<int16_t>(factor));
    case DataType::kBool:
      return put(static_cast<bool>(factor));
  }
}

bool FitsInteger(DataType dtype, double f) {
  if (f != std::trunc(f)) return false;
  switch (dtype) {
    case DataType::kInt8:
      return f >= -128 && f <= 127;
    case DataType::kUInt8:
      return f >= 0 && f <= 255;
    case DataType::kInt32:
      return f >= std::numeric_limits<int32_t>::min() && f <= std::numeric_limits<int32_t>::max();
    default:
      return std::fabs(f) < 9.2e18;
  }
}

}  // namespace

StatusOr<ScaledRedOp> ScaledRedOp::Create(NcclComm& comm, DataType dtype, ReduceOp op,
                                          double prescale, double postscale, int size) {
  if (prescale == 1.0 && postscale == 1.0) {
    auto plain = ToNccl(op);
    if (!plain.ok()) return plain.status();
    return ScaledRedOp(&comm, *plain, false);
  }
  if (op != ReduceOp::kSum && op != ReduceOp::kAverage) {
    return Status::InvalidArgument("the nccl backend scales only sum and average reductions, not " +
                                   std::string(ReduceOpName(op)) +
                                   "; use KHOROVOD_GPU_OPERATIONS=staging");
  }
  double factor = prescale * postscale;
  if (op == ReduceOp::kAverage) {
    if (IsInteger(dtype)) {
      return Status::InvalidArgument(
          "the nccl backend cannot scale an integer average; use op=sum with "
          "whole-number factors, or KHOROVOD_GPU_OPERATIONS=staging");
    }
    factor /= size;
  }
  if (IsInteger(dtype) && !FitsInteger(dtype, factor)) {
    return Status::InvalidArgument(
        "the nccl backend scales integer tensors only by whole numbers (got " +
        std::to_string(factor) + "); use KHOROVOD_GPU_OPERATIONS=staging");
  }
  auto type = ToNccl(dtype);
  if (!type.ok()) return type.status();
  alignas(8) unsigned char scalar[8] = {};
  EncodeScalar(dtype, factor, scalar);
  ncclRedOp_t red;
  KH_RETURN_IF_ERROR(comm.Check(
      comm.lib().RedOpCreatePreMulSum(&red, scalar, *type, ncclScalarHostImmediate, comm.get()),
      "ncclRedOpCreatePreMulSum"));
  return ScaledRedOp(&comm, red, true);
}

ScaledRedOp::ScaledRedOp(ScaledRedOp&& other) noexcept
    : comm_(other.comm_), op_(other.op_), owned_(other.owned_) {
  other.owned_ = false;
}

ScaledRedOp::~ScaledRedOp() {
  if (owned_ && !comm_->broken()) (void)comm_->lib().RedOpDestroy(op_, comm_->get());
}

}  // namespace khorovod
