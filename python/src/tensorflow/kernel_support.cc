#include "kernel_support.h"

#include <cstdint>

namespace khorovod::tensorflow_ops {

namespace tf = ::tensorflow;

bool ToDataType(tf::DataType dtype, DataType* out) {
  switch (dtype) {
    case tf::DT_FLOAT:
      *out = DataType::kFloat32;
      return true;
    case tf::DT_DOUBLE:
      *out = DataType::kFloat64;
      return true;
    case tf::DT_HALF:
      *out = DataType::kFloat16;
      return true;
    case tf::DT_BFLOAT16:
      *out = DataType::kBFloat16;
      return true;
    case tf::DT_INT8:
      *out = DataType::kInt8;
      return true;
    case tf::DT_UINT8:
      *out = DataType::kUInt8;
      return true;
    case tf::DT_INT16:
      *out = DataType::kInt16;
      return true;
    case tf::DT_INT32:
      *out = DataType::kInt32;
      return true;
    case tf::DT_INT64:
      *out = DataType::kInt64;
      return true;
    case tf::DT_BOOL:
      *out = DataType::kBool;
      return true;
    default:
      return false;
  }
}

absl::Status MakeView(const tf::Tensor& tensor, TensorView* view, bool moves_only) {
  if (moves_only && tensor.dtype() == tf::DT_UINT16) {
    view->dtype = DataType::kInt16;
  } else if (!ToDataType(tensor.dtype(), &view->dtype)) {
    return absl::InvalidArgumentError("khorovod: tensors of dtype " +
                                      tf::DataTypeString(tensor.dtype()) + " are not supported");
  }
  view->data = const_cast<char*>(tensor.tensor_data().data());
  view->shape.clear();
  for (int64_t d : tensor.shape().dim_sizes()) view->shape.push_back(d);
  view->device = {DeviceKind::kCPU, 0};
  return absl::OkStatus();
}

tf::TensorShape ToShape(const Shape& shape) {
  tf::TensorShape out;
  for (int64_t d : shape) out.AddDim(d);
  return out;
}

absl::Status ToTfStatus(const Status& status) {
  if (status.ok()) return absl::OkStatus();
  const std::string message =
      std::string("khorovod ") + StatusCodeName(status.code()) + ": " + status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kAlreadyExists:
      return absl::InvalidArgumentError(message);
    case StatusCode::kMismatch:
    case StatusCode::kFailedPrecondition:
      return absl::FailedPreconditionError(message);
    case StatusCode::kDeadlineExceeded:
      return absl::DeadlineExceededError(message);
    case StatusCode::kInternal:
      return absl::InternalError(message);
    default:
      return absl::UnknownError(message);  // UNAVAILABLE, ABORTED, elastic codes
  }
}

std::string TensorName(const tf::OpKernel& kernel, const std::string& tensor_name,
                       bool ignore_name_scope) {
  if (!tensor_name.empty()) return tensor_name;
  std::string name = kernel.name();
  if (ignore_name_scope) {
    const auto slash = name.rfind('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
  }
  return name;
}

absl::Status CollectiveAttrs::Read(tf::OpKernelConstruction* ctx, const tf::OpKernel& kernel) {
  std::string tensor_name;
  bool ignore_name_scope = false;
  int64_t set = 0;
  TF_RETURN_IF_ERROR(ctx->GetAttr("tensor_name", &tensor_name));
  TF_RETURN_IF_ERROR(ctx->GetAttr("ignore_name_scope", &ignore_name_scope));
  TF_RETURN_IF_ERROR(ctx->GetAttr("process_set_id", &set));
  name = TensorName(kernel, tensor_name, ignore_name_scope);
  process_set = static_cast<int>(set);
  return absl::OkStatus();
}

absl::Status ReduceAttrs::Read(tf::OpKernelConstruction* ctx) {
  int64_t raw_op = 0;
  float pre = 1.0f, post = 1.0f;
  TF_RETURN_IF_ERROR(ctx->GetAttr("reduce_op", &raw_op));
  TF_RETURN_IF_ERROR(ctx->GetAttr("prescale_factor", &pre));
  TF_RETURN_IF_ERROR(ctx->GetAttr("postscale_factor", &post));
  if (raw_op < 0 || raw_op > static_cast<int64_t>(ReduceOp::kAdasum)) {
    return absl::InvalidArgumentError("khorovod: unknown reduce op " + std::to_string(raw_op));
  }
  op = static_cast<ReduceOp>(raw_op);
  prescale = pre;
  postscale = post;
  return absl::OkStatus();
}

}  // namespace khorovod::tensorflow_ops
