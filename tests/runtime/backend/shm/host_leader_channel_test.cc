// HostLeaderChannel: on simulated hosts (threads over loopback, one segment
// per host), every rank sees every rank's words in world-rank order, round
// after round, whether a host's ranks are consecutive or interleaved, with
// messages too large for the leader's slot and the Gloo-only primitives
// interleaved; a leader or another rank that leaves, or a world whose
// connections are abandoned, ends every other rank's wait with kUnavailable
// instead of a hang.
#include "backend/shm/host_leader_channel.h"

#include <gloo/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <ostream>
#include <string>
#include <vector>

#include "backend/gloo/rank_subset_context.h"
#include "bootstrap/gloo_mesh.h"
#include "loopback_mesh.h"

namespace khorovod::shm {
namespace {

using std::chrono::milliseconds;

using khorovod::testing::LoopbackWorld;

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

// Runs body(rank, world) on one thread per world rank.
template <class Body>
void OnEveryRank(int size, Body body) {
  gloo::rendezvous::HashStore store;
  std::vector<std::future<void>> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&store, rank, size, &body] {
      auto world = LoopbackWorld(store, rank, size);
      if (world) body(rank, world);
    }));
  }
  for (auto& r : ranks) r.get();
}

// A word that names its rank, round and position, so a stale or misplaced
// word cannot pass for the right one.
uint64_t Word(int rank, int round, size_t i) {
  return (uint64_t(rank) << 48) | (uint64_t(round) << 16) | i;
}

class HostLeaderChannelTest : public ::testing::TestWithParam<Case> {};

TEST_P(HostLeaderChannelTest, EveryRoundGathersEveryRanksWordsInWorldRankOrder) {
  const Case c = GetParam();
  OnEveryRank(c.size(), [&](int rank, const std::shared_ptr<gloo::Context>& world) {
    auto channel = Channel(c, world, milliseconds(20'000));
    ASSERT_TRUE(channel);
    // Every 7th round's result is larger than the leader's slot and takes
    // the world's Gloo channel; every 11th adds the coordinator's primitives.
    const size_t fits = HostLeaderChannel::kSlotBytes / sizeof(uint64_t) / c.size();
    for (int round = 0; round < 200; ++round) {
      const size_t words = round % 7 == 6 ? fits + 1 : 1 + round % 161;
      std::vector<uint64_t> mine(words), all;
      for (size_t i = 0; i < words; ++i) mine[i] = Word(rank, round, i);
      Status s = channel->AllgatherWords(mine, &all);
      ASSERT_TRUE(s.ok()) << "round " << round << ": " << s;
      ASSERT_EQ(all.size(), words * c.size());
      for (int r = 0; r < c.size(); ++r)
        for (size_t i = 0; i < words; ++i)
          ASSERT_EQ(all[r * words + i], Word(r, round, i))
              << "round " << round << " rank " << r << " word " << i;
      if (round % 11 == 10) {
        std::vector<std::string> gathered;
        ASSERT_TRUE(channel->GatherToRoot("rank" + std::to_string(rank), &gathered).ok());
        if (rank == 0) {
          ASSERT_EQ(gathered.size(), static_cast<size_t>(c.size()));
          for (int r = 0; r < c.size(); ++r) EXPECT_EQ(gathered[r], "rank" + std::to_string(r));
        }
        std::string answer = rank == 0 ? "answer" + std::to_string(round) : "";
        ASSERT_TRUE(channel->BroadcastFromRoot(&answer).ok());
        EXPECT_EQ(answer, "answer" + std::to_string(round));
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

// The next round fails with kUnavailable, long before the channel's timeout,
// and so does the one after (broken from then on).
void ExpectNextRoundsFailSoon(ControlChannel& channel) {
  for (int i = 0; i < 2; ++i) {
    std::vector<uint64_t> mine{0}, all;
    const auto start = std::chrono::steady_clock::now();
    Status s = channel.AllgatherWords(mine, &all);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(10'000));
  }
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
  OnEveryRank(c.size(), [&](int rank, const std::shared_ptr<gloo::Context>& world) {
    auto channel = AfterOneRound(c, world);
    ASSERT_TRUE(channel);
    if (rank == leaving) return;  // leaves the generation without arriving again
    ExpectNextRoundsFailSoon(*channel);
  });
}

TEST_P(HostLeaderChannelTest, ARankThatIsNoLeaderLeavesAndEveryOtherRanksWaitEnds) {
  const Case c = GetParam();
  const int leaving = OnLastHost(c, c.per_host - 1);
  OnEveryRank(c.size(), [&](int rank, const std::shared_ptr<gloo::Context>& world) {
    auto channel = AfterOneRound(c, world);
    ASSERT_TRUE(channel);
    if (rank == leaving) return;
    ExpectNextRoundsFailSoon(*channel);
  });
}

TEST_P(HostLeaderChannelTest, AbandoningTheWorldEndsEveryRanksWait) {
  const Case c = GetParam();
  OnEveryRank(c.size(), [&](int rank, const std::shared_ptr<gloo::Context>& world) {
    auto channel = AfterOneRound(c, world);
    ASSERT_TRUE(channel);
    // Rank 0 never comes to the next round: its world is abandoned instead
    // (as the heartbeat thread does for a doomed generation).
    if (rank == 0) AbandonMesh(*world, "test: the generation is doomed");
    ExpectNextRoundsFailSoon(*channel);
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, HostLeaderChannelTest,
                         ::testing::Values(Case{2, 2, false, true}, Case{3, 2, true, true},
                                           Case{2, 3, false, false}, Case{3, 2, false, false}),
                         Name);

}  // namespace
}  // namespace khorovod::shm
