// Runtime's collectives: every argument is checked on the caller's thread,
// then the operation is handed to the session (RuntimeImpl::Submit); a
// rejected call returns a handle that already failed.
#include <string>
#include <vector>

#include "common/enforce.h"
#include "common/waiter_signal.h"
#include "core/adasum.h"
#include "core/runtime_impl.h"
#include "core/tensor_queue.h"
#include "khorovod/runtime.h"

namespace khorovod {
namespace {

constexpr const char* kReservedPrefix = "khorovod.";

// Device tensors are checked against the session's pinned device in
// RuntimeImpl::Submit; here only what needs no session.
Status CheckView(const TensorView& t, const char* what) {
  if (t.device.kind != DeviceKind::kCPU && t.device.kind != DeviceKind::kCUDA) {
    return Status::InvalidArgument(std::string(what) + ": unknown device kind");
  }
  for (int64_t d : t.shape) {
    if (d < 0)
      return Status::InvalidArgument(std::string(what) + ": negative dimension in shape " +
                                     ShapeToString(t.shape));
  }
  if (t.num_bytes() > 0 && t.data == nullptr) {
    return Status::InvalidArgument(std::string(what) + ": null data for a non-empty tensor");
  }
  return Status::Ok();
}

Status CheckName(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("tensor name must not be empty");
  if (name.rfind(kReservedPrefix, 0) == 0) {
    return Status::InvalidArgument("tensor names starting with '" + std::string(kReservedPrefix) +
                                   "' are reserved");
  }
  return Status::Ok();
}

Handle Rejected(const Status& s) { return Handle(Completion::Failed(s)); }

// A blocking collective counts its thread as a waiter from before it
// submits until it returns: the background thread then starts the round on
// its first look instead of waiting for a burst of submissions to end
// (common/waiter_signal.h).
class BlockingCall {
 public:
  explicit BlockingCall(const RuntimeImpl& impl)
      : waiters_(impl.waiters()), count_(waiters_.get()) {}

