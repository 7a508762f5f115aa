// The shared-memory data-plane backend, registered as "shm" (and chosen by
// "auto" when some host runs several ranks). It only chooses the path of an
// allreduce; backend/shm/hierarchical_allreduce.h holds the algorithm:
//   - every rank of the world on this host: the ranks reduce through one
//     shared segment instead of loopback TCP;
//   - several hosts with the same number (> 1) of ranks each: hierarchical,
//     shared memory within each host and Gloo across hosts, one cross-host
//     allreduce per local rank, for every tensor up to
//     HierarchicalAllreduce::kBandwidthBoundBytes; a larger one takes the
//     path a trial of both on the job's first large allreduces found
//     faster (backend/shm/path_trial.h);
//   - any other layout (uneven hosts, one rank per host), or a host that
//     could not create its segment: the wrapped Gloo backend.
// Every other collective runs on the Gloo backend it wraps. The choice
// depends only on every rank's placement, which all ranks see alike.
// The negotiation takes shared memory too, handed to the runtime at start:
// with every rank on this host, backend/shm/shm_control_channel.h; across
// hosts, backend/shm/host_leader_channel.h (one rank per host on the network).
//
// Failures: a barrier that times out or finds a peer's process gone, or a
// Gloo failure across hosts, returns kUnavailable, and the backend stays
// broken until the runtime re-forms (which destroys it, unmapping the
// segment).
#include <gloo/context.h>

#include <chrono>
#include <cstdio>

#include "backend/registry.h"
#include "backend/shm/hierarchical_allreduce.h"
#include "backend/shm/host_leader_channel.h"
#include "backend/shm/path_trial.h"
#include "backend/shm/shm_control_channel.h"
#include "common/waiter_signal.h"

namespace khorovod {
namespace {

class ShmBackend final : public Backend {
 public:
  ShmBackend(std::unique_ptr<Backend> gloo, std::unique_ptr<shm::HierarchicalAllreduce> shm,
             std::unique_ptr<ControlChannel> control, int rank)
      : gloo_(std::move(gloo)), shm_(std::move(shm)), control_(std::move(control)), rank_(rank) {}

  std::string_view name() const override { return "shm"; }
  bool SupportsDevice(const Device& device) const override {
    return device.kind == DeviceKind::kCPU;
  }

  Status Allreduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op) override {
    return Route(
        count * DataTypeSize(dtype), [&] { return gloo_->Allreduce(in, out, count, dtype, op); },
        [&] { return shm_->Allreduce(in, out, count, dtype, op); });
  }

  // One path for the whole fused group, chosen by its total size (the same
  // on every rank): both paths take the spans as one vector, so the group
  // costs one pass, its hops and barriers paid once, whatever the number of
  // tensors in it. (Choosing per span ran one hierarchical pass per tensor:
  // ResNet-50's gradients made 48 of them per step at 3 hosts x 2.)
  Status AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) override {
    size_t total = 0;
    for (const Span& s : spans) total += s.count;
    return Route(
        total * DataTypeSize(dtype), [&] { return gloo_->AllreduceSpans(spans, dtype, op); },
        [&] { return shm_->AllreduceSpans(spans, dtype, op); });
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
  using Path = shm::PathTrial::Path;

  // Runs an allreduce of `bytes` on the path the layout and the trial give.
  template <typename Flat, typename Hierarchical>
  Status Route(size_t bytes, Flat flat, Hierarchical hierarchical) {
    if (!shm_) return flat();
    if (shm_->TakesWithoutTrial(bytes)) return hierarchical();
    const Path path = trial_.Next();
    if (trial_.verdict()) return path == Path::kFlat ? flat() : hierarchical();
    const auto start = std::chrono::steady_clock::now();
    Status s = path == Path::kFlat ? flat() : hierarchical();
    if (!s.ok()) return s;
    trial_.Record(path, bytes,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return trial_.AgreementDue() ? AgreeOnPath() : s;
  }

  // Every rank reaches this after the same large allreduce, so the sums'
  // allreduce lines up, and all decide from the same numbers.
  Status AgreeOnPath() {
    shm::PathTrial::Sums world = trial_.sums();
    Status s = gloo_->Allreduce(world.data(), world.data(), world.size(), DataType::kFloat64,
                                ReduceOp::kSum);
    if (!s.ok()) return s;
    trial_.Agree(world);
    if (rank_ == 0) {
      constexpr double kMiB = 1 << 20;
      std::fprintf(stderr,
                   "khorovod: allreduces above %zu MiB across %d hosts take %s (measured %.2f ms "
                   "per MiB hierarchical, %.2f flat)\n",
                   shm::HierarchicalAllreduce::kBandwidthBoundBytes >> 20, shm_->hosts(),
                   shm::PathTrial::Name(*trial_.verdict()), 1e3 * world[2] / (world[3] / kMiB),
                   1e3 * world[0] / (world[1] / kMiB));
    }
    return Status::Ok();
  }

  std::unique_ptr<Backend> gloo_;
  std::unique_ptr<shm::HierarchicalAllreduce> shm_;  // null: allreduce through Gloo
  std::unique_ptr<ControlChannel> control_;          // null: negotiate over Gloo
  int rank_;                                         // in the world
  shm::PathTrial trial_;                             // large allreduces across hosts
};

StatusOr<std::unique_ptr<Backend>> MakeShmBackend(const BackendInit& init) {
  if (!init.gloo_context || !init.config)
    return Status::FailedPrecondition("shm backend needs a connected context");
  auto gloo = BackendRegistry::Create("gloo", init);
  if (!gloo.ok()) return gloo.status();
  auto shm = shm::HierarchicalAllreduce::Connect(*init.config, init.gloo_context);
  if (!shm.ok()) return shm.status();
  std::unique_ptr<ControlChannel> control;
  // hosts() is the same on every rank, so all connect the same channel or none.
  if (*shm) {
    const bool spin = SpinPolicy::ForConfig(*init.config).enabled();
    const auto timeout = init.config->transport_timeout;
    auto channel = (*shm)->hosts() == 1
                       ? shm::ShmControlChannel::Connect(init.gloo_context, timeout, spin)
                       : shm::HostLeaderChannel::Connect(init.gloo_context, (*shm)->host_context(),
                                                         (*shm)->layout(), timeout, spin);
    if (!channel.ok()) return channel.status();
    control = std::move(*channel);
  }
  return std::unique_ptr<Backend>(std::make_unique<ShmBackend>(
      std::move(*gloo), std::move(*shm), std::move(control), init.gloo_context->rank));
}

}  // namespace

KH_REGISTER_BACKEND(shm, "shm", MakeShmBackend)

}  // namespace khorovod
