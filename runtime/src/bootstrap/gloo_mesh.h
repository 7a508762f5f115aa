// Connects a full mesh of Gloo TCP pairs through a key-value store, like
// gloo::rendezvous::Context::connectFullMesh, but abandonable.
//
// Why not Gloo's own: its initial connect waits five times the context
// timeout (150 s at the default 30 s) for a peer that died after publishing
// its address, and nothing can interrupt it. An elastic survivor stuck there
// never asks the rendezvous for the next generation, so the whole job waits
// for it. Here a watchdog polls `abandon` (e.g. "the rendezvous announced a
// newer world") and the connect deadline; when either fires, every pair is
// failed at once and the call returns UNAVAILABLE, sending the caller back to
// the rendezvous.
//
// Every rank of one generation must connect with this function (the store
// keys are its own, not Gloo's).
//
// Pairs connect concurrently (see ConnectPairs in the .cc for why).
//
// Thread-safety: a free function; `abandon` is called from a watchdog thread
// while the call runs, so it must be safe to call concurrently with the
// caller (an atomic load, typically).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "khorovod/status.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
namespace transport {
class Device;
}
}  // namespace gloo

namespace khorovod {

struct MeshOptions {
  int rank = 0;
  int size = 1;
  // Collective timeout of the resulting context, and the bound on the whole
  // connect (address exchange and every pair).
  std::chrono::milliseconds timeout{30'000};
  // Polled about every 20 ms while connecting; true abandons the mesh.
  std::function<bool()> abandon;
  // How often the watchdog polls `abandon`.
  std::chrono::milliseconds poll{20};
};

StatusOr<std::shared_ptr<gloo::Context>> ConnectAbandonableMesh(
    gloo::rendezvous::Store& store, std::shared_ptr<gloo::transport::Device> device,
    const MeshOptions& options);

// Fails every TCP pair of a connected context, from any thread: each
// operation waiting on a pair, and each later one, fails with `why` (Gloo's
// exception, which the backends turn into UNAVAILABLE). For a generation
// that can no longer finish a collective because a peer left it while this
// rank waits on that peer, which no socket error would ever report.
void AbandonMesh(gloo::Context& context, const std::string& why);

}  // namespace khorovod
