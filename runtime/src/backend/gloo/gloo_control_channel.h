// GlooControlChannel: the negotiation primitives over a Gloo context.
//
// Thread-safety: one caller at a time (the runtime's background thread).
#pragma once

#include <memory>

#include "backend/control_channel.h"

namespace gloo {
class Context;
}

namespace khorovod {

class GlooControlChannel final : public ControlChannel {
 public:
  explicit GlooControlChannel(std::shared_ptr<gloo::Context> ctx) : ctx_(std::move(ctx)) {}

  Status AllgatherWords(const std::vector<uint64_t>& mine, std::vector<uint64_t>* all) override;
  Status GatherToRoot(const std::string& mine, std::vector<std::string>* all) override;
  Status BroadcastFromRoot(std::string* data) override;

 private:
  std::shared_ptr<gloo::Context> ctx_;
  uint64_t next_slot_ = 0;  // advances identically on every rank
};

}  // namespace khorovod
