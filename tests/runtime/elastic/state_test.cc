// elastic::State without a running job: snapshots and restore of counters
// and tensors (commit() snapshots before its collective, which fails here).
#include <gtest/gtest.h>

#include "khorovod/elastic.h"

namespace khorovod::elastic {
namespace {

TEST(StateTest, RestoreKeepsCounterReferencesOnTheirOwnCounters) {
  Runtime rt;  // not initialized: commit()'s agreement allreduce fails
  State state(rt);
  // Several counters, so that a map copy would have reused nodes across keys.
  int64_t& trial = state.counter("trial");
  int64_t& armed = state.counter("armed");
  int64_t& step = state.counter("step");
  int64_t& zeta = state.counter("zeta");
  trial = 7;
  armed = 1;
  step = 42;
  zeta = -3;
  EXPECT_FALSE(state.commit().ok());
  trial = 100;
  armed = 200;
  step = 300;
  zeta = 400;
  state.restore();
  EXPECT_EQ(trial, 7);
  EXPECT_EQ(armed, 1);
  EXPECT_EQ(step, 42);
  EXPECT_EQ(zeta, -3);
  EXPECT_EQ(&state.counter("armed"), &armed);
}

TEST(StateTest, RestoreReturnsTensorsToTheSnapshot) {
  Runtime rt;
  State state(rt);
  std::vector<float> w{1.0f, 2.0f, 3.0f};
  state.add_tensor("w", TensorView{w.data(), DataType::kFloat32, {3}, {}});
  EXPECT_FALSE(state.commit().ok());
  w = {9.0f, 9.0f, 9.0f};
  state.restore();
  EXPECT_EQ(w, (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

TEST(StateTest, CounterAddedAfterTheSnapshotRestoresToZero) {
  Runtime rt;
  State state(rt);
  state.counter("a") = 5;
  EXPECT_FALSE(state.commit().ok());
  int64_t& late = state.counter("late");
  late = 11;
  state.restore();
  EXPECT_EQ(late, 0);
  EXPECT_EQ(state.counter("a"), 5);
}

}  // namespace
}  // namespace khorovod::elastic
