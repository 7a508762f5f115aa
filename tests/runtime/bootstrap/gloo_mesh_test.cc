// ConnectAbandonableMesh: a full mesh forms and carries data; a peer that
// published its address and died no longer holds the others in Gloo's
// connect (five times the timeout), because the abandon predicate or the
// connect deadline fails the pending pairs. AbandonMesh: a rank waiting on a
// live peer that will never answer (it left the generation) is released.
#include "bootstrap/gloo_mesh.h"

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "backend/gloo/gloo_ops.h"
#include "bootstrap/interruptible_waits.h"
#include "loopback_mesh.h"

namespace khorovod {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

using khorovod::testing::LoopbackDevice;
constexpr auto Options = khorovod::testing::MeshOptionsFor;

class MeshSizes : public ::testing::TestWithParam<int> {};

TEST_P(MeshSizes, FormsAndReduces) {
  const int size = GetParam();
  gloo::rendezvous::HashStore store;
  std::vector<std::future<float>> sums;
  for (int rank = 0; rank < size; ++rank) {
    sums.push_back(std::async(std::launch::async, [&store, rank, size] {
      auto context =
          ConnectAbandonableMesh(store, LoopbackDevice(), Options(rank, size, milliseconds(20000)));
      EXPECT_TRUE(context.ok()) << context.status().message();
      if (!context.ok()) return -1.0f;
      float value = static_cast<float>(rank + 1);
      gloo::AllreduceOptions opts(*context);
      opts.setOutput(&value, 1);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(opts);
      return value;
    }));
  }
  const float expected = static_cast<float>(size * (size + 1) / 2);
  for (auto& s : sums) EXPECT_EQ(s.get(), expected);
}

INSTANTIATE_TEST_SUITE_P(Sizes, MeshSizes, ::testing::Values(1, 2, 3, 5));

// Rank 2 publishes its addresses and vanishes, as a worker SIGKILLed right
// after it did. The survivors return when `abandon` turns true, not 5x later.
TEST(GlooMesh, DeadPeerIsAbandonedWhenTheWorldChanges) {
  const int size = 3;
  gloo::rendezvous::HashStore store;
  {
    auto device = LoopbackDevice();
    auto transport = device->createContext(2, size);
    std::vector<char> addresses;
    for (int peer = 0; peer < 2; ++peer) {
      auto bytes = transport->createPair(peer)->address().bytes();
      addresses.insert(addresses.end(), bytes.begin(), bytes.end());
    }
    store.set("mesh/2", addresses);
  }  // its pairs and listening sockets are gone
  std::atomic<bool> world_changed{false};
  std::vector<std::future<Status>> survivors;
  const auto start = Clock::now();
  for (int rank = 0; rank < 2; ++rank) {
    survivors.push_back(std::async(std::launch::async, [&, rank] {
      MeshOptions o = Options(rank, size, milliseconds(60000));
      o.abandon = [&] { return world_changed.load(); };
      return ConnectAbandonableMesh(store, LoopbackDevice(), o).status();
    }));
  }
  std::this_thread::sleep_for(milliseconds(300));
  world_changed = true;
  for (auto& s : survivors) {
    ASSERT_EQ(s.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    Status st = s.get();
    // Gloo may also refuse at once (the side that dials a closed port).
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
}

// Rank 1 was put in the generation but died before it published anything
// (a replacement killed while it starts). Rank 0, waiting for its address,
// returns once `abandon` turns true, not at the connect timeout.
TEST(GlooMesh, APeerThatNeverPublishedIsAbandonedWhenTheWorldChanges) {
  gloo::rendezvous::HashStore store;
  std::atomic<bool> world_changed{false};
  MeshOptions o = Options(0, 2, milliseconds(60000));
  o.abandon = [&] { return world_changed.load(); };
  const auto start = Clock::now();
  auto survivor = std::async(std::launch::async, [&] {
    return ConnectAbandonableMesh(store, LoopbackDevice(), o).status();
  });
  std::this_thread::sleep_for(milliseconds(300));
  world_changed = true;
  ASSERT_EQ(survivor.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  Status st = survivor.get();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
  EXPECT_NE(st.message().find("newer world"), std::string::npos) << st.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

// With no news from the rendezvous, the connect deadline (not Gloo's 5x)
// bounds the wait for a dead peer. Which side of a pair dials depends on the
// random ports, so several rounds make sure the waiting side is exercised.
TEST(GlooMesh, DeadPeerIsAbandonedAtTheDeadline) {
  int waited = 0;
  for (int round = 0; round < 6; ++round) {
    gloo::rendezvous::HashStore store;
    {
      auto device = LoopbackDevice();
      auto transport = device->createContext(1, 2);
      store.set("mesh/1", transport->createPair(0)->address().bytes());
    }
    const auto start = Clock::now();
    auto context =
        ConnectAbandonableMesh(store, LoopbackDevice(), Options(0, 2, milliseconds(1000)));
    const auto took = Clock::now() - start;
    ASSERT_FALSE(context.ok());
    EXPECT_EQ(context.status().code(), StatusCode::kUnavailable);
    EXPECT_LT(took, std::chrono::seconds(4))
        << "Gloo alone would wait 5 s: " << context.status().message();
    if (took >= milliseconds(900)) ++waited;
  }
  RecordProperty("rounds_that_waited_for_the_deadline", waited);
}

// Two connected ranks; rank 1 stays alive but never takes part, as a peer
// that went back to the rendezvous. Rank 0's operation ends when its mesh is
// abandoned, long before the context's timeout.
class AbandonWhileWaiting : public ::testing::TestWithParam<bool> {};

TEST_P(AbandonWhileWaiting, EndsTheWaitOnASilentPeer) {
  const bool sending = GetParam();
  gloo::rendezvous::HashStore store;
  auto [context, silent] = khorovod::testing::ConnectedPair(store);  // rank 1 never takes part
  ASSERT_TRUE(context);
  std::vector<char> payload(1 << 20, 'x');
  auto waiter = std::async(std::launch::async, [&] {
    auto buffer = context->createUnboundBuffer(payload.data(), payload.size());
    try {
      // A send whose receiver never posts a receive waits like a receive.
      if (sending) {
        buffer->send(1, 7);
        buffer->waitSend(milliseconds(60000));
      } else {
        buffer->recv(1, 7);
        buffer->waitRecv(milliseconds(60000));
      }
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("completed");
  });
  ASSERT_EQ(waiter.wait_for(milliseconds(300)), std::future_status::timeout);
  const auto start = Clock::now();
  AbandonMesh(*context, "the generation is re-forming");
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const std::string what = waiter.get();
  EXPECT_NE(what.find("the generation is re-forming"), std::string::npos) << what;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

INSTANTIATE_TEST_SUITE_P(Ops, AbandonWhileWaiting, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Send" : "Recv"; });

// The broadcast (an elastic state sync's) waits on its root like any
// operation on the mesh: a root that went back to the rendezvous without
// sending ends the wait when the generation is abandoned.
TEST(GlooMesh, AbandoningEndsABroadcastWaitingOnASilentRoot) {
  gloo::rendezvous::HashStore store;
  auto [context, silent] = khorovod::testing::ConnectedPair(store);  // rank 1 never takes part
  ASSERT_TRUE(context);
  std::vector<char> payload(1 << 20, 'x');
  auto waiter = std::async(std::launch::async, [&] {
    return gloo_ops::BroadcastBytes(context, payload.data(), payload.size(), 1);
  });
  ASSERT_EQ(waiter.wait_for(milliseconds(300)), std::future_status::timeout);
  const auto start = Clock::now();
  AbandonMesh(*context, "the generation is re-forming");
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  Status s = waiter.get();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

// The mesh's waits can be interrupted without any pair failing: the path
// that ends a send Gloo keeps queued after its pair failed.
TEST(GlooMesh, InterruptedWaitsThrowAndLaterOnesFailAtOnce) {
  gloo::rendezvous::HashStore store;
  auto [context, silent] = khorovod::testing::ConnectedPair(store);  // rank 1 never takes part
  ASSERT_TRUE(context);
  auto* waits = dynamic_cast<InterruptibleWaits*>(context.get());
  ASSERT_NE(waits, nullptr);
  std::vector<char> payload(64);
  auto waiter = std::async(std::launch::async, [&] {
    auto buffer = context->createUnboundBuffer(payload.data(), payload.size());
    WaitScope scope(*context, {buffer.get()});
    buffer->recv(1, 9);
    try {
      scope.WaitRecv(*buffer, milliseconds(60000));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("completed");
  });
  ASSERT_EQ(waiter.wait_for(milliseconds(300)), std::future_status::timeout);
  waits->Interrupt();
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(waiter.get().find("abandoned"), std::string::npos);
  auto later = context->createUnboundBuffer(payload.data(), payload.size());
  WaitScope scope(*context, {later.get()});
  EXPECT_THROW(scope.Check(), std::runtime_error);
}

}  // namespace
}  // namespace khorovod
