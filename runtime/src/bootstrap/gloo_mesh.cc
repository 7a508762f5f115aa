#include "bootstrap/gloo_mesh.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/pair.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bootstrap/interruptible_waits.h"
#include "khorovod/util/mutex.h"

namespace khorovod {
namespace {

using Clock = std::chrono::steady_clock;

// Pairs connected concurrently; a few more than a host's ranks, so a
// generation of a few hosts connects in about one event-loop tick.
constexpr int kConnectThreads = 16;

std::string AddressKey(int rank) { return "mesh/" + std::to_string(rank); }

// Runs fn(peer) for every rank but `self`, on up to kConnectThreads threads
// (this one included). fn must not throw.
template <typename Fn>
void ForEachPeerConcurrently(int self, int size, Fn fn) {
  std::atomic<int> next{0};
  auto work = [&] {
    for (int peer = next++; peer < size; peer = next++) {
      if (peer != self) fn(peer);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::min(size - 1, kConnectThreads); ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

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

void FailPair(gloo::transport::Pair* pair, const std::string& why) {
  if (auto* tcp = dynamic_cast<gloo::transport::tcp::Pair*>(pair)) PairAbort::Fail(*tcp, why);
}

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
      MutexLock lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  MeshWatchdog(const MeshWatchdog&) = delete;
  MeshWatchdog& operator=(const MeshWatchdog&) = delete;

  // Fails every pending pair now, e.g. because one pair's connect failed and
  // the others would otherwise wait for a dead peer until the deadline.
  void Abandon(const std::string& why) {
    {
      MutexLock lock(mu_);
      if (!reason_.empty()) return;
      reason_ = why;
    }
    FailPairs(why);
  }

  // Why the mesh was abandoned, or empty.
  std::string reason() const {
    MutexLock lock(mu_);
    return reason_;
  }

 private:
  void Watch() {
    MutexLock lock(mu_);
    while (!done_) {
      std::string why;
      if (options_.abandon && options_.abandon()) {
        why = "the rendezvous announced a newer world while this generation was connecting";
      } else if (Clock::now() >= deadline_) {
        why = "peers did not connect within " + std::to_string(options_.timeout.count()) + " ms";
      }
      if (!why.empty()) {
        lock.Unlock();
        Abandon(why);
        return;
      }
      lock.WaitFor(cv_, options_.poll, [&]() REQUIRES(mu_) { return done_; });
    }
  }

  void FailPairs(const std::string& why) {
    for (int peer = 0; peer < options_.size; ++peer) {
      if (peer != options_.rank) FailPair(transport_.getPair(peer).get(), "mesh abandoned: " + why);
    }
  }

  gloo::transport::Context& transport_;
  const MeshOptions& options_;
  const Clock::time_point deadline_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool done_ GUARDED_BY(mu_) = false;
  std::string reason_ GUARDED_BY(mu_);
  std::thread thread_;
};

// Waits until every peer in `keys` has published its addresses. The store's
// own wait cannot be interrupted, so it is taken in short slices: a peer that
// died after the rendezvous put it in the generation but before it published
// (a replacement killed while it starts) is then given up within a slice of
// the watchdog's verdict, instead of after the whole connect timeout. The
// watchdog's deadline bounds the loop.
constexpr auto kAddressWaitSlice = std::chrono::milliseconds(200);

void WaitForAddresses(gloo::rendezvous::Store& store, const std::vector<std::string>& keys,
                      const MeshWatchdog& watchdog) {
  for (;;) {
    try {
      store.wait(keys, kAddressWaitSlice);
      return;
    } catch (const gloo::IoException& e) {
      // Gloo's stores and HttpStore say "Wait timeout" for a slice that ran
      // out; anything else (an unreachable server, a failed job) is final.
      if (std::string_view(e.what()).find("Wait timeout") == std::string_view::npos) throw;
    }
    if (const std::string why = watchdog.reason(); !why.empty()) throw std::runtime_error(why);
  }
}

// gloo::Context keeps its device and transport context protected; this
// subclass installs the ones connected here.
class MeshContext final : public gloo::rendezvous::Context, public InterruptibleWaits {
 public:
  MeshContext(int rank, int size) : gloo::rendezvous::Context(rank, size) {}

  // Closing a connected pair waits for a tick of the device's event loop,
  // like connecting one (see ConnectPairs): closed concurrently, a
  // generation's teardown costs about one tick instead of one per peer.
  ~MeshContext() override {
    if (!transportContext_) return;
    gloo::transport::Context& transport = *transportContext_;
    ForEachPeerConcurrently(rank, size, [&](int peer) { transport.getPair(peer).reset(); });
  }

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
        std::vector<std::string> keys;
        for (int peer = 0; peer < size; ++peer) {
          if (peer != rank) keys.push_back(AddressKey(peer));
        }
        WaitForAddresses(store, keys, watchdog);
        std::vector<std::vector<char>> addresses(static_cast<size_t>(size));
        for (int peer = 0; peer < size; ++peer) {
          if (peer != rank)
            addresses[static_cast<size_t>(peer)] = AddressOf(store.get(AddressKey(peer)), peer);
        }
        ConnectPairs(*transport, addresses, watchdog);
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
  // Connects every pair at once. Gloo's connect waits for a tick of the
  // device's event loop (up to 10 ms when it is idle) on the connecting side,
  // so pairs connected one after another cost a tick each; concurrently, the
  // whole mesh costs about one. The first pair to fail abandons the others.
  void ConnectPairs(gloo::transport::Context& transport,
                    const std::vector<std::vector<char>>& addresses, MeshWatchdog& watchdog) {
    Mutex mu;
    std::string first_error;
    ForEachPeerConcurrently(rank, size, [&](int peer) {
      try {
        transport.getPair(peer)->connect(addresses[static_cast<size_t>(peer)]);
      } catch (const std::exception& e) {
        {
          MutexLock lock(mu);
          if (first_error.empty()) first_error = e.what();
        }
        watchdog.Abandon("the connection to rank " + std::to_string(peer) + " failed: " + e.what());
      }
    });
    if (!first_error.empty()) throw std::runtime_error(first_error);
  }

  // A peer publishes one address per other rank, in rank order, skipping itself.
  std::vector<char> AddressOf(const std::vector<char>& all, int peer) const {
    const size_t each = all.size() / static_cast<size_t>(size - 1);
    const size_t index = static_cast<size_t>(rank > peer ? rank - 1 : rank);
    return std::vector<char>(all.begin() + static_cast<std::ptrdiff_t>(index * each),
                             all.begin() + static_cast<std::ptrdiff_t>((index + 1) * each));
  }
};

}  // namespace

StatusOr<std::shared_ptr<gloo::Context>> ConnectAbandonableMesh(
    gloo::rendezvous::Store& store, std::shared_ptr<gloo::transport::Device> device,
    const MeshOptions& options) {
  auto context = std::make_shared<MeshContext>(options.rank, options.size);
  context->setTimeout(options.timeout);
  std::string abandoned;
  try {
    context->Connect(store, std::move(device), options, &abandoned);
  } catch (const std::exception& e) {
    return Status::Unavailable(abandoned.empty() ? std::string(e.what())
                                                 : "mesh abandoned: " + abandoned);
  }
  return std::shared_ptr<gloo::Context>(std::move(context));
}

void AbandonMesh(gloo::Context& context, const std::string& why) {
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank) FailPair(context.getPair(peer).get(), why);
  }
  // A send already queued for writing survives the pair's failure in Gloo;
  // its wait ends only here (bootstrap/interruptible_waits.h).
  if (auto* waits = dynamic_cast<InterruptibleWaits*>(&context)) waits->Interrupt();
}

}  // namespace khorovod
