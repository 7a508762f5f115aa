// SpawnPlacement: Horovod's host-by-host rank assignment at spawn time.
#include "launcher/spawn_placement.h"

#include <gtest/gtest.h>

namespace khorovod::launcher {
namespace {

TEST(SpawnPlacement, RanksGoHostByHostInDiscoveryOrder) {
  const std::vector<DiscoveredHost> hosts = {{"localhost", 2}, {"127.0.0.1", 2}};
  auto p = SpawnPlacement(hosts, 4, "127.0.0.1", 1);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, (Placement{3, 4, 1, 2, 1, 2}));
  auto first = SpawnPlacement(hosts, 4, "localhost", 0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, (Placement{0, 4, 0, 2, 0, 2}));
}

TEST(SpawnPlacement, BlacklistedHostHasNoSlotsAndShiftsTheOthers) {
  const std::vector<DiscoveredHost> hosts = {{"localhost", 0}, {"127.0.0.1", 2}};
  auto p = SpawnPlacement(hosts, 4, "127.0.0.1", 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Placement{0, 2, 0, 2, 0, 1}));
  EXPECT_FALSE(SpawnPlacement(hosts, 4, "localhost", 0).ok());
}

TEST(SpawnPlacement, TheCapCutsTheWorld) {
  const std::vector<DiscoveredHost> hosts = {{"a", 2}, {"b", 2}, {"c", 2}};
  auto p = SpawnPlacement(hosts, 3, "b", 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Placement{2, 3, 0, 1, 1, 2}));
  EXPECT_FALSE(SpawnPlacement(hosts, 3, "b", 1).ok());
  EXPECT_FALSE(SpawnPlacement(hosts, 3, "c", 0).ok());
  EXPECT_FALSE(SpawnPlacement(hosts, 0, "a", 0).ok());
  EXPECT_FALSE(SpawnPlacement(hosts, 3, "d", 0).ok());
  EXPECT_FALSE(SpawnPlacement(hosts, 3, "a", -1).ok());
}

}  // namespace
}  // namespace khorovod::launcher
