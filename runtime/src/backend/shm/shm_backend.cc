// The shared-memory data-plane backend, registered as "shm" (and chosen by
// "auto" when some host runs several ranks). It only chooses the path of an
// allreduce; backend/shm/hierarchical_allreduce.h holds the algorithm:
//   - every rank of the world on this host: the ranks reduce through one
//     shared segment instead of loopback TCP;
//   - several hosts with the same number (> 1) of ranks each: hierarchical,
//     shared memory within each host and Gloo across hosts, one cross-host
//     allreduce per local rank, for the tensors where it pays
//     (HierarchicalAllreduce::Pays; the others take Gloo);
//   - any other layout (uneven hosts, one rank per host), or a host that
//     could not create its segment: the wrapped Gloo backend.
// Every other collective runs on the Gloo backend it wraps. The choice
// depends only on every rank's placement, which all ranks see alike.
// With every rank on this host, the negotiation takes shared memory too
// (backend/shm/shm_control_channel.h), handed to the runtime at start.
//
// Failures: a barrier that times out or finds a peer's process gone, or a
// Gloo failure across hosts, returns kUnavailable, and the backend stays
// broken until the runtime re-forms (which destroys it, unmapping the
// segment).
#include <gloo/context.h>

#include "backend/registry.h"
#include "backend/shm/hierarchical_allreduce.h"
#include "backend/shm/shm_control_channel.h"
#include "common/waiter_signal.h"

namespace khorovod {
namespace {

class ShmBackend final : public Backend {
 public:
  ShmBackend(std::unique_ptr<Backend> gloo, std::unique_ptr<shm::HierarchicalAllreduce> shm,
             std::unique_ptr<ControlChannel> control)
      : gloo_(std::move(gloo)), shm_(std::move(shm)), control_(std::move(control)) {}

  std::string_view name() const override { return "shm"; }
  bool SupportsDevice(const Device& device) const override {
    return device.kind == DeviceKind::kCPU;
  }

  Status Allreduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op) override {
    if (!shm_ || !shm_->Pays(count * DataTypeSize(dtype)))
      return gloo_->Allreduce(in, out, count, dtype, op);
    return shm_->Allreduce(in, out, count, dtype, op);
  }

  // One path for the whole fused group, chosen by its total size (the same
  // on every rank): both paths take the spans as one vector, so the group
  // costs one pass, its hops and barriers paid once, whatever the number of
  // tensors in it. (Choosing per span ran one hierarchical pass per tensor:
  // ResNet-50's gradients made 48 of them per step at 3 hosts x 2.)
  Status AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) override {
    size_t total = 0;
    for (const Span& s : spans) total += s.count;
    if (!shm_ || !shm_->Pays(total * DataTypeSize(dtype)))
      return gloo_->AllreduceSpans(spans, dtype, op);
    return shm_->AllreduceSpans(spans, dtype, op);
  }

  Status Allgatherv(const void* in, void* out, const std::vector<size_t>& counts,
                    DataType dtype) override {
    return gloo_->Allgatherv(in, out, counts, dtype);
  }
  Status Broadcast(void* buffer, size_t count, DataType dtype, int root) override {
    return gloo_->Broadcast(buffer, count, dtype, root);
  }
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                   const std::vector<int64_t>& recv_counts, DataType dtype) override {
    return gloo_->Alltoallv(in, send_counts, out, recv_counts, dtype);
  }
  Status Barrier() override { return gloo_->Barrier(); }

  std::unique_ptr<ControlChannel> TakeControlChannel() override { return std::move(control_); }

 private:
  std::unique_ptr<Backend> gloo_;
  std::unique_ptr<shm::HierarchicalAllreduce> shm_;  // null: allreduce through Gloo
  std::unique_ptr<ControlChannel> control_;          // null: negotiate over Gloo
};

StatusOr<std::unique_ptr<Backend>> MakeShmBackend(const BackendInit& init) {
  if (!init.gloo_context || !init.config)
    return Status::FailedPrecondition("shm backend needs a connected context");
  auto gloo = BackendRegistry::Create("gloo", init);
  if (!gloo.ok()) return gloo.status();
  auto shm = shm::HierarchicalAllreduce::Connect(*init.config, init.gloo_context);
  if (!shm.ok()) return shm.status();
  std::unique_ptr<ControlChannel> control;
  // hosts() is the same on every rank, so all connect the channel or none.
  if (*shm && (*shm)->hosts() == 1) {
    auto channel =
        shm::ShmControlChannel::Connect(init.gloo_context, init.config->transport_timeout,
                                        SpinPolicy::ForConfig(*init.config).enabled());
    if (!channel.ok()) return channel.status();
    control = std::move(*channel);
  }
  return std::unique_ptr<Backend>(
      std::make_unique<ShmBackend>(std::move(*gloo), std::move(*shm), std::move(control)));
}

}  // namespace

KH_REGISTER_BACKEND(shm, "shm", MakeShmBackend)

}  // namespace khorovod