 private:
  std::shared_ptr<WaiterBoard> waiters_;  // outlives count_
  WaiterCount count_;
};

PendingOp MakeOp(OpType type, const std::string& name, const TensorView& input) {
  PendingOp op;
  op.request.op = type;
  op.request.name = name;
  op.request.dtype = input.dtype;
  op.request.device = input.device;
  op.request.shape = input.shape;
  op.input = input;
  return op;
}

// Adasum runs in the global set, for 16/32/64-bit floats (host tensors:
// core/adasum.h, device tensors: core/device_adasum.h); the power-of-two
// sizes are checked where it runs, since an elastic world may change size
// before then.
Status CheckAdasum(const std::string& name, const TensorView& in, const AllreduceOptions& opts) {
  if (opts.op != ReduceOp::kAdasum) return Status::Ok();
  if (opts.process_set != 0) {
    return Status::InvalidArgument("allreduce '" + name +
                                   "': Adasum does not support non-global process sets yet");
  }
  if (!AdasumSupports(in.dtype)) {
    return Status::InvalidArgument("allreduce '" + name +
                                   "': Adasum supports float16, float32 and float64, not " +
                                   std::string(DataTypeName(in.dtype)));
  }
  return Status::Ok();
}

Status CheckAllreduce(const std::string& name, const TensorView& in, const TensorView& out,
                      const AllreduceOptions& opts) {
  KH_RETURN_IF_ERROR(CheckName(name));
  KH_RETURN_IF_ERROR(CheckView(in, "allreduce input"));
  KH_RETURN_IF_ERROR(CheckView(out, "allreduce output"));
  if (in.dtype != out.dtype || in.num_elements() != out.num_elements()) {
    return Status::InvalidArgument("allreduce '" + name + "': output " +
                                   std::string(DataTypeName(out.dtype)) + ShapeToString(out.shape) +
                                   " does not match input " + std::string(DataTypeName(in.dtype)) +
                                   ShapeToString(in.shape));
  }
  if (opts.prescale_factor != opts.prescale_factor ||
      opts.postscale_factor != opts.postscale_factor) {
    return Status::InvalidArgument("allreduce '" + name + "': scale factors must not be NaN");
  }
  return CheckAdasum(name, in, opts);
}

PendingOp MakeAllreduce(const std::string& name, const TensorView& in, const TensorView& out,
                        const AllreduceOptions& opts) {
  PendingOp op = MakeOp(OpType::kAllreduce, name, in);
  op.output = out;
  op.request.reduce_op = opts.op;
  op.request.prescale = opts.prescale_factor;
  op.request.postscale = opts.postscale_factor;
  op.request.process_set = opts.process_set;
  return op;
}

}  // namespace

Handle Runtime::allreduce_async(const std::string& name, const TensorView& input,
                                const TensorView& output, const AllreduceOptions& options) {
  if (Status s = CheckAllreduce(name, input, output, options); !s.ok()) return Rejected(s);
  return impl_->Submit({MakeAllreduce(name, input, output, options)});
}

Handle Runtime::grouped_allreduce_async(const std::vector<std::string>& names,
                                        const std::vector<TensorView>& inputs,
                                        const std::vector<TensorView>& outputs,
                                        const AllreduceOptions& options) {
  if (names.empty() || names.size() != inputs.size() || names.size() != outputs.size()) {
    return Rejected(Status::InvalidArgument(
        "grouped_allreduce needs the same, non-zero number of names, inputs and outputs"));
  }
  std::vector<PendingOp> ops;
  const std::string group = names.front() + "#group" + std::to_string(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (Status s = CheckAllreduce(names[i], inputs[i], outputs[i], options); !s.ok())
      return Rejected(s);
    ops.push_back(MakeAllreduce(names[i], inputs[i], outputs[i], options));
    ops.back().request.group = group;
    ops.back().request.group_size = static_cast<int32_t>(names.size());
  }
  return impl_->Submit(std::move(ops));
}

Handle Runtime::allgather_async(const std::string& name, const TensorView& input,
                                const AllgatherOptions& options) {
  if (Status s = CheckName(name); !s.ok()) return Rejected(s);
  if (Status s = CheckView(input, "allgather input"); !s.ok()) return Rejected(s);
  if (input.shape.empty())
    return Rejected(
        Status::InvalidArgument("allgather '" + name + "': needs at least one dimension"));
  PendingOp op = MakeOp(OpType::kAllgather, name, input);
  op.request.process_set = options.process_set;
  return impl_->Submit({std::move(op)});
}

Handle Runtime::broadcast_async(const std::string& name, const TensorView& buffer,
                                const BroadcastOptions& options) {
  if (Status s = CheckName(name); !s.ok()) return Rejected(s);
  if (Status s = CheckView(buffer, "broadcast buffer"); !s.ok()) return Rejected(s);
  if (Status s = impl_->CheckRoot(options.root_rank); !s.ok()) return Rejected(s);
  PendingOp op = MakeOp(OpType::kBroadcast, name, buffer);
  op.request.root = options.root_rank;
  op.request.process_set = options.process_set;
  return impl_->Submit({std::move(op)});
}

Handle Runtime::alltoall_async(const std::string& name, const TensorView& input,
                               const AlltoallOptions& options) {
  if (Status s = CheckName(name); !s.ok()) return Rejected(s);
  if (Status s = CheckView(input, "alltoall input"); !s.ok()) return Rejected(s);
  if (input.shape.empty())
    return Rejected(
        Status::InvalidArgument("alltoall '" + name + "': needs at least one dimension"));
  const int world = options.process_set == 0 ? size() : process_set_size(options.process_set);
  if (world > 0) {
    if (options.splits.empty()) {
      if (input.shape[0] % world != 0) {
        return Rejected(Status::InvalidArgument(
            "alltoall '" + name + "': first dimension " + std::to_string(input.shape[0]) +
            " is not divisible by the world size " + std::to_string(world) + "; pass splits"));
      }
    } else {
      int64_t sum = 0;
      for (int64_t v : options.splits) {
        if (v < 0)
          return Rejected(Status::InvalidArgument("alltoall '" + name + "': negative split"));
        sum += v;
      }
      if (static_cast<int>(options.splits.size()) != world || sum != input.shape[0]) {
        return Rejected(Status::InvalidArgument(
            "alltoall '" + name + "': splits must have one entry per rank (" +
            std::to_string(world) + ") summing to the first dimension " +
            std::to_string(input.shape[0])));
      }
    }
  }
  PendingOp op = MakeOp(OpType::kAlltoall, name, input);
  op.request.splits = options.splits;
  op.request.process_set = options.process_set;
  return impl_->Submit({std::move(op)});
}

Handle Runtime::reducescatter_async(const std::string& name, const TensorView& input,
                                    const ReducescatterOptions& options) {
  if (Status s = CheckName(name); !s.ok()) return Rejected(s);
  if (Status s = CheckView(input, "reducescatter input"); !s.ok()) return Rejected(s);
  if (input.shape.empty())
    return Rejected(
        Status::InvalidArgument("reducescatter '" + name + "': needs at least one dimension"));
  if (options.op == ReduceOp::kAdasum) {
    return Rejected(Status::InvalidArgument("reducescatter '" + name +
                                            "': Adasum is not supported for reducescatter"));
  }
  PendingOp op = MakeOp(OpType::kReducescatter, name, input);
  op.request.reduce_op = options.op;
  op.request.prescale = options.prescale_factor;
  op.request.postscale = options.postscale_factor;
  op.request.process_set = options.process_set;
  return impl_->Submit({std::move(op)});
}

Status Runtime::allreduce(const std::string& name, const TensorView& input,
                          const TensorView& output, const AllreduceOptions& options) {
  BlockingCall blocking(*impl_);
  return allreduce_async(name, input, output, options).wait();
}

Status Runtime::grouped_allreduce(const std::vector<std::string>& names,
                                  const std::vector<TensorView>& inputs,
                                  const std::vector<TensorView>& outputs,
                                  const AllreduceOptions& options) {
  BlockingCall blocking(*impl_);
  return grouped_allreduce_async(names, inputs, outputs, options).wait();
}

Status Runtime::allgather(const std::string& name, const TensorView& input, Tensor* output,
                          const AllgatherOptions& options) {
  BlockingCall blocking(*impl_);
  Handle h = allgather_async(name, input, options);
  KH_RETURN_IF_ERROR(h.wait());
  if (output) *output = h.take_output();
  return Status::Ok();
}

Status Runtime::broadcast(const std::string& name, const TensorView& buffer,
                          const BroadcastOptions& options) {
  BlockingCall blocking(*impl_);
  return broadcast_async(name, buffer, options).wait();
}

Status Runtime::alltoall(const std::string& name, const TensorView& input, Tensor* output,
                         std::vector<int64_t>* received_splits, const AlltoallOptions& options) {
  BlockingCall blocking(*impl_);
  Handle h = alltoall_async(name, input, options);
  KH_RETURN_IF_ERROR(h.wait());
  if (output) *output = h.take_output();
  if (received_splits) *received_splits = h.received_splits();
  return Status::Ok();
}

Status Runtime::reducescatter(const std::string& name, const TensorView& input, Tensor* output,
                              const ReducescatterOptions& options) {
  BlockingCall blocking(*impl_);
  Handle h = reducescatter_async(name, input, options);
  KH_RETURN_IF_ERROR(h.wait());
  if (output) *output = h.take_output();
  return Status::Ok();
}

Handle Runtime::barrier_async(int process_set) {
  PendingOp op;
  op.request.op = OpType::kBarrier;
  op.request.name = "khorovod.barrier";
  op.request.shape = {0};
  op.request.process_set = process_set;
  return impl_->Submit({std::move(op)});
}

Status Runtime::barrier(int process_set) { return barrier_async(process_set).wait(); }

Handle Runtime::join_async() {
  PendingOp op;
  op.request.op = OpType::kJoin;
  op.request.name = "khorovod.join";
  op.request.shape = {0};
  return impl_->Submit({std::move(op)});
}

Status Runtime::join(int* last_rank) {
  Handle h = join_async();
  KH_RETURN_IF_ERROR(h.wait());
  if (last_rank) *last_rank = h.join_last_rank();
  return Status::Ok();
}

}  // namespace khorovod
