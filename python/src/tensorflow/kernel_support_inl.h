// RunAsync's definition (declared and documented in kernel_support.h).
#pragma once

#include <utility>

#include "runtime_slot.h"

namespace khorovod::tensorflow_ops {

template <typename Submit, typename Finish>
void RunAsync(::tensorflow::OpKernelContext* ctx, ::tensorflow::AsyncOpKernel::DoneCallback done,
              Submit submit, Finish finish) {
  Handle handle;
  {
    RuntimeSlot::Lease lease(RuntimeSlot::Instance());
    if (lease.runtime() == nullptr) {
      ctx->SetStatus(absl::FailedPreconditionError(
          "khorovod has not been initialized; call hvd.init() first"));
      done();
      return;
    }
    handle = submit(*lease.runtime());
  }
  handle.on_done(
      [ctx, done = std::move(done), handle, finish = std::move(finish)](const Status& s) {
        if (s.ok()) {
          ctx->SetStatus(finish(handle));
        } else {
          ctx->SetStatus(ToTfStatus(s));
        }
        done();
      });
}

}  // namespace khorovod::tensorflow_ops
