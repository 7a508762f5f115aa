// HostLayout: hosts and groups come from the placements (not from rank
// arithmetic), uniform layouts are recognized, uneven ones are not, and
// contradictory placements are refused.
#include "backend/shm/host_layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace khorovod::shm {
namespace {

// Placements for ranks whose hosts are given by host_of[r]; local ranks in
// rank order within each host.
std::vector<Placement> Placements(const std::vector<int>& host_of) {
  const int size = static_cast<int>(host_of.size());
  int hosts = 0;
  for (int h : host_of) hosts = std::max(hosts, h + 1);
  std::vector<int> per_host(static_cast<size_t>(hosts), 0);
  for (int h : host_of) ++per_host[static_cast<size_t>(h)];
  std::vector<int> next(static_cast<size_t>(hosts), 0);
  std::vector<Placement> out;
  for (int r = 0; r < size; ++r) {
    const int h = host_of[static_cast<size_t>(r)];
    out.push_back(Placement{r, size, next[static_cast<size_t>(h)]++,
                            per_host[static_cast<size_t>(h)], h, hosts});
  }
  return out;
}

TEST(HostLayout, HostMajorTwoByThree) {
  auto layout = HostLayout::FromPlacements(Placements({0, 0, 0, 1, 1, 1}));
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_TRUE(layout->Uniform());
  EXPECT_EQ(layout->hosts(), 2);
  EXPECT_EQ(layout->ranks_per_host(), 3);
  EXPECT_EQ(layout->HostGroup(4), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(layout->CrossGroup(4), (std::vector<int>{1, 4}));
  EXPECT_EQ(layout->CrossGroup(0), (std::vector<int>{0, 3}));
  EXPECT_EQ(layout->LocalRankOf(5), 2);
}

TEST(HostLayout, InterleavedHostsFollowThePlacementNotTheRank) {
  // Ranks alternate between three hosts.
  auto layout = HostLayout::FromPlacements(Placements({0, 1, 2, 0, 1, 2}));
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_TRUE(layout->Uniform());
  EXPECT_EQ(layout->hosts(), 3);
  EXPECT_EQ(layout->HostGroup(1), (std::vector<int>{1, 4}));
  EXPECT_EQ(layout->CrossGroup(4), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(layout->CrossGroup(2), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(layout->HostOf(5), 2);
}

TEST(HostLayout, UnevenHostsAreNotUniform) {
  auto layout = HostLayout::FromPlacements(Placements({0, 0, 1}));
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_FALSE(layout->Uniform());
  EXPECT_EQ(layout->HostGroup(2), (std::vector<int>{2}));
}

TEST(HostLayout, OneHostOrOneRankPerHostIsNotHierarchical) {
  auto one_host = HostLayout::FromPlacements(Placements({0, 0, 0, 0}));
  ASSERT_TRUE(one_host.ok()) << one_host.status();
  EXPECT_FALSE(one_host->Uniform());
  auto one_each = HostLayout::FromPlacements(Placements({0, 1, 2}));
  ASSERT_TRUE(one_each.ok()) << one_each.status();
  EXPECT_FALSE(one_each->Uniform());
}

TEST(HostLayout, AHostWithoutRanksIsNotUniform) {
  std::vector<Placement> p = Placements({0, 0, 1, 1});
  for (auto& q : p) q.cross_size = 3;  // host 2 is empty
  auto layout = HostLayout::FromPlacements(p);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_FALSE(layout->Uniform());
}

TEST(HostLayout, ContradictionsAreRefused) {
  std::vector<Placement> twice = Placements({0, 0, 1, 1});
  twice[1].local_rank = 0;  // two ranks at host 0, local rank 0
  EXPECT_EQ(HostLayout::FromPlacements(twice).status().code(), StatusCode::kInvalidArgument);

  std::vector<Placement> sizes = Placements({0, 0, 1, 1});
  sizes[3].local_size = 3;  // host 1 claims a third rank nobody is
  EXPECT_EQ(HostLayout::FromPlacements(sizes).status().code(), StatusCode::kInvalidArgument);

  std::vector<Placement> hosts = Placements({0, 0, 1, 1});
  hosts[2].cross_size = 3;
  EXPECT_EQ(HostLayout::FromPlacements(hosts).status().code(), StatusCode::kInvalidArgument);

  std::vector<Placement> ranks = Placements({0, 0, 1, 1});
  ranks[2].rank = 1;
  EXPECT_EQ(HostLayout::FromPlacements(ranks).status().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(HostLayout::FromPlacements({}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace khorovod::shm
