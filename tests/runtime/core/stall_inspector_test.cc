// StallInspector: Horovod's warning and shutdown decisions, with explicit
// clock readings.
#include "core/stall_inspector.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace khorovod {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
const Clock::time_point kT0{std::chrono::hours(1)};

bool Has(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

TEST(StallInspector, DueEveryWarningPeriodWhileSomethingIsPending) {
  StallInspector inspector({true, 2s, 0s});
  EXPECT_FALSE(inspector.Due(false, kT0)) << "nothing pending";
  EXPECT_TRUE(inspector.Due(true, kT0));
  EXPECT_FALSE(inspector.Inspect({}, kT0).has_value());
  EXPECT_FALSE(inspector.Due(true, kT0 + 1999ms));
  EXPECT_TRUE(inspector.Due(true, kT0 + 2s));
}

TEST(StallInspector, WarnsNamingTensorsByMissingRankAndDoesNotShutDown) {
  StallInspector inspector({true, 2s, 0s});
  std::vector<PendingTensor> pending = {
      {"a", {1, 3}, kT0}, {"b", {1}, kT0 + 500ms}, {"young", {2}, kT0 + 1500ms}};
  EXPECT_FALSE(inspector.Inspect(pending, kT0 + 1999ms).has_value()) << "nothing waited 2 s yet";
  auto report = inspector.Inspect(pending, kT0 + 3s);
  ASSERT_TRUE(report.has_value());
  EXPECT_FALSE(report->shut_down);
  EXPECT_TRUE(Has(report->message, "for more than 2 seconds")) << report->message;
  EXPECT_TRUE(Has(report->message, "Missing ranks:\n1: [a, b]\n3: [a]")) << report->message;
  EXPECT_FALSE(Has(report->message, "young")) << report->message;
  EXPECT_FALSE(inspector.Inspect(pending, kT0 + 1h)->shut_down)
      << "without a shutdown time it only warns";
}

TEST(StallInspector, ShutsDownPastTheShutdownTimeMarkingTheRanks) {
  StallInspector inspector({true, 2s, 5s});
  std::vector<PendingTensor> pending = {{"a", {1}, kT0}, {"b", {2}, kT0 + 3s}};
  EXPECT_FALSE(inspector.Inspect(pending, kT0 + 4s)->shut_down);
  auto report = inspector.Inspect(pending, kT0 + 5s);
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->shut_down);
  EXPECT_TRUE(Has(report->message, "1!: [a]")) << report->message;
  EXPECT_TRUE(Has(report->message, "\n2: [b]")) << report->message;
  EXPECT_TRUE(Has(report->message, "Will shutdown")) << report->message;
}

TEST(StallInspector, AShutdownTimeBelowTheWarningTimeIsIgnoredAsInHorovod) {
  StallInspector inspector({true, 10s, 5s});
  auto report = inspector.Inspect({{"a", {1}, kT0}}, kT0 + 1h);
  ASSERT_TRUE(report.has_value());
  EXPECT_FALSE(report->shut_down);
  EXPECT_TRUE(Has(report->message, "will not shutdown")) << report->message;
}

TEST(StallInspector, DisabledNeverReports) {
  StallInspector inspector({false, 1s, 2s});
  EXPECT_FALSE(inspector.Due(true, kT0 + 1h));
  EXPECT_FALSE(inspector.Inspect({{"a", {1}, kT0}}, kT0 + 1h).has_value());
}

TEST(StallInspector, ListsAtMostSixTensorsPerRank) {
  StallInspector inspector({true, 1s, 0s});
  std::vector<PendingTensor> pending;
  for (char c = 'a'; c <= 'h'; ++c) pending.push_back({std::string(1, c), {1}, kT0});
  auto report = inspector.Inspect(pending, kT0 + 2s);
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(Has(report->message, "1: [a, b, c, d, e, f, ...]")) << report->message;
}

}  // namespace
}  // namespace khorovod
