// The CPU kernels of khorovod's TensorFlow collectives (op_defs.cc): each is
// an AsyncOpKernel that hands its input and output buffers to the runtime
// (no copy through Python or numpy) and completes from the runtime's
// background thread when the operation's Handle is done. TensorFlow keeps
// the inputs, and the outputs allocated before submission, alive until
// done() runs, which is the lifetime the runtime asks for. Variable-size
// results (allgather, alltoall, reducescatter) are allocated when the
// runtime has produced them and copied in once.
//
// Thread-safety: TensorFlow may run several instances of a kernel at once;
// kernels keep no mutable state of their own.
#include <cstring>
#include <string>
#include <vector>

#include "kernel_support.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace khorovod::tensorflow_ops {
namespace {

namespace tf = ::tensorflow;

// Copies the runtime's result tensor into a new output `index`.
absl::Status EmitOutput(tf::OpKernelContext* ctx, int index, const Tensor& result) {
  tf::Tensor* out = nullptr;
  TF_RETURN_IF_ERROR(ctx->allocate_output(index, ToShape(result.shape), &out));
  if (result.num_bytes() > 0)
    std::memcpy(const_cast<char*>(out->tensor_data().data()), result.data(), result.num_bytes());
  return absl::OkStatus();
}

class AllreduceOp : public tf::AsyncOpKernel {
 public:
  explicit AllreduceOp(tf::OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, attrs_.Read(ctx, *this));
    OP_REQUIRES_OK(ctx, reduce_.Read(ctx));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const tf::Tensor& input = ctx->input(0);
    tf::Tensor* output = nullptr;
    TensorView in, out;
    OP_REQUIRES_OK_ASYNC(ctx, MakeView(input, &in), done);
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, input.shape(), &output), done);
    OP_REQUIRES_OK_ASYNC(ctx, MakeView(*output, &out), done);
    const AllreduceOptions options{reduce_.op, reduce_.prescale, reduce_.postscale,
                                   attrs_.process_set};
    RunAsync(
        ctx, std::move(done),
        [&](Runtime& rt) { return rt.allreduce_async(attrs_.name, in, out, options); },
        [](const Handle&) { return absl::OkStatus(); });
  }

 private:
  CollectiveAttrs attrs_;
  ReduceAttrs reduce_;
};

class GroupedAllreduceOp : public tf::AsyncOpKernel {
 public:
  explicit GroupedAllreduceOp(tf::OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, attrs_.Read(ctx, *this));
    OP_REQUIRES_OK(ctx, reduce_.Read(ctx));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    std::vector<std::string> names;
    std::vector<TensorView> ins(n), outs(n);
    for (int i = 0; i < n; ++i) {
      tf::Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, MakeView(ctx->input(i), &ins[i]), done);
      OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(i, ctx->input(i).shape(), &output), done);
      OP_REQUIRES_OK_ASYNC(ctx, MakeView(*output, &outs[i]), done);
      names.push_back(attrs_.name + "." + std::to_string(i));
    }
    const AllreduceOptions options{reduce_.op, reduce_.prescale, reduce_.postscale,
                                   attrs_.process_set};
    RunAsync(
        ctx, std::move(done),
        [&](Runtime& rt) { return rt.grouped_allreduce_async(names, ins, outs, options); },
        [](const Handle&) { return absl::OkStatus(); });
  }

 private:
  CollectiveAttrs attrs_;
  ReduceAttrs reduce_;
};

class AllgatherOp : public tf::AsyncOpKernel {
 public:
  explicit AllgatherOp(tf::OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, attrs_.Read(ctx, *this));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    TensorView in;
    OP_REQUIRES_OK_ASYNC(ctx, MakeView(ctx->input(0), &in, /*moves_only=*/true), done);
    OP_REQUIRES_ASYNC(
        ctx, !in.shape.empty(),
        absl::InvalidArgumentError("khorovod: allgather needs a tensor of rank 1 or more"), done);
    RunAsync(
        ctx, std::move(done),
        [&](Runtime& rt) { return rt.allgather_async(attrs_.name, in, {attrs_.process_set}); },
        [ctx](const Handle& h) { return EmitOutput(ctx, 0, h.take_output()); });
  }

 private:
  CollectiveAttrs attrs_;
};

