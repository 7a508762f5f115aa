#include "bootstrap/gloo_mesh.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/pair.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace khorovod {
namespace {

using Clock = std::chrono::steady_clock;

std::string AddressKey(int rank) { return "mesh/" + std::to_string(rank); }

// Gloo keeps tcp::Pair::signalExceptionExternal protected although it is
// meant for failing a pair from outside its event loop (it wakes a blocked
// connect with an exception). A derived class may name it, and the member
// pointer it hands out may be applied to any Pair.
class PairAbort final : public gloo::transport::tcp::Pair {
 public:
  static void Fail(gloo::transport::tcp::Pair& pair, const std::string& why) {
    (void)(pair.*&PairAbort::signalExceptionExternal)(why);
  }
};

// Fails every pending pair of `transport` from a second thread once the
// caller's world is outdated or the deadline passed. Gloo's TCP pair exposes
// signalExceptionExternal for exactly this: it wakes a blocked connect.
class MeshWatchdog {
 public:
  MeshWatchdog(gloo::transport::Context& transport, const MeshOptions& options)
      : transport_(transport), options_(options), deadline_(Clock::now() + options.timeout) {
    thread_ = std::thread([this] { Watch(); });
  }
  ~MeshWatchdog() { Stop(); }

  // Ends the watch; after it returns, reason() is final.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  MeshWatchdog(const MeshWatchdog&) = delete;
  MeshWatchdog& operator=(const MeshWatchdog&) = delete;

  // Why the mesh was abandoned, or empty.
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }

 private:
  void Watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      std::string why;
      if (options_.abandon && options_.abandon()) {
        why = "the rendezvous announced a newer world while this generation was connecting";
      } else if (Clock::now() >= deadline_) {
        why = "peers did not connect within " + std::to_string(options_.timeout.count()) + " ms";
      }
      if (!why.empty()) {
        reason_ = why;
        lock.unlock();
        FailPairs(why);
        return;
      }
      cv_.wait_for(lock, options_.poll, [&] { return done_; });
    }
  }

  void FailPairs(const std::string& why) {
    for (int peer = 0; peer < options_.size; ++peer) {
      if (peer == options_.rank) continue;
      auto* pair = dynamic_cast<gloo::transport::tcp::Pair*>(transport_.getPair(peer).get());
      if (pair != nullptr) PairAbort::Fail(*pair, "mesh abandoned: " + why);
    }
  }

  gloo::transport::Context& transport_;
  const MeshOptions& options_;
  const Clock::time_point deadline_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string reason_;
  std::thread thread_;
};

// gloo::Context keeps its device and transport context protected; this
// subclass installs the ones connected here.
class MeshContext final : public gloo::rendezvous::Context {
 public:
  MeshContext(int rank, int size) : gloo::rendezvous::Context(rank, size) {}

  void Connect(gloo::rendezvous::Store& store, std::shared_ptr<gloo::transport::Device> device,
               const MeshOptions& options, std::string* abandoned) {
    auto transport = device->createContext(rank, size);
    transport->setTimeout(getTimeout());
    std::vector<char> mine;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      auto bytes = transport->createPair(peer)->address().bytes();
      mine.insert(mine.end(), bytes.begin(), bytes.end());
    }
    {
      MeshWatchdog watchdog(*transport, options);
      try {
        store.set(AddressKey(rank), mine);
        for (int peer = 0; peer < size; ++peer) {
          if (peer == rank) continue;
          store.wait({AddressKey(peer)}, getTimeout());
          transport->getPair(peer)->connect(AddressOf(store.get(AddressKey(peer)), peer));
        }
      } catch (...) {
        *abandoned = watchdog.reason();
        throw;
      }
      // The watchdog may have fired just as the last pair connected: the
      // pairs it failed are unusable, so the mesh is abandoned all the same.
      watchdog.Stop();
      *abandoned = watchdog.reason();
    }
    if (!abandoned->empty()) throw std::runtime_error(*abandoned);
    device_ = std::move(device);
    transportContext_ = std::move(transport);
  }

 private:
  // A peer publishes one address per other rank, in rank order, skipping itself.
  std::vector<char> AddressOf(const std::vector<char>& all, int peer) const {
    const size_t each = all.size() / static_cast<size_t>(size - 1);
    const size_t index = static_cast<size_t>(rank > peer ? rank - 1 : rank);
    return std::vector<char>(all.begin() + static_cast<std::ptrdiff_t>(index * each),
                             all.begin() + static_cast<std::ptrdiff_t>((index + 1) * each));
  }
};

}  // namespace

StatusOr<std::shared_ptr<gloo::Context>> ConnectAbandonableMesh(gloo::rendezvous::Store& store,
                                                               std::shared_ptr<gloo::transport::Device> device,
                                                               const MeshOptions& options) {
  auto context = std::make_shared<MeshContext>(options.rank, options.size);
  context->setTimeout(options.timeout);
  std::string abandoned;
  try {
    context->Connect(store, std::move(device), options, &abandoned);
  } catch (const std::exception& e) {
    return Status::Unavailable(abandoned.empty() ? std::string(e.what()) : "mesh abandoned: " + abandoned);
  }
  return std::shared_ptr<gloo::Context>(std::move(context));
}

}  // namespace khorovod
