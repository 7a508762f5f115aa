// HierarchicalAllreduce::TakesWithoutTrial: which tensors take the
// hierarchical path with no trial against the flat ring. One host: all.
// Several: every tensor up to the bandwidth-bound size; larger ones are
// left to the shm backend's trial (path_trial_test.cc).
#include <gtest/gtest.h>

#include "backend/shm/hierarchical_allreduce.h"

namespace khorovod::shm {
namespace {

constexpr size_t kLarge = 64 << 20;
constexpr size_t kSmall = HierarchicalAllreduce::kBandwidthBoundBytes;

TEST(HierarchicalChoice, OneHostTakesEveryTensor) {
  EXPECT_TRUE(HierarchicalAllreduce::TakesWithoutTrial(1, kLarge));
  EXPECT_TRUE(HierarchicalAllreduce::TakesWithoutTrial(1, 4));
}

TEST(HierarchicalChoice, SmallTensorsTakeItOnAnyLayout) {
  EXPECT_TRUE(HierarchicalAllreduce::TakesWithoutTrial(4, kSmall));
  EXPECT_TRUE(HierarchicalAllreduce::TakesWithoutTrial(8, 1));
}

TEST(HierarchicalChoice, LargeTensorsAcrossHostsGoToTheTrial) {
  EXPECT_FALSE(HierarchicalAllreduce::TakesWithoutTrial(2, kSmall + 1));
  EXPECT_FALSE(HierarchicalAllreduce::TakesWithoutTrial(3, kLarge));
  EXPECT_FALSE(HierarchicalAllreduce::TakesWithoutTrial(4, kLarge));
}

}  // namespace
}  // namespace khorovod::shm
