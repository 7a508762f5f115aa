// Gloo meshes on loopback for the runtime unit tests: one world rank per
// thread, connected with ConnectAbandonableMesh (so AbandonMesh works on
// them) through a store the test owns.
#pragma once

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <future>
#include <memory>

#include "bootstrap/gloo_mesh.h"

namespace khorovod::testing {

// Gloo writes without MSG_NOSIGNAL, and these worlds share one process: a
// rank that leaves a test closes sockets its peers may still write to. The
// runtime ignores SIGPIPE for the same reason (core/runtime_impl.cc); a
// test that kills a rank must see kUnavailable, not lose the whole binary.
inline std::shared_ptr<gloo::transport::Device> LoopbackDevice() {
  std::signal(SIGPIPE, SIG_IGN);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return gloo::transport::tcp::CreateDevice(attr);
}

inline MeshOptions MeshOptionsFor(int rank, int size, std::chrono::milliseconds timeout) {
  MeshOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  return o;
}

// Rank `rank` of a `size`-rank world; null (with a test failure) when the
// connect failed.
inline std::shared_ptr<gloo::Context> LoopbackWorld(
    gloo::rendezvous::Store& store, int rank, int size,
    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto ctx = ConnectAbandonableMesh(store, LoopbackDevice(), MeshOptionsFor(rank, size, timeout));
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return ctx.ok() ? *ctx : nullptr;
}

// Ranks 0 and 1 of a two-rank world, connected concurrently; both null
// (with a test failure) when either connect failed.
struct LoopbackPair {
  std::shared_ptr<gloo::Context> rank0, rank1;
};
inline LoopbackPair ConnectedPair(gloo::rendezvous::Store& store,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto rank1 = std::async(std::launch::async, [&] { return LoopbackWorld(store, 1, 2, timeout); });
  auto rank0 = LoopbackWorld(store, 0, 2, timeout);
  LoopbackPair pair{rank0, rank1.get()};
  if (!pair.rank0 || !pair.rank1) return {};
  return pair;
}

}  // namespace khorovod::testing
