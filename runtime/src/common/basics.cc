// Definitions for the small value types of the public API: Status, DataType,
// ReduceOp and Shape helpers, and the invariant-violation thrower.
#include <sstream>

#include "common/enforce.h"
#include "khorovod/dtype.h"
#include "khorovod/ops.h"
#include "khorovod/status.h"
#include "khorovod/tensor.h"

namespace khorovod {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kMismatch:
      return "MISMATCH";
    case StatusCode::kStalled:
      return "STALLED";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kMembershipChanged:
      return "MEMBERSHIP_CHANGED";
    case StatusCode::kJobFinished:
      return "JOB_FINISHED";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt8:
      return 1;
    case DataType::kUInt8:
      return 1;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kInt16:
      return 2;
    case DataType::kBool:
      return 1;
  }
  return 0;
}

std::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kInt16:
      return "int16";
    case DataType::kBool:
      return "bool";
  }
  return "invalid";
}

bool IsValidDataType(uint8_t raw) { return raw <= static_cast<uint8_t>(DataType::kBool); }

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat64 ||
         dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
    case ReduceOp::kAdasum:
      return "adasum";
  }
  return "invalid";
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string DeviceName(const Device& device) {
  return device.kind == DeviceKind::kCPU ? std::string("cpu")
                                         : "cuda:" + std::to_string(device.index);
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

namespace detail {
void ThrowInvariantViolation(const char* file, int line, const char* condition,
                             const std::string& message) {
  std::ostringstream os;
  os << file << ':' << line << ": invariant violated: " << condition;
  if (!message.empty()) os << ": " << message;
  throw InvariantViolation(os.str());
}
}  // namespace detail

}  // namespace khorovod