class BroadcastOp : public tf::AsyncOpKernel {
 public:
  explicit BroadcastOp(tf::OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, attrs_.Read(ctx, *this));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("root_rank", &root_rank_));
  }

  // The runtime broadcasts in place: into the output, filled with the input
  // first (the root's value is its own input).
  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const tf::Tensor& input = ctx->input(0);
    tf::Tensor* output = nullptr;
    TensorView buffer;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, input.shape(), &output), done);
    if (input.TotalBytes() > 0) {
      std::memcpy(const_cast<char*>(output->tensor_data().data()), input.tensor_data().data(),
                  input.tensor_data().size());
    }
    OP_REQUIRES_OK_ASYNC(ctx, MakeView(*output, &buffer, /*moves_only=*/true), done);
    const BroadcastOptions options{static_cast<int>(root_rank_), attrs_.process_set};
    RunAsync(
        ctx, std::move(done),
        [&](Runtime& rt) { return rt.broadcast_async(attrs_.name, buffer, options); },
        [](const Handle&) { return absl::OkStatus(); });
  }

 private:
  CollectiveAttrs attrs_;
  int64_t root_rank_ = 0;
};

class AlltoallOp : public tf::AsyncOpKernel {
 public:
  explicit AlltoallOp(tf::OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, attrs_.Read(ctx, *this));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    TensorView in;
    OP_REQUIRES_OK_ASYNC(ctx, MakeView(ctx->input(0), &in, /*moves_only=*/true), done);
    OP_REQUIRES_ASYNC(
        ctx, !in.shape.empty(),
        absl::InvalidArgumentError("khorovod: alltoall needs a tensor of rank 1 or more"), done);
    const tf::Tensor& splits_in = ctx->input(1);
    OP_REQUIRES_ASYNC(ctx, splits_in.dims() == 1,
                      absl::InvalidArgumentError("khorovod: alltoall splits must be a vector"),
                      done);
    AlltoallOptions options;
    options.process_set = attrs_.process_set;
    const auto flat = splits_in.flat<int32_t>();
    for (int64_t i = 0; i < flat.size(); ++i) options.splits.push_back(flat(i));
    RunAsync(
        ctx, std::move(done),
        [&](Runtime& rt) { return rt.alltoall_async(attrs_.name, in, options); },
        [ctx](const Handle& h) -> absl::Status {
          TF_RETURN_IF_ERROR(EmitOutput(ctx, 0, h.take_output()));
          const std::vector<int64_t> received = h.received_splits();
          tf::Tensor* out = nullptr;
          TF_RETURN_IF_ERROR(ctx->allocate_output(
              1, tf::TensorShape({static_cast<int64_t>(received.size())}), &out));
          auto flat_out = out->flat<int32_t>();
          for (size_t i = 0; i < received.size(); ++i)
            flat_out(i) = static_cast<int32_t>(received[i]);
          return absl::OkStatus();
        });
  }

 private:
  CollectiveAttrs attrs_;
};

class ReducescatterOp : public tf::AsyncOpKernel {
 public:
  explicit ReducescatterOp(tf::OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, attrs_.Read(ctx, *this));
    OP_REQUIRES_OK(ctx, reduce_.Read(ctx));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    TensorView in;
    OP_REQUIRES_OK_ASYNC(ctx, MakeView(ctx->input(0), &in), done);
    OP_REQUIRES_ASYNC(
        ctx, !in.shape.empty(),
        absl::InvalidArgumentError("khorovod: reducescatter needs a tensor of rank 1 or more"),
        done);
    const ReducescatterOptions options{reduce_.op, reduce_.prescale, reduce_.postscale,
                                       attrs_.process_set};
    RunAsync(
        ctx, std::move(done),
        [&](Runtime& rt) { return rt.reducescatter_async(attrs_.name, in, options); },
        [ctx](const Handle& h) { return EmitOutput(ctx, 0, h.take_output()); });
  }

 private:
  CollectiveAttrs attrs_;
  ReduceAttrs reduce_;
};

REGISTER_KERNEL_BUILDER(Name("KhorovodAllreduce").Device(tf::DEVICE_CPU), AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("KhorovodGroupedAllreduce").Device(tf::DEVICE_CPU),
                        GroupedAllreduceOp);
REGISTER_KERNEL_BUILDER(Name("KhorovodAllgather").Device(tf::DEVICE_CPU), AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("KhorovodBroadcast").Device(tf::DEVICE_CPU), BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("KhorovodAlltoall").Device(tf::DEVICE_CPU), AlltoallOp);
REGISTER_KERNEL_BUILDER(Name("KhorovodReducescatter").Device(tf::DEVICE_CPU), ReducescatterOp);

}  // namespace
}  // namespace khorovod::tensorflow_ops
