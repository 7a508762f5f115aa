// WorkQueue semantics: de-duplication, per-key serialization, delays.
#include "kube/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "kube/api_status.h"
#include "kube/rest_client.h"

namespace khorovod::kube {
namespace {

TEST(WorkQueue, DeduplicatesWaitingKeys) {
  WorkQueue q;
  q.Add("a");
  q.Add("a");
  q.Add("b");
  EXPECT_EQ(q.Depth(), 2u);
  std::string k;
  ASSERT_TRUE(q.Get(k));
  EXPECT_EQ(k, "a");
  ASSERT_TRUE(q.Get(k));
  EXPECT_EQ(k, "b");
  EXPECT_EQ(q.Depth(), 0u);
}

TEST(WorkQueue, AKeyInProcessIsNotHandedOutTwice) {
  WorkQueue q;
  q.Add("a");
  std::string k;
  ASSERT_TRUE(q.Get(k));
  q.Add("a");  // changed while being processed
  EXPECT_EQ(q.Depth(), 0u) << "held back until Done";
  q.Done("a");
  EXPECT_EQ(q.Depth(), 1u) << "re-queued once Done";
  ASSERT_TRUE(q.Get(k));
  q.Done("a");
  EXPECT_EQ(q.Depth(), 0u);
}

TEST(WorkQueue, ConcurrentWorkersNeverShareAKey) {
  WorkQueue q;
  std::atomic<int> in_flight{0}, overlap{0}, processed{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      std::string k;
      while (q.Get(k)) {
        if (in_flight.fetch_add(1) != 0) overlap++;
        std::this_thread::yield();
        in_flight.fetch_sub(1);
        processed++;
        q.Done(k);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) q.Add("same");
  // Drain: wait (bounded) until nothing is queued, then shut down.
  for (int i = 0; i < 2000 && q.Depth() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  q.ShutDown();
  for (auto& t : workers) t.join();
  EXPECT_EQ(overlap.load(), 0);
  EXPECT_GE(processed.load(), 1);
}

TEST(WorkQueue, RateLimitedDelaysGrowAndForgetResets) {
  WorkQueue q({std::chrono::milliseconds(20), std::chrono::milliseconds(1000)});
  q.AddRateLimited("k");
  q.AddRateLimited("k");
  EXPECT_EQ(q.Failures("k"), 2);
  std::string k;
  ASSERT_TRUE(q.Get(k));  // arrives after its delay
  EXPECT_EQ(k, "k");
  q.Done("k");
  q.Forget("k");
  EXPECT_EQ(q.Failures("k"), 0);
}

TEST(WorkQueue, ShutDownWakesGetters) {
  WorkQueue q;
  std::thread t([&] {
    std::string k;
    EXPECT_FALSE(q.Get(k));
  });
  q.ShutDown();
  t.join();
}

TEST(ApiStatus, ClassifiesKubernetesAnswers) {
  EXPECT_TRUE(ApiStatus::FromHttp(201, "").ok());
  EXPECT_EQ(ApiStatus::FromHttp(404, R"({"message":"pods \"x\" not found"})").code(),
            ApiCode::kNotFound);
  EXPECT_EQ(ApiStatus::FromHttp(409, R"({"reason":"AlreadyExists"})").code(),
            ApiCode::kAlreadyExists);
  EXPECT_EQ(ApiStatus::FromHttp(409, R"({"reason":"Conflict"})").code(), ApiCode::kConflict);
  EXPECT_TRUE(ApiStatus::FromHttp(409, R"({"reason":"Conflict"})").retryable());
  EXPECT_EQ(ApiStatus::FromHttp(410, "").code(), ApiCode::kGone);
  auto invalid = ApiStatus::FromHttp(422, R"({"message":"spec.replicas: Invalid value"})");
  EXPECT_EQ(invalid.code(), ApiCode::kInvalid);
  EXPECT_FALSE(invalid.retryable());
  EXPECT_NE(invalid.ToString().find("spec.replicas"), std::string::npos);
  EXPECT_EQ(ApiStatus::FromHttp(503, "not json").code(), ApiCode::kUnavailable);
}

TEST(RestPaths, ResourceOfPathAndEncoding) {
  EXPECT_EQ(ResourceOfPath("/api/v1/namespaces/x/pods/y/status"), "pods");
  EXPECT_EQ(ResourceOfPath("/api/v1/pods?watch=1"), "pods");
  EXPECT_EQ(ResourceOfPath("/apis/khorovod.dev/v1alpha1/namespaces/n/horovodjobs"), "horovodjobs");
  EXPECT_EQ(ResourceOfPath("/apis/coordination.k8s.io/v1/namespaces/n/leases/l"), "leases");
  EXPECT_EQ(UrlEncode("a=b,c d"), "a%3Db%2Cc%20d");
}

}  // namespace
}  // namespace khorovod::kube
