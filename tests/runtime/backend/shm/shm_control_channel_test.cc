// ShmControlChannel: every rank (a thread here, over loopback and one
// segment) sees every rank's words in rank order, round after round, with
// messages too large for a slot and the Gloo-only primitives interleaved;
// a rank that leaves, or a world whose connections are abandoned, ends its
// peers' waits with kUnavailable instead of a hang.
#include "backend/shm/shm_control_channel.h"

#include <gloo/context.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/gloo_mesh.h"
#include "control_channel_rounds.h"

namespace khorovod::shm {
namespace {

using std::chrono::milliseconds;

using khorovod::testing::CheckedCoordinatorRound;
using khorovod::testing::CheckedRound;
using khorovod::testing::ExpectNextRoundsFailSoon;
using khorovod::testing::OnEveryLoopbackRank;

std::unique_ptr<ControlChannel> Channel(const std::shared_ptr<gloo::Context>& world,
                                        milliseconds timeout, bool spin) {
  auto channel = ShmControlChannel::Connect(world, timeout, spin);
  EXPECT_TRUE(channel.ok()) << channel.status();
  EXPECT_TRUE(channel.ok() && *channel) << "the segment could not be joined";
  return channel.ok() ? std::move(*channel) : nullptr;
}

struct Case {
  int ranks;
  bool spin;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.ranks << " ranks, " << (c.spin ? "spinning" : "sleeping");
}

std::string Name(const ::testing::TestParamInfo<Case>& info) {
  return std::to_string(info.param.ranks) + "ranks" + (info.param.spin ? "Spinning" : "Sleeping");
}

class ShmControlChannelTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShmControlChannelTest, EveryRoundGathersEveryRanksWordsInRankOrder) {
  const Case c = GetParam();
  OnEveryLoopbackRank(c.ranks, milliseconds(20'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        auto channel = Channel(world, milliseconds(20'000), c.spin);
                        ASSERT_TRUE(channel);
                        // Small messages take shared memory; every 7th round is larger than a
                        // slot and takes Gloo; every 11th adds the coordinator's primitives.
                        const size_t slot_words = ShmControlChannel::kSlotBytes / sizeof(uint64_t);
                        for (int round = 0; round < 300; ++round) {
                          const size_t words = round % 7 == 6 ? slot_words + 3 : 1 + round % 161;
                          ASSERT_TRUE(CheckedRound(*channel, rank, c.ranks, round, words));
                          if (round % 11 == 10) {
                            ASSERT_TRUE(CheckedCoordinatorRound(*channel, rank, c.ranks, round));
                          }
                        }
                      });
}

// A channel whose first round, with every rank, succeeded.
std::unique_ptr<ControlChannel> AfterOneRound(const std::shared_ptr<gloo::Context>& world,
                                              milliseconds timeout, bool spin) {
  auto channel = Channel(world, timeout, spin);
  if (!channel) return nullptr;
  std::vector<uint64_t> mine{uint64_t(world->rank)}, all;
  Status s = channel->AllgatherWords(mine, &all);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(channel) : nullptr;
}

TEST_P(ShmControlChannelTest, ARankThatLeavesEndsTheOthersWaitAtOnce) {
  const Case c = GetParam();
  OnEveryLoopbackRank(
      c.ranks, milliseconds(20'000), [&](int rank, const std::shared_ptr<gloo::Context>& world) {
        auto channel = AfterOneRound(world, milliseconds(30'000), c.spin);
        ASSERT_TRUE(channel);
        if (rank == c.ranks - 1) return;        // leaves the generation without arriving again
        ExpectNextRoundsFailSoon(*channel, 2);  // broken from then on, without waiting again
      });
}

TEST_P(ShmControlChannelTest, AbandoningTheWorldEndsEveryRanksWait) {
  const Case c = GetParam();
  OnEveryLoopbackRank(c.ranks, milliseconds(20'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        auto channel = AfterOneRound(world, milliseconds(30'000), c.spin);
                        ASSERT_TRUE(channel);
                        // Rank 0 never comes to the next round: its world is abandoned instead
                        // (as the heartbeat thread does for a doomed generation).
                        if (rank == 0) AbandonMesh(*world, "test: the generation is doomed");
                        ExpectNextRoundsFailSoon(*channel, 1);
                      });
}

// A peer that lives on without arriving (a stopped process) neither dies nor
// departs: only the rendezvous's heartbeat timeout tells, and then the
// elastic heartbeat abandons the world. That must end the wait on it too.
TEST_P(ShmControlChannelTest, AbandoningTheWorldEndsTheWaitOnAPeerThatNeverArrives) {
  const Case c = GetParam();
  std::atomic<int> done{0};
  OnEveryLoopbackRank(c.ranks, milliseconds(20'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        auto channel = AfterOneRound(world, milliseconds(60'000), c.spin);
                        ASSERT_TRUE(channel);
                        if (rank == 0) {  // stays attached and alive, and never arrives again
                          for (int i = 0; i < 3000 && done.load() < c.ranks - 1; ++i)
                            std::this_thread::sleep_for(milliseconds(10));
                          return;
                        }
                        // Abandoned while (most likely) already waiting; abandoned before the
                        // wait, the round fails at its start, which passes as well.
                        std::thread heartbeat([world] {
                          std::this_thread::sleep_for(milliseconds(200));
                          AbandonMesh(*world, "test: a member missed its heartbeats");
                        });
                        ExpectNextRoundsFailSoon(*channel, 1);
                        heartbeat.join();
                        done.fetch_add(1);
                      });
}

INSTANTIATE_TEST_SUITE_P(Sizes, ShmControlChannelTest,
                         ::testing::Values(Case{2, true}, Case{3, true}, Case{4, true},
                                           Case{2, false}, Case{4, false}),
                         Name);

}  // namespace
}  // namespace khorovod::shm
