// ScaledRedOp: the NCCL reduction for an allreduce with pre/post scaling.
//
// There is no kernel for scaling device memory in khorovod (the build has
// no nvcc), so scaling is folded into the reduction itself:
//   post * reduce(pre * x_r)  =  sum_r (pre * post [/ size]) * x_r
// for kSum and kAverage, which is ncclRedOpCreatePreMulSum with one
// factor. Without scaling the plain op is used (kAverage is ncclAvg). The
// folded product rounds differently from scaling twice (within a few ulp
// for floating types). Refused with kInvalidArgument, before any NCCL call
// and so alike on every rank: scaling with min/max/product (no single
// factor exists), and an integer dtype whose combined factor is not a whole
// number (PreMulSum's scalar has the tensor's type). The staging backend
// computes all of these.
//
// Thread-safety: one thread at a time, like the communicator.
#pragma once

#include "backend/nccl/nccl_api.h"
#include "backend/nccl/nccl_comm.h"

namespace khorovod {

class ScaledRedOp {
 public:
  static StatusOr<ScaledRedOp> Create(NcclComm& comm, DataType dtype, ReduceOp op, double prescale,
                                      double postscale, int size);
  ~ScaledRedOp();
  ScaledRedOp(ScaledRedOp&& other) noexcept;
  ScaledRedOp& operator=(ScaledRedOp&&) = delete;
  ScaledRedOp(const ScaledRedOp&) = delete;

  ncclRedOp_t get() const { return op_; }

 private:
  ScaledRedOp(NcclComm* comm, ncclRedOp_t op, bool owned) : comm_(comm), op_(op), owned_(owned) {}
  // An aborted communicator has freed its ops (and itself): destroying
  // checks it first.
  NcclComm* comm_;
  ncclRedOp_t op_;
  bool owned_;  // created by PreMulSum: destroyed with the object
};

}  // namespace khorovod
