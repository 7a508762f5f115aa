// HostLeaderChannel: on simulated hosts (threads over loopback, one segment
// per host), every rank sees every rank's words in world-rank order, round
// after round, whether a host's ranks are consecutive or interleaved, with
// messages too large for the leader's slot and the Gloo-only primitives
// interleaved; a leader or another rank that leaves, or a world whose
// connections are abandoned, ends every other rank's wait with kUnavailable
// instead of a hang.
#include "backend/shm/host_leader_channel.h"

#include <gloo/context.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "backend/gloo/rank_subset_context.h"
#include "bootstrap/gloo_mesh.h"
#include "control_channel_rounds.h"

namespace khorovod::shm {
namespace {

using std::chrono::milliseconds;

using khorovod::testing::CheckedCoordinatorRound;
using khorovod::testing::CheckedRound;
using khorovod::testing::ExpectNextRoundsFailSoon;
using khorovod::testing::OnEveryLoopbackRank;

struct Case {
  int hosts;
  int per_host;
  bool interleaved;  // rank r on host r % hosts (else host-major: r / per_host)
  bool spin;
  int size() const { return hosts * per_host; }
  int HostOf(int r) const { return interleaved ? r % hosts : r / per_host; }
  int LocalOf(int r) const { return interleaved ? r / hosts : r % per_host; }
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.hosts << "x" << c.per_host << (c.interleaved ? " interleaved" : "")
      << (c.spin ? ", spinning" : ", sleeping");
}

std::string Name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::to_string(c.hosts) + "x" + std::to_string(c.per_host) +
         (c.interleaved ? "Interleaved" : "") + (c.spin ? "Spinning" : "Sleeping");
}

HostLayout LayoutOf(const Case& c) {
  std::vector<Placement> placements;
  for (int r = 0; r < c.size(); ++r)
    placements.push_back(Placement{r, c.size(), c.LocalOf(r), c.per_host, c.HostOf(r), c.hosts});
  auto layout = HostLayout::FromPlacements(placements);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

std::unique_ptr<ControlChannel> Channel(const Case& c, const std::shared_ptr<gloo::Context>& world,
                                        milliseconds timeout) {
  const HostLayout layout = LayoutOf(c);
  auto host = gloo_ops::ConnectRankSubset(world, layout.HostGroup(world->rank), timeout);
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return nullptr;
  auto channel = HostLeaderChannel::Connect(world, *host, layout, timeout, c.spin);
  EXPECT_TRUE(channel.ok()) << channel.status();
  EXPECT_TRUE(channel.ok() && *channel) << "a segment could not be joined";
  return channel.ok() ? std::move(*channel) : nullptr;
}

class HostLeaderChannelTest : public ::testing::TestWithParam<Case> {};

TEST_P(HostLeaderChannelTest, EveryRoundGathersEveryRanksWordsInWorldRankOrder) {
  const Case c = GetParam();
  OnEveryLoopbackRank(
      c.size(), milliseconds(20'000), [&](int rank, const std::shared_ptr<gloo::Context>& world) {
        auto channel = Channel(c, world, milliseconds(20'000));
        ASSERT_TRUE(channel);
        // Every 7th round's result is larger than the leader's slot and takes
        // the world's Gloo channel; every 11th adds the coordinator's primitives.
        const size_t fits = HostLeaderChannel::kSlotBytes / sizeof(uint64_t) / c.size();
        for (int round = 0; round < 200; ++round) {
          const size_t words = round % 7 == 6 ? fits + 1 : 1 + round % 161;
          ASSERT_TRUE(CheckedRound(*channel, rank, c.size(), round, words));
          if (round % 11 == 10) {
            ASSERT_TRUE(CheckedCoordinatorRound(*channel, rank, c.size(), round));
          }
        }
      });
}

// A channel whose first round, with every rank, succeeded.
std::unique_ptr<ControlChannel> AfterOneRound(const Case& c,
                                              const std::shared_ptr<gloo::Context>& world) {
  auto channel = Channel(c, world, milliseconds(30'000));
  if (!channel) return nullptr;
  std::vector<uint64_t> mine{uint64_t(world->rank)}, all;
  Status s = channel->AllgatherWords(mine, &all);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(channel) : nullptr;
}

// The rank of local rank `local` on the last host.
int OnLastHost(const Case& c, int local) {
  for (int r = 0; r < c.size(); ++r)
    if (c.HostOf(r) == c.hosts - 1 && c.LocalOf(r) == local) return r;
  return -1;
}

TEST_P(HostLeaderChannelTest, ALeaderThatLeavesEndsEveryOtherRanksWait) {
  const Case c = GetParam();
  const int leaving = OnLastHost(c, 0);
  OnEveryLoopbackRank(c.size(), milliseconds(20'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        auto channel = AfterOneRound(c, world);
                        ASSERT_TRUE(channel);
                        if (rank == leaving)
                          return;  // leaves the generation without arriving again
                        ExpectNextRoundsFailSoon(*channel, 2);
                      });
}

TEST_P(HostLeaderChannelTest, ARankThatIsNoLeaderLeavesAndEveryOtherRanksWaitEnds) {
  const Case c = GetParam();
  const int leaving = OnLastHost(c, c.per_host - 1);
  OnEveryLoopbackRank(c.size(), milliseconds(20'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        auto channel = AfterOneRound(c, world);
                        ASSERT_TRUE(channel);
                        if (rank == leaving) return;
                        ExpectNextRoundsFailSoon(*channel, 2);
                      });
}

TEST_P(HostLeaderChannelTest, AbandoningTheWorldEndsEveryRanksWait) {
  const Case c = GetParam();
  OnEveryLoopbackRank(c.size(), milliseconds(20'000),
                      [&](int rank, const std::shared_ptr<gloo::Context>& world) {
                        auto channel = AfterOneRound(c, world);
                        ASSERT_TRUE(channel);
                        // Rank 0 never comes to the next round: its world is abandoned instead
                        // (as the heartbeat thread does for a doomed generation).
                        if (rank == 0) AbandonMesh(*world, "test: the generation is doomed");
                        ExpectNextRoundsFailSoon(*channel, 2);
                      });
}

INSTANTIATE_TEST_SUITE_P(Layouts, HostLeaderChannelTest,
                         ::testing::Values(Case{2, 2, false, true}, Case{3, 2, true, true},
                                           Case{2, 3, false, false}, Case{3, 2, false, false}),
                         Name);

}  // namespace
}  // namespace khorovod::shm
