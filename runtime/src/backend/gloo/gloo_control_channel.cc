#include "backend/gloo/gloo_control_channel.h"

#include <gloo/context.h>

#include <numeric>

#include "backend/gloo/gloo_ops.h"
#include "backend/gloo/rank_subset_context.h"

namespace khorovod {

GlooControlChannel::GlooControlChannel(std::shared_ptr<gloo::Context> ctx) : ctx_(std::move(ctx)) {}

GlooControlChannel::~GlooControlChannel() = default;

Status GlooControlChannel::AllgatherWords(const std::vector<uint64_t>& mine,
                                          std::vector<uint64_t>* all) {
  all->resize(mine.size() * ctx_->size);
  const size_t bytes = mine.size() * sizeof(uint64_t);
  for (auto& bound : bound_) {
    if (bound->bytes() == bytes) return bound->Run(mine.data(), all->data());
  }
  const uint64_t slot = (uint64_t{0x7c} << 56) | (next_slot_++ & ((uint64_t{1} << 56) - 1));
  KH_RETURN_IF_ERROR(gloo_ops::DirectAllgather(ctx_, mine.data(), bytes, all->data(), slot));
  // A size exchanged a second time (the negotiation's, round after round)
  // gets bound buffers for its later calls. Every rank makes the same calls
  // with the same sizes, so every rank decides alike, in the same order.
  if (ctx_->size > 1 && bytes > 0 && ++unbound_calls_[bytes] == 2 &&
      bound_.size() < kMaxBoundSizes) {
    return AddBoundSize(bytes);
  }
  return Status::Ok();
}

Status GlooControlChannel::AddBoundSize(size_t bytes) {
  if (!bound_ctx_) {
    // Connections of their own: Gloo sizes a connection's send buffer to
    // the first bound message it sends (SO_SNDBUF, which also turns off the
    // kernel's autotuning), and a few words' buffer on the world's
    // connections starved the data plane's large transfers on them.
    std::vector<int> everyone(static_cast<size_t>(ctx_->size));
    std::iota(everyone.begin(), everyone.end(), 0);
    auto connected = gloo_ops::ConnectRankSubset(ctx_, everyone, ctx_->getTimeout());
    if (!connected.ok()) return connected.status();
    bound_ctx_ = std::move(*connected);
  }
  auto bound = gloo_ops::BoundAllgather::Create(bound_ctx_, bytes, static_cast<int>(bound_.size()));
  if (!bound.ok()) return bound.status();
  bound_.push_back(std::move(*bound));
  return Status::Ok();
}

Status GlooControlChannel::GatherToRoot(const std::string& mine, std::vector<std::string>* all) {
  const int size = ctx_->size;
  all->clear();
  if (size == 1) {
    all->push_back(mine);
    return Status::Ok();
  }
  // Exchange lengths first so every rank can size the variable gather.
  std::vector<uint64_t> lengths(size, 0);
  const uint64_t my_length = mine.size();
  std::vector<size_t> slot_bytes(size, sizeof(uint64_t));
  KH_RETURN_IF_ERROR(gloo_ops::AllgathervBytes(ctx_, &my_length, lengths.data(), slot_bytes));
  std::vector<size_t> bytes(lengths.begin(), lengths.end());
  std::string gathered;
  size_t total = 0;
  for (size_t b : bytes) total += b;
  gathered.resize(total);
  KH_RETURN_IF_ERROR(gloo_ops::AllgathervBytes(ctx_, mine.data(), gathered.data(), bytes));
  if (ctx_->rank != 0) return Status::Ok();
  size_t offset = 0;
  for (size_t b : bytes) {
    all->push_back(gathered.substr(offset, b));
    offset += b;
  }
  return Status::Ok();
}

Status GlooControlChannel::BroadcastFromRoot(std::string* data) {
  if (ctx_->size == 1) return Status::Ok();
  uint64_t length = data->size();
  KH_RETURN_IF_ERROR(gloo_ops::BroadcastBytes(ctx_, &length, sizeof length, 0));
  data->resize(length);
  return gloo_ops::BroadcastBytes(ctx_, data->data(), length, 0);
}

}  // namespace khorovod
