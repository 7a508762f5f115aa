#include "backend/gloo/rank_subset_context.h"

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "backend/gloo/gloo_ops.h"
#include "bootstrap/gloo_mesh.h"
#include "bootstrap/interruptible_waits.h"

namespace khorovod::gloo_ops {
namespace {

// A store whose values are exchanged in one allgather over the world
// context, the first time a rank waits: ConnectAbandonableMesh sets this
// rank's addresses once and then waits once for its group's, on every rank,
// so every world rank takes part in the allgather exactly once. Keys are
// only seen within one group (the mesh's keys are the group's ranks).
class WorldExchangeStore final : public gloo::rendezvous::Store {
 public:
  WorldExchangeStore(std::shared_ptr<gloo::Context> world, int64_t group)
      : world_(std::move(world)), group_(group) {}

  void set(const std::string& key, const std::vector<char>& data) override { mine_[key] = data; }

  std::vector<char> get(const std::string& key) override {
    auto it = theirs_.find(key);
    if (it == theirs_.end()) throw std::runtime_error("rank subset: no value for " + key);
    return it->second;
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    if (!exchanged_) {
      Status s = Exchange();
      if (!s.ok()) throw std::runtime_error("rank subset: address exchange: " + s.ToString());
    }
    for (const auto& k : keys) {
      if (!theirs_.count(k)) throw std::runtime_error("rank subset: no peer published " + k);
    }
  }

  // Takes part in the world's allgather if the mesh never waited (it
  // failed before), so the other ranks do not wait for this one.
  void ExchangeIfNotYet() {
    if (!exchanged_) (void)Exchange();
  }

 private:
  Status Exchange() {
    exchanged_ = true;
    const std::vector<char> blob = Serialize();
    const size_t ranks = static_cast<size_t>(world_->size);
    std::vector<uint64_t> sizes(ranks);
    const uint64_t mine = blob.size();
    KH_RETURN_IF_ERROR(gloo_ops::AllgathervBytes(world_, &mine, sizes.data(),
                                                 std::vector<size_t>(ranks, sizeof(uint64_t))));
    std::vector<size_t> bytes(sizes.begin(), sizes.end());
    size_t total = 0;
    for (size_t b : bytes) total += b;
    std::vector<char> all(total);
    KH_RETURN_IF_ERROR(gloo_ops::AllgathervBytes(world_, blob.data(), all.data(), bytes));
    size_t at = 0;
    for (size_t b : bytes) {
      Parse(all.data() + at, b);
      at += b;
    }
    return Status::Ok();
  }

  // group (int64), then per entry: key length (u32), key, value length
  // (u32), value. Every rank runs the same binary: native byte order.
  std::vector<char> Serialize() const {
    std::vector<char> out;
    auto put = [&out](const void* p, size_t n) {
      const char* c = static_cast<const char*>(p);
      out.insert(out.end(), c, c + n);
    };
    put(&group_, sizeof group_);
    for (const auto& [key, value] : mine_) {
      const auto klen = static_cast<uint32_t>(key.size()),
                 vlen = static_cast<uint32_t>(value.size());
      put(&klen, sizeof klen);
      put(key.data(), klen);
      put(&vlen, sizeof vlen);
      put(value.data(), vlen);
    }
    return out;
  }

  void Parse(const char* p, size_t n) {
    int64_t group = 0;
    if (n < sizeof group) return;
    std::memcpy(&group, p, sizeof group);
    if (group != group_) return;
    size_t at = sizeof group;
    auto take_len = [&](uint32_t* len) {
      if (n - at < sizeof *len) return false;
      std::memcpy(len, p + at, sizeof *len);
      at += sizeof *len;
      return n - at >= *len;
    };
    while (at < n) {
      uint32_t klen = 0, vlen = 0;
      if (!take_len(&klen)) return;
      std::string key(p + at, klen);
      at += klen;
      if (!take_len(&vlen)) return;
      theirs_[key] = std::vector<char>(p + at, p + at + vlen);
      at += vlen;
    }
  }

  std::shared_ptr<gloo::Context> world_;
  int64_t group_;
  bool exchanged_ = false;
  std::map<std::string, std::vector<char>> mine_;
  std::map<std::string, std::vector<char>> theirs_;
};

}  // namespace

StatusOr<std::shared_ptr<gloo::Context>> ConnectRankSubset(
    const std::shared_ptr<gloo::Context>& world, const std::vector<int>& members,
    std::chrono::milliseconds timeout) {
  const auto self = std::find(members.begin(), members.end(), world->rank);
  // Groups are disjoint, so a group's first member names it on every member.
  WorldExchangeStore store(world, members.empty() ? -1 : members.front());
  if (self == members.end()) {
    store.ExchangeIfNotYet();
    return Status::InvalidArgument("rank " + std::to_string(world->rank) + " is not in its subset");
  }
  MeshOptions options;
  options.rank = static_cast<int>(self - members.begin());
  options.size = static_cast<int>(members.size());
  options.timeout = timeout;
  auto connected = ConnectAbandonableMesh(store, world->getDevice(), options);
  store.ExchangeIfNotYet();
  if (!connected.ok()) return connected;
  // Abandoning the world's connections (a doomed elastic generation,
  // bootstrap/gloo_mesh.h) abandons the subset's too.
  if (auto* waits = dynamic_cast<InterruptibleWaits*>(world.get())) {
    std::weak_ptr<gloo::Context> subset = *connected;
    waits->OnInterrupt([subset] {
      if (auto s = subset.lock()) AbandonMesh(*s, "the world's connections were abandoned");
    });
  }
  return connected;
}

}  // namespace khorovod::gloo_ops
