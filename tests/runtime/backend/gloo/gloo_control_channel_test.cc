// GlooControlChannel: every rank (a thread here, over loopback) sees every
// rank's words in rank order, round after round, once its repeated sizes
// run over bound buffers (backend/gloo/gloo_bound_allgather.h): with other
// sizes, more repeated sizes than it binds, and the coordinator's
// primitives interleaved; and a rank that leaves, or a world whose
// connections are abandoned, ends its peers' bound waits with kUnavailable
// instead of a hang. The bound buffers leave the world's connections as
// they were: their send buffers keep the kernel's autotuning.
#include "backend/gloo/gloo_control_channel.h"

#include <dirent.h>
#include <gloo/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/gloo_mesh.h"
#include "control_channel_rounds.h"

namespace khorovod {
namespace {

using std::chrono::milliseconds;

using khorovod::testing::CheckedCoordinatorRound;
using khorovod::testing::CheckedRound;
using khorovod::testing::ExpectNextRoundsFailSoon;
using khorovod::testing::OnEveryLoopbackRank;

class GlooControlChannelTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooControlChannelTest, EveryRoundGathersEveryRanksWordsInRankOrder) {
  const int size = GetParam();
  OnEveryLoopbackRank(size, milliseconds(20'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        GlooControlChannel channel(world);
                        for (int round = 0; round < 400; ++round) {
                          // Mostly the negotiation's size; every 5th round one of seven other
                          // sizes, each repeated, so more sizes repeat than get bound buffers.
                          const size_t words = round % 5 == 4 ? 1 + (round / 5) % 7 * 40 : 131;
                          ASSERT_TRUE(CheckedRound(channel, rank, size, round, words));
                          if (round % 11 == 10) {
                            ASSERT_TRUE(CheckedCoordinatorRound(channel, rank, size, round));
                          }
                        }
                      });
}

// Three rounds of one size: the last one on bound buffers.
constexpr size_t kWords = 9;
bool OnBoundBuffers(ControlChannel& channel, int rank, int size) {
  for (int round = 0; round < 3; ++round) {
    if (!CheckedRound(channel, rank, size, round, kWords)) return false;
  }
  return true;
}

TEST_P(GlooControlChannelTest, ARankThatLeavesEndsTheOthersBoundWait) {
  const int size = GetParam();
  OnEveryLoopbackRank(size, milliseconds(60'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        auto channel = std::make_unique<GlooControlChannel>(world);
                        ASSERT_TRUE(OnBoundBuffers(*channel, rank, size));
                        if (rank == size - 1) {  // leaves: its channel and connections close
                          channel.reset();
                          AbandonMesh(*world, "test: this rank left");
                          return;
                        }
                        ExpectNextRoundsFailSoon(*channel, 1, kWords);
                      });
}

// A peer that lives on without arriving (a stopped process): only the
// elastic heartbeat tells, and abandons the world; that ends the wait.
TEST_P(GlooControlChannelTest, AbandoningTheWorldEndsTheBoundWaitOnAPeerThatNeverArrives) {
  const int size = GetParam();
  std::atomic<int> done{0};
  OnEveryLoopbackRank(size, milliseconds(60'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        GlooControlChannel channel(world);
                        ASSERT_TRUE(OnBoundBuffers(channel, rank, size));
                        if (rank == 0) {  // stays connected and alive, and never arrives again
                          for (int i = 0; i < 3000 && done.load() < size - 1; ++i)
                            std::this_thread::sleep_for(milliseconds(10));
                          return;
                        }
                        std::thread heartbeat([world] {
                          std::this_thread::sleep_for(milliseconds(200));
                          AbandonMesh(*world, "test: a member missed its heartbeats");
                        });
                        ExpectNextRoundsFailSoon(channel, 1, kWords);
                        heartbeat.join();
                        done.fetch_add(1);
                      });
}

// Gloo fails a receive it completed when the pair closes right after it,
// so a rank that ends (closes) once it has its last round must not fail
// that round for a peer still collecting it. Repeated, since whether the
// close overtakes the peer's wait is up to the scheduler.
TEST_P(GlooControlChannelTest, TheLastRoundHoldsWhenPeersCloseRightAfterIt) {
  const int size = GetParam();
  for (int attempt = 0; attempt < 15; ++attempt) {
    OnEveryLoopbackRank(size, milliseconds(20'000),
                        [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                          GlooControlChannel channel(world);
                          EXPECT_TRUE(OnBoundBuffers(channel, rank, size)) << "attempt " << attempt;
                        });
  }
}

// SO_SNDBUF of the socket bound to `pair`'s local address, found among this
// process's descriptors (Gloo keeps the descriptor to itself); -1 if none.
int SendBufferOf(const gloo::transport::Pair& pair) {
  const auto& tcp = dynamic_cast<const gloo::transport::tcp::Address&>(pair.address());
  const sockaddr_storage want = tcp.getSockaddr();
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(fds)) {
    const int fd = std::atoi(entry->d_name);
    sockaddr_storage have{};
    socklen_t length = sizeof have;
    if (fd <= 2 || getsockname(fd, reinterpret_cast<sockaddr*>(&have), &length) != 0) continue;
    if (length > sizeof have || std::memcmp(&have, &want, length) != 0) continue;
    int bytes = 0;
    socklen_t size = sizeof bytes;
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &size) == 0) found = bytes;
    break;
  }
  closedir(fds);
  return found;
}

// The kernel's starting send buffer for a TCP connection (tcp_wmem's
// middle value); autotuning only grows it, a fixed SO_SNDBUF can shrink it.
int AutotunedStart() {
  std::ifstream wmem("/proc/sys/net/ipv4/tcp_wmem");
  int low = 0, start = 0;
  wmem >> low >> start;
  return start;
}

// Gloo sizes a connection's send buffer to the first bound message sent on
// it (SO_SNDBUF: a few words give the kernel's floor, 4608 bytes, and stop
// its autotuning). On the world's connections that starved every large
// transfer of the data plane (about 1.6 MB/s at 6 ranks), so the bound
// buffers must be on connections of their own.
TEST_P(GlooControlChannelTest, BoundRoundsLeaveTheWorldsSendBuffersToTheKernel) {
  const int size = GetParam();
  const int start = AutotunedStart();
  ASSERT_GT(start, 4608) << "tcp_wmem's default is at the kernel's floor here";
  OnEveryLoopbackRank(size, milliseconds(20'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        GlooControlChannel channel(world);
                        ASSERT_TRUE(OnBoundBuffers(channel, rank, size));
                        for (int peer = 0; peer < size; ++peer) {
                          if (peer == rank) continue;
                          EXPECT_GE(SendBufferOf(*world->getPair(peer)), start)
                              << "rank " << rank << " to " << peer;
                        }
                      });
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooControlChannelTest, ::testing::Values(2, 3, 5));

}  // namespace
}  // namespace khorovod
