// The rendezvous status endpoint's parser and the RendezvousMonitor's
// polling, with a fake fetcher (no network) and with the real one against an
// address that refuses connections.
#include "controller/rendezvous_monitor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace khorovod::op {
namespace {

using namespace std::chrono_literals;

TEST(RendezvousStatus, ParsesTheStatusBody) {
  auto s = ParseRendezvousStatus(
      R"({"job":"j","state":"running","generation":4,"world_size":8,"pending":1})");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->generation, 4);
  EXPECT_EQ(s->state, "running");
  EXPECT_EQ(s->world_size, 8);
  EXPECT_EQ(s->pending, 1);
  for (const char* bad : {"", "not json", "[]", R"({"state":"running"})", R"({"generation":"4"})",
                          R"({"generation":-1})", R"({"generation":1.5})"})
    EXPECT_EQ(ParseRendezvousStatus(bad), std::nullopt) << bad;
}

TEST(RendezvousStatus, FetchFromNowhereIsNulloptWithinTheTimeout) {
  EXPECT_EQ(FetchRendezvousStatus("", 1, 10ms), std::nullopt);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(FetchRendezvousStatus("127.0.0.1", 1, 200ms), std::nullopt);  // port 1: refused
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// A fetcher whose answer the test sets; records the addresses it was asked.
struct FakeRendezvous {
  std::mutex mu;
  std::optional<RendezvousStatus> answer;
  std::vector<std::string> asked;
  RendezvousFetcher Fetcher() {
    return [this](const std::string& ip, int port, std::chrono::milliseconds) {
      std::lock_guard<std::mutex> lock(mu);
      asked.push_back(ip + ":" + std::to_string(port));
      return answer;
    };
  }
  void Set(std::optional<int64_t> generation) {
    std::lock_guard<std::mutex> lock(mu);
    if (generation)
      answer = RendezvousStatus{*generation, "running", 2, 0};
    else
      answer.reset();
  }
};

// Records on_change calls and lets the test wait for them.
struct Changes {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> keys;
  void Add(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    keys.push_back(key);
    cv.notify_all();
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 5s, [&] { return keys.size() >= n; });
  }
};

TEST(RendezvousMonitor, ReportsGenerationChangesAndKeepsTheLastValue) {
  FakeRendezvous rdv;
  Changes changes;
  RendezvousMonitor monitor(
      {20ms, 100ms}, [&](const std::string& k) { changes.Add(k); }, rdv.Fetcher());
  monitor.Start();
  rdv.Set(1);
  monitor.Track("ns/j", "uid-1", "10.0.0.5", 29400);
  ASSERT_TRUE(changes.WaitFor(1)) << "a new target is polled at once";
  EXPECT_EQ(monitor.Generation("ns/j", "uid-1"), 1);
  EXPECT_EQ(monitor.Generation("ns/j", "uid-0"), std::nullopt) << "another incarnation of the name";
  rdv.Set(std::nullopt);  // unreachable for a while
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(monitor.Generation("ns/j", "uid-1"), 1) << "a failed poll keeps the last value";
  rdv.Set(3);
  ASSERT_TRUE(changes.WaitFor(2));
  EXPECT_EQ(monitor.Generation("ns/j", "uid-1"), 3);
  {
    std::lock_guard<std::mutex> lock(changes.mu);
    EXPECT_EQ(changes.keys, (std::vector<std::string>{"ns/j", "ns/j"}))
        << "only changes are reported";
  }
  std::lock_guard<std::mutex> lock(rdv.mu);
  EXPECT_EQ(rdv.asked.front(), "10.0.0.5:29400");
}

TEST(RendezvousMonitor, UntrackForgetsAndANewIncarnationStartsAfresh) {
  FakeRendezvous rdv;
  Changes changes;
  RendezvousMonitor monitor(
      {20ms, 100ms}, [&](const std::string& k) { changes.Add(k); }, rdv.Fetcher());
  monitor.Start();
  rdv.Set(5);
  monitor.Track("ns/j", "uid-1", "10.0.0.5", 29400);
  ASSERT_TRUE(changes.WaitFor(1));
  monitor.Untrack("ns/j");
  EXPECT_EQ(monitor.Generation("ns/j", "uid-1"), std::nullopt);
  rdv.Set(std::nullopt);
  monitor.Track("ns/j", "uid-2", "10.0.0.6", 29400);
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(monitor.Generation("ns/j", "uid-2"), std::nullopt)
      << "nothing known about the new job yet";
  monitor.Stop();
  monitor.Stop();  // idempotent
}

}  // namespace
}  // namespace khorovod::op
