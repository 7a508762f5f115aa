// What every khorovod TensorFlow kernel needs: TensorFlow tensors as the
// runtime's TensorViews, the runtime's Status as TensorFlow's, the name a
// collective negotiates under, and completion of an AsyncOpKernel from a
// Handle.
//
// Errors map as Horovod's kernels report them, so scripts written for
// Horovod catch the same tf.errors classes: a disagreement between ranks
// (MISMATCH) and a call the runtime cannot serve (FAILED_PRECONDITION) are
// FailedPreconditionError; refused arguments InvalidArgumentError; a broken
// peer or a re-forming job (UNAVAILABLE, ABORTED) UnknownError, whose
// message starts with "khorovod <CODE>:" so khorovod.tensorflow.elastic can
// tell it from others.
//
// Thread-safety: free functions over values.
#pragma once

#include <string>

#include "khorovod/runtime.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace khorovod::tensorflow_ops {

// khorovod's DataType for a TensorFlow dtype; false when it has none.
bool ToDataType(::tensorflow::DataType dtype, DataType* out);

// A view over a host tensor's buffer (the kernel keeps the tensor alive).
// `moves_only`: the collective copies bytes and never reduces them
// (allgather, broadcast, alltoall), so uint16 is accepted as int16.
absl::Status MakeView(const ::tensorflow::Tensor& tensor, TensorView* view,
                      bool moves_only = false);

::tensorflow::TensorShape ToShape(const Shape& shape);

absl::Status ToTfStatus(const Status& status);

// The runtime's name for this kernel's tensor: attr tensor_name when set,
// else the node name, without its name scope when ignore_name_scope.
std::string TensorName(const ::tensorflow::OpKernel& kernel, const std::string& tensor_name,
                       bool ignore_name_scope);

// Attributes every collective has (see op_defs.cc).
struct CollectiveAttrs {
  std::string name;
  int process_set = 0;
  absl::Status Read(::tensorflow::OpKernelConstruction* ctx, const ::tensorflow::OpKernel& kernel);
};

// Reduction attributes (allreduce, grouped allreduce, reducescatter).
struct ReduceAttrs {
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  absl::Status Read(::tensorflow::OpKernelConstruction* ctx);
};

// Calls `submit(runtime)` with the attached Runtime held (RuntimeSlot), or
// fails the kernel when khorovod is not initialized; then completes the
// kernel when the returned Handle is done: `finish(handle)` (may allocate
// outputs) runs first when the operation succeeded. `done` is called
// exactly once.
template <typename Submit, typename Finish>
void RunAsync(::tensorflow::OpKernelContext* ctx, ::tensorflow::AsyncOpKernel::DoneCallback done,
              Submit submit, Finish finish);

}  // namespace khorovod::tensorflow_ops

#include "kernel_support_inl.h"
