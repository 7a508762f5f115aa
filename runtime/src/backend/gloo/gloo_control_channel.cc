#include "backend/gloo/gloo_control_channel.h"

#include <gloo/context.h>

#include "backend/gloo/gloo_ops.h"

namespace khorovod {

Status GlooControlChannel::AllgatherWords(const std::vector<uint64_t>& mine,
                                          std::vector<uint64_t>* all) {
  all->resize(mine.size() * ctx_->size);
  const uint64_t slot = (uint64_t{0x7c} << 56) | (next_slot_++ & ((uint64_t{1} << 56) - 1));
  return gloo_ops::DirectAllgather(ctx_, mine.data(), mine.size() * sizeof(uint64_t), all->data(),
                                   slot);
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
