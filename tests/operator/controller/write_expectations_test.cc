// What the operator wrote but its caches do not show yet is neither written
// again nor lost, and the caches win once they catch up.
#include "controller/write_expectations.h"

#include <gtest/gtest.h>

namespace khorovod::op {
namespace {

using std::chrono::seconds;
using Clock = WriteExpectations::Clock;

kube::ObjectPtr Job(const std::string& uid, const std::string& version, int restarts) {
  return std::make_shared<const kube::Json>(
      kube::Json{{"metadata", {{"uid", uid}, {"resourceVersion", version}}},
                 {"status", {{"restartCount", restarts}}}});
}

TEST(WriteExpectationsTest, ACreatedPodIsPendingUntilTheCacheShowsIt) {
  WriteExpectations e(seconds(30));
  const auto t0 = Clock::now();
  e.ExpectCreated("j1", "ns/job", "job-worker-0", t0);
  e.ExpectCreated("j1", "ns/job", "job-worker-1", t0);
  EXPECT_EQ(e.Pending("j1", {}, t0), (std::set<std::string>{"job-worker-0", "job-worker-1"}));
  EXPECT_EQ(e.Pending("j1", {"job-worker-0"}, t0), (std::set<std::string>{"job-worker-1"}));
  // Seen once is forgotten: a later deletion of the pod is the cache's to report.
  EXPECT_EQ(e.Pending("j1", {}, t0), (std::set<std::string>{"job-worker-1"}));
  EXPECT_TRUE(e.Pending("j2", {}, t0).empty());
}

TEST(WriteExpectationsTest, AnUnseenCreateExpiresAfterTheTtl) {
  WriteExpectations e(seconds(30));
  const auto t0 = Clock::now();
  e.ExpectCreated("j1", "ns/job", "job-worker-0", t0);
  EXPECT_EQ(e.Pending("j1", {}, t0 + seconds(29)).size(), 1u);
  EXPECT_TRUE(e.Pending("j1", {}, t0 + seconds(30)).empty());
  EXPECT_TRUE(e.Pending("j1", {}, t0).empty());  // gone for good, not back
}

TEST(WriteExpectationsTest, TheWrittenJobStandsInForTheVersionItReplaced) {
  WriteExpectations e;
  auto written = Job("j1", "101", 1);
  e.WroteJob("j1", "ns/job", "100", written);
  EXPECT_EQ(e.Freshest(Job("j1", "100", 0)), written);
  // The cache caught up (or someone else wrote): the cache is the truth.
  auto newer = Job("j1", "102", 2);
  EXPECT_EQ(e.Freshest(newer), newer);
  auto stale = Job("j1", "100", 0);
  EXPECT_EQ(e.Freshest(stale), stale) << "the written copy is dropped once the cache moved on";
}

TEST(WriteExpectationsTest, AnotherJobOrAJobNeverWrittenReadsFromTheCache) {
  WriteExpectations e;
  e.WroteJob("j1", "ns/job", "100", Job("j1", "101", 1));
  auto other = Job("j2", "100", 0);
  EXPECT_EQ(e.Freshest(other), other);
  EXPECT_EQ(e.Freshest(nullptr), nullptr);
}

TEST(WriteExpectationsTest, ForgetByUidOrByKeyDropsEverything) {
  WriteExpectations e;
  const auto t0 = Clock::now();
  e.ExpectCreated("j1", "ns/a", "a-worker-0", t0);
  e.WroteJob("j1", "ns/a", "100", Job("j1", "101", 1));
  e.ExpectCreated("j2", "ns/b", "b-worker-0", t0);
  e.Forget("j1");
  EXPECT_TRUE(e.Pending("j1", {}, t0).empty());
  auto cached = Job("j1", "100", 0);
  EXPECT_EQ(e.Freshest(cached), cached);
  e.ForgetKey("ns/b");
  EXPECT_TRUE(e.Pending("j2", {}, t0).empty());
}

}  // namespace
}  // namespace khorovod::op
