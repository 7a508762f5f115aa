// PathTrial: the schedule of the large allreduces run on each path (one
// untimed warm-up each, then ABBA, half each), when the world's sums are
// due, and the verdict they give (the flat ring unless the hierarchical
// path is clearly faster per byte).
#include "backend/shm/path_trial.h"

#include <gtest/gtest.h>

#include <vector>

namespace khorovod::shm {
namespace {

using Path = PathTrial::Path;
constexpr int kRuns = PathTrial::kWarmups + PathTrial::kTrials;
constexpr double kMiB = 1 << 20;

// Runs the whole trial: each path's allreduce takes its own seconds per
// MiB, for sizes that alternate between 8 and 64 MiB; the warm-ups take
// 100 s, which must not count.
PathTrial RunTrial(double flat_seconds_per_mib, double hierarchical_seconds_per_mib) {
  PathTrial t;
  for (int i = 0; i < kRuns; ++i) {
    const Path p = t.Next();
    const size_t mib = i % 2 ? 64 : 8;
    const double rate = p == Path::kFlat ? flat_seconds_per_mib : hierarchical_seconds_per_mib;
    t.Record(p, mib << 20, i < PathTrial::kWarmups ? 100.0 : mib * rate);
  }
  return t;
}

TEST(PathTrial, WarmsUpBothThenAlternatesInAbbaOrder) {
  PathTrial t;
  std::vector<Path> seen;
  for (int i = 0; i < kRuns; ++i) {
    seen.push_back(t.Next());
    EXPECT_FALSE(t.AgreementDue());
    t.Record(seen.back(), 1 << 20, 0.01);
  }
  const Path H = Path::kHierarchical, F = Path::kFlat;
  EXPECT_EQ(seen, (std::vector<Path>{H, F, H, F, F, H, H, F, F, H, H, F, F, H}));
  EXPECT_TRUE(t.AgreementDue());
  EXPECT_FALSE(t.verdict().has_value());
}

TEST(PathTrial, SumsHoldEachPathsTimedSecondsAndBytes) {
  const PathTrial t = RunTrial(0.002, 0.001);
  // Timed runs 2..13: hierarchical at 2, 5, 6, 9, 10, 13 (8, 64, 8, 64, 8,
  // 64 MiB), flat at the others (64, 8, 64, 8, 64, 8 MiB).
  EXPECT_DOUBLE_EQ(t.sums()[1], 216 * kMiB);
  EXPECT_DOUBLE_EQ(t.sums()[3], 216 * kMiB);
  EXPECT_DOUBLE_EQ(t.sums()[0], 216 * 0.002);
  EXPECT_DOUBLE_EQ(t.sums()[2], 216 * 0.001);
}

TEST(PathTrial, TheFasterPathPerByteWinsAndHolds) {
  for (const bool hierarchical_faster : {true, false}) {
    PathTrial t = hierarchical_faster ? RunTrial(0.002, 0.0015) : RunTrial(0.0015, 0.002);
    t.Agree(t.sums());
    const Path want = hierarchical_faster ? Path::kHierarchical : Path::kFlat;
    ASSERT_EQ(t.verdict(), want);
    EXPECT_FALSE(t.AgreementDue());
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(t.Next(), want);
      t.Record(Path::kFlat, 1, 1e9);  // ignored once decided
    }
    EXPECT_EQ(t.verdict(), want);
  }
}

TEST(PathTrial, TheWorldsSumsDecideNotThisRanks) {
  // This rank saw the hierarchical path win; the world's totals say flat.
  PathTrial t = RunTrial(0.002, 0.001);
  t.Agree({216 * 0.003, 3 * 216 * kMiB, 216 * 0.004, 3 * 216 * kMiB});
  EXPECT_EQ(t.verdict(), Path::kFlat);
}

TEST(PathTrial, ANearTieGoesToTheFlatRing) {
  for (const double hierarchical : {0.001, 0.00096}) {
    PathTrial t = RunTrial(0.001, hierarchical);
    t.Agree(t.sums());
    EXPECT_EQ(t.verdict(), Path::kFlat) << hierarchical;
  }
  PathTrial t = RunTrial(0.001, 0.00094);
  t.Agree(t.sums());
  EXPECT_EQ(t.verdict(), Path::kHierarchical);
}

}  // namespace
}  // namespace khorovod::shm
