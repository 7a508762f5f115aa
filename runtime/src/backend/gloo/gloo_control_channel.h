// GlooControlChannel: the negotiation primitives over a Gloo context.
//
// AllgatherWords, the exchange of every negotiation round, runs over bound
// buffers once a size has been exchanged twice, so a steady-state round
// sends one message to each peer. The bound buffers live on a second mesh
// of connections (connected through the world's, and abandoned with it),
// so the world's connections keep the kernel's send-buffer autotuning for
// the data plane (see AddBoundSize).
//
// Thread-safety: one caller at a time (the runtime's background thread).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "backend/control_channel.h"
#include "backend/gloo/gloo_bound_allgather.h"

namespace gloo {
class Context;
}

namespace khorovod {

class GlooControlChannel final : public ControlChannel {
 public:
  explicit GlooControlChannel(std::shared_ptr<gloo::Context> ctx);
  ~GlooControlChannel() override;

  Status AllgatherWords(const std::vector<uint64_t>& mine, std::vector<uint64_t>* all) override;
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastFromRoot(std::string* data) override;

 private:
  // Registers bound buffers for `bytes`, connecting bound_ctx_ the first
  // time. Every rank calls it at the same point of the same call.
  Status AddBoundSize(size_t bytes);

  std::shared_ptr<gloo::Context> ctx_;
  std::shared_ptr<gloo::Context> bound_ctx_;  // null until the first bound size
  uint64_t next_slot_ = 0;                    // advances identically on every rank
  // Sizes AllgatherWords exchanged a second time get bound buffers: one
  // message per peer instead of Gloo's three (backend/gloo/gloo_bound_allgather.h).
  static constexpr size_t kMaxBoundSizes = 4;
  std::map<size_t, int> unbound_calls_;  // by size in bytes
  std::vector<std::unique_ptr<gloo_ops::BoundAllgather>> bound_;
};

}  // namespace khorovod
