// HierarchicalAllreduce::Pays: which tensors take the hierarchical path.
// One host: all. Several: every tensor up to the bandwidth-bound size, and
// larger ones only where the flat ring would send clearly more bytes over a
// host's link.
#include <gtest/gtest.h>

#include "backend/shm/hierarchical_allreduce.h"

namespace khorovod::shm {
namespace {

constexpr size_t kLarge = 64 << 20;
constexpr size_t kSmall = HierarchicalAllreduce::kBandwidthBoundBytes;

TEST(HierarchicalChoice, OneHostTakesEveryTensor) {
  EXPECT_TRUE(HierarchicalAllreduce::Pays(4, 1, kLarge));
  EXPECT_TRUE(HierarchicalAllreduce::Pays(2, 1, 4));
}

TEST(HierarchicalChoice, SmallTensorsTakeItOnAnyLayout) {
  EXPECT_TRUE(HierarchicalAllreduce::Pays(8, 4, kSmall));
  EXPECT_TRUE(HierarchicalAllreduce::Pays(16, 8, 1));
}

TEST(HierarchicalChoice, LargeTensorsOnlyWhereTheLinkSavingIsLarge) {
  // 2 hosts x 2: the flat ring sends 1.5x the tensor per link, this path 1x.
  EXPECT_TRUE(HierarchicalAllreduce::Pays(4, 2, kLarge));
  // 2 hosts x 3: 1.67x against 1x.
  EXPECT_TRUE(HierarchicalAllreduce::Pays(6, 2, kLarge));
  // 4 hosts x 2: 1.75x against 1.5x (1.17).
  EXPECT_FALSE(HierarchicalAllreduce::Pays(8, 4, kLarge));
  // 3 hosts x 2: 1.67x against 1.33x (1.25).
  EXPECT_FALSE(HierarchicalAllreduce::Pays(6, 3, kLarge));
  // 4 hosts x 8: 1.94x against 1.5x (1.29): just below.
  EXPECT_FALSE(HierarchicalAllreduce::Pays(32, 4, kLarge));
  EXPECT_FALSE(HierarchicalAllreduce::Pays(8, 4, kSmall + 1));
}

}  // namespace
}  // namespace khorovod::shm
