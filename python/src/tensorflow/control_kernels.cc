// The kernels of khorovod's TensorFlow control ops (op_defs.cc): join and
// barrier complete asynchronously from the runtime's Handle, like the
// collectives; KhorovodTopology answers rank/size queries when the op runs
// (a graph built elsewhere reads the topology of the process running it);
// KhorovodEndStep marks a training step (a no-op before init(), as a step
// that cannot be attributed to a job).
//
// Thread-safety: kernels keep no mutable state.
#include <string>

#include "kernel_support.h"
#include "runtime_slot.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace khorovod::tensorflow_ops {
namespace {

namespace tf = ::tensorflow;

class JoinOp : public tf::AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    RunAsync(
        ctx, std::move(done), [](Runtime& rt) { return rt.join_async(); },
        [ctx](const Handle& h) -> absl::Status {
          tf::Tensor* out = nullptr;
          TF_RETURN_IF_ERROR(ctx->allocate_output(0, tf::TensorShape({}), &out));
          out->scalar<int32_t>()() = h.join_last_rank();
          return absl::OkStatus();
        });
  }
};

class BarrierOp : public tf::AsyncOpKernel {
 public:
  explicit BarrierOp(tf::OpKernelConstruction* ctx) : AsyncOpKernel(ctx) {
    int64_t set = 0;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("process_set_id", &set));
    process_set_ = static_cast<int>(set);
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    RunAsync(
        ctx, std::move(done), [this](Runtime& rt) { return rt.barrier_async(process_set_); },
        [](const Handle&) { return absl::OkStatus(); });
  }

 private:
  int process_set_ = 0;
};

class TopologyOp : public tf::OpKernel {
 public:
  explicit TopologyOp(tf::OpKernelConstruction* ctx) : OpKernel(ctx) {
    int64_t set = 0;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("query", &query_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("process_set_id", &set));
    process_set_ = static_cast<int>(set);
  }

  void Compute(tf::OpKernelContext* ctx) override {
    int value = 0;
    {
      RuntimeSlot::Lease lease(RuntimeSlot::Instance());
      OP_REQUIRES(ctx, lease.runtime() != nullptr,
                  absl::FailedPreconditionError(
                      "khorovod has not been initialized; call hvd.init() first"));
      OP_REQUIRES_OK(ctx, Answer(*lease.runtime(), &value));
    }
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({}), &out));
    out->scalar<int32_t>()() = value;
  }

 private:
  absl::Status Answer(const Runtime& rt, int* value) const {
    if (query_ == "rank") {
      *value = rt.rank();
    } else if (query_ == "local_rank") {
      *value = rt.local_rank();
    } else if (query_ == "local_size") {
      *value = rt.local_size();
    } else if (query_ == "size") {
      *value = process_set_ == 0 ? rt.size() : rt.process_set_size(process_set_);
      if (*value < 0)
        return absl::InvalidArgumentError("khorovod: process set " + std::to_string(process_set_) +
                                          " is not registered");
    } else {  // process_set_included: 1, 0, or an error for an unknown set
      if (rt.process_set_size(process_set_) < 0) {
        return absl::InvalidArgumentError("khorovod: process set " + std::to_string(process_set_) +
                                          " is not registered");
      }
      *value = rt.process_set_rank(process_set_) >= 0 ? 1 : 0;
    }
    return absl::OkStatus();
  }

  std::string query_;
  int process_set_ = 0;
};

class EndStepOp : public tf::OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(tf::OpKernelContext* ctx) override {
    const tf::Tensor& samples = ctx->input(0);
    OP_REQUIRES(ctx, tf::TensorShapeUtils::IsScalar(samples.shape()),
                absl::InvalidArgumentError("khorovod: end_step takes a scalar sample count"));
    const int64_t n = samples.scalar<int64_t>()();
    OP_REQUIRES(ctx, n >= 0,
                absl::InvalidArgumentError("khorovod: end_step's sample count is negative"));
    RuntimeSlot::Lease lease(RuntimeSlot::Instance());
    if (lease.runtime() != nullptr) lease.runtime()->end_step(n);
  }
};

REGISTER_KERNEL_BUILDER(Name("KhorovodJoin").Device(tf::DEVICE_CPU), JoinOp);
REGISTER_KERNEL_BUILDER(Name("KhorovodBarrier").Device(tf::DEVICE_CPU), BarrierOp);
REGISTER_KERNEL_BUILDER(Name("KhorovodTopology").Device(tf::DEVICE_CPU), TopologyOp);
REGISTER_KERNEL_BUILDER(Name("KhorovodEndStep").Device(tf::DEVICE_CPU), EndStepOp);

}  // namespace
}  // namespace khorovod::tensorflow_ops
