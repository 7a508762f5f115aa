// Unit tests of the small server pieces: base64, the
// key-value store, strict JSON request validation and rank assignment.
#include <gtest/gtest.h>

#include <future>
#include <limits>
#include <thread>

#include "json_request.h"
#include "khorovod/util/base64.h"
#include "kv_store.h"
#include "world.h"

namespace khorovod::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;

TEST(Base64, RoundTripsEveryLengthAndByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); ++n) {
    std::string in = all.substr(0, n);
    auto out = Base64Decode(Base64Encode(in));
    ASSERT_TRUE(out.has_value()) << n;
    EXPECT_EQ(*out, in);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
}

TEST(Base64, RejectsNonCanonicalText) {
  for (const char* bad :
       {"Zm9", "Zm9v\n", "Zm=v", "Z===", "====", "Zm9=", "Zm8\x01", "Zm9?", "Zn=="}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
  }
  EXPECT_EQ(Base64Decode("").value(), "");
}

TEST(KvStore, SetGetOverwriteAndNamespaces) {
  KvStore kv;
  std::string v;
  auto now = Clock::now();
  EXPECT_EQ(kv.Get(1, "k", now, &v), KvStore::Result::kNotFound);
  ASSERT_EQ(kv.Set(1, "k", std::string("a\0b", 3)), KvStore::Result::kOk);
  ASSERT_EQ(kv.Get(1, "k", now, &v), KvStore::Result::kOk);
  EXPECT_EQ(v, std::string("a\0b", 3));
  ASSERT_EQ(kv.Set(1, "k", "xyz1"), KvStore::Result::kOk);
  ASSERT_EQ(kv.Get(1, "k", now, &v), KvStore::Result::kOk);
  EXPECT_EQ(v, "xyz1");
  EXPECT_EQ(kv.Get(2, "k", now, &v), KvStore::Result::kNotFound)
      << "generations are separate namespaces";
  EXPECT_EQ(kv.total_bytes(), 5u);
}

TEST(KvStore, GetWaitsForASetFromAnotherThread) {
  KvStore kv;
  auto getter = std::async(std::launch::async, [&] {
    std::string v;
    KvStore::Result r = kv.Get(0, "late", Clock::now() + std::chrono::seconds(30), &v);
    return r == KvStore::Result::kOk ? v : std::string("failed");
  });
  ASSERT_EQ(kv.Set(0, "late", "here"), KvStore::Result::kOk);
  EXPECT_EQ(getter.get(), "here");
}

TEST(KvStore, WaitReportsMissingKeysAfterItsDeadline) {
  KvStore kv;
  ASSERT_EQ(kv.Set(0, "a", "1"), KvStore::Result::kOk);
  std::vector<std::string> missing;
  auto start = Clock::now();
  EXPECT_EQ(kv.Wait(0, {"a", "b", "c"}, start + std::chrono::milliseconds(20), &missing),
            KvStore::Result::kNotFound);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(20));
  EXPECT_EQ(missing, (std::vector<std::string>{"b", "c"}));
  ASSERT_EQ(kv.Set(0, "b", "1"), KvStore::Result::kOk);
  ASSERT_EQ(kv.Set(0, "c", "1"), KvStore::Result::kOk);
  EXPECT_EQ(kv.Wait(0, {"a", "b", "c"}, start, &missing), KvStore::Result::kOk);
}

TEST(KvStore, ClosingAGenerationEndsItsWaitsButKeepsItsKeys) {
  KvStore kv;
  ASSERT_EQ(kv.Set(2, "rank_0", "addr0"), KvStore::Result::kOk);
  auto start = Clock::now();
  auto waiting = std::async(std::launch::async, [&] {
    std::vector<std::string> missing;
    return kv.Wait(2, {"rank_0", "rank_1"}, Clock::now() + std::chrono::seconds(30), &missing);
  });
  auto getting = std::async(std::launch::async, [&] {
    std::string v;
    return kv.Get(2, "rank_1", Clock::now() + std::chrono::seconds(30), &v);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kv.CloseGenerationsUpTo(2);
  EXPECT_EQ(waiting.get(), KvStore::Result::kClosed);
  EXPECT_EQ(getting.get(), KvStore::Result::kClosed);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10))
      << "the waits ended at the close, not at their deadline";
  std::string v;
  EXPECT_EQ(kv.Get(2, "rank_0", Clock::now() + std::chrono::seconds(30), &v), KvStore::Result::kOk);
  EXPECT_EQ(v, "addr0");
  std::vector<std::string> missing;
  EXPECT_EQ(kv.Wait(2, {"rank_0"}, Clock::now(), &missing), KvStore::Result::kOk);
  // Newer generations and the permanent namespace 0 still block.
  EXPECT_EQ(kv.Get(3, "rank_1", Clock::now() + std::chrono::milliseconds(20), &v),
            KvStore::Result::kNotFound);
  kv.CloseGenerationsUpTo(5);
  EXPECT_EQ(kv.Get(0, "rank_1", Clock::now() + std::chrono::milliseconds(20), &v),
            KvStore::Result::kNotFound);
}

TEST(KvStore, AddIsAnAtomicDecimalCounter) {
  KvStore kv;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      int64_t out = 0;
      for (int i = 0; i < 250; ++i) ASSERT_EQ(kv.Add(3, "n", 1, &out), KvStore::Result::kOk);
    });
  }
  for (auto& t : threads) t.join();
  std::string v;
  ASSERT_EQ(kv.Get(3, "n", Clock::now(), &v), KvStore::Result::kOk);
  EXPECT_EQ(v, "1000");
  int64_t out = 0;
  ASSERT_EQ(kv.Add(3, "n", -1001, &out), KvStore::Result::kOk);
  EXPECT_EQ(out, -1);
  ASSERT_EQ(kv.Set(3, "s", "abc"), KvStore::Result::kOk);
  EXPECT_EQ(kv.Add(3, "s", 1, &out), KvStore::Result::kNotInteger);
  ASSERT_EQ(kv.Set(3, "big", std::to_string(INT64_MAX)), KvStore::Result::kOk);
  EXPECT_EQ(kv.Add(3, "big", 1, &out), KvStore::Result::kNotInteger) << "overflow";
}

TEST(KvStore, MemoryLimitDropAndShutdown) {
  KvStore kv(KvStore::Limits{10});
  EXPECT_EQ(kv.Set(1, "k", "123456789"), KvStore::Result::kOk);
  EXPECT_EQ(kv.Set(1, "j", "1"), KvStore::Result::kFull);
  EXPECT_EQ(kv.Set(1, "k", "12345678"), KvStore::Result::kOk) << "overwriting frees the old value";
  kv.DropGenerationsBelow(2);
  EXPECT_EQ(kv.total_bytes(), 0u);
  EXPECT_EQ(kv.key_count(), 0u);
  auto waiter = std::async(std::launch::async, [&] {
    std::string v;
    return kv.Get(5, "never", Clock::now() + std::chrono::seconds(60), &v);
  });
  kv.Shutdown();
  EXPECT_EQ(waiter.get(), KvStore::Result::kShutdown);
}

TEST(JsonRequest, AcceptsWellTypedBodies) {
  std::string err;
  auto r = JsonRequest::Parse(R"({"name":"w","slots":4,"keys":["a","b"]})", &err);
  ASSERT_TRUE(r.has_value()) << err;
  EXPECT_EQ(r->String("name", JsonRequest::kRequired, 10), "w");
  EXPECT_EQ(r->Int("slots", JsonRequest::kRequired, 1, 8), 4);
  EXPECT_EQ(r->Int("timeout_ms", JsonRequest::kOptional, 0, 100, 7), 7);
  EXPECT_EQ(r->StringArray("keys", JsonRequest::kRequired, 4, 4),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r->Finish(&err)) << err;
  EXPECT_TRUE(JsonRequest::Parse("", &err).has_value()) << "an empty body is {}";
}

TEST(JsonRequest, RejectsBadBodies) {
  struct Case {
    const char* body;
    const char* error;
  } cases[] = {
      {R"({"name":"w","slots":4,"extra":1})", "unknown field 'extra'"},
      {R"({"slots":4})", "missing required field 'name'"},
      {R"({"name":5,"slots":4})", "field 'name' must be a string"},
      {R"({"name":"w","slots":"4"})", "field 'slots' must be an integer"},
      {R"({"name":"w","slots":4.0})", "field 'slots' must be an integer"},
      {R"({"name":"w","slots":9})", "field 'slots' must be between 1 and 8"},
      {R"({"name":"w","slots":18446744073709551615})", "field 'slots' must be between 1 and 8"},
      {R"({"name":"too-long-name","slots":1})", "field 'name' is longer than 10 bytes"},
  };
  for (const Case& c : cases) {
    std::string err;
    auto r = JsonRequest::Parse(c.body, &err);
    ASSERT_TRUE(r.has_value()) << c.body;
    r->String("name", JsonRequest::kRequired, 10);
    r->Int("slots", JsonRequest::kRequired, 1, 8);
    EXPECT_FALSE(r->Finish(&err)) << c.body;
    EXPECT_EQ(err, c.error) << c.body;
  }
  for (const char* bad : {"{", "[]", "3", "\"s\"", "{\"a\":\"\xff\"}", "null"}) {
    std::string err;
    EXPECT_FALSE(JsonRequest::Parse(bad, &err).has_value()) << bad;
    EXPECT_FALSE(err.empty());
  }
  std::string err;
  auto r = JsonRequest::Parse(R"({"keys":["a",1]})", &err);
  r->StringArray("keys", JsonRequest::kRequired, 4, 4);
  EXPECT_FALSE(r->Finish(&err));
}

TEST(World, AssignsRanksHostsAndLocalRanks) {
  World w = BuildWorld(7, {{"a", "h1", 2}, {"b", "h2", 1}, {"c", "h1", 2}});
  EXPECT_EQ(w.generation, 7);
  EXPECT_EQ(w.size, 3);
  EXPECT_EQ(w.cross_size, 2);
  EXPECT_EQ(w.members[2].name, "c");
  EXPECT_EQ(w.members[2].local_rank, 1);
  EXPECT_EQ(w.members[2].local_size, 2);
  EXPECT_EQ(w.members[1].cross_rank, 1);
  EXPECT_EQ(w.members[1].local_size, 1);
  ASSERT_NE(w.Find("b"), nullptr);
  EXPECT_EQ(w.Find("b")->rank, 1);
  EXPECT_EQ(w.Find("zz"), nullptr);
}

// khorovod-slots declares each process's slot: slot i is local rank i
// whatever order the slots registered in (so slot i's GPU is local rank i's).
TEST(World, DeclaredSlotsBecomeLocalRanks) {
  World w = BuildWorld(1, {{"p-1", "h1", 2, 1}, {"q-0", "h2", 1, 0}, {"p-0", "h1", 2, 0}});
  EXPECT_EQ(w.Find("p-1")->local_rank, 1);
  EXPECT_EQ(w.Find("p-0")->local_rank, 0);
  EXPECT_EQ(w.Find("p-1")->rank, 0) << "ranks keep the membership's order";
  EXPECT_EQ(w.Find("q-0")->local_rank, 0);
}

TEST(World, SlotsThatDoNotNumberTheHostFallBackToRankOrder) {
  // Slot 1 alone on its host (slot 0 not admitted): local_size 1, so rank order.
  World alone = BuildWorld(1, {{"p-1", "h1", 2, 1}});
  EXPECT_EQ(alone.members[0].local_rank, 0);
  // A duplicate slot, or a worker that declares none.
  World dup = BuildWorld(1, {{"a", "h1", 2, 1}, {"b", "h1", 2, 1}});
  EXPECT_EQ(dup.members[0].local_rank, 0);
  EXPECT_EQ(dup.members[1].local_rank, 1);
  World mixed = BuildWorld(1, {{"a", "h1", 2, 1}, {"b", "h1", 2, -1}});
  EXPECT_EQ(mixed.members[0].local_rank, 0);
  EXPECT_EQ(mixed.members[1].local_rank, 1);
}

WorkerSpec OnNode(std::string name, std::string address, int slots, std::string node) {
  WorkerSpec w{std::move(name), std::move(address), slots};
  w.node = std::move(node);
  return w;
}

// Two pods (addresses) on node n1, one on n2, and one worker that declared
// no node: by address the pods are hosts of their own (who shares memory);
// by node n1's three ranks are local ranks 0..2 of one host.
TEST(World, ByNodeCountsThePodsOfOneNodeTogether) {
  World w = BuildWorld(1, {OnNode("a0", "10.0.0.1", 2, "n1"), OnNode("b0", "10.0.0.2", 1, "n2"),
                           OnNode("a1", "10.0.0.1", 2, "n1"), OnNode("c0", "10.0.0.3", 1, "n1"),
                           OnNode("d0", "10.0.0.4", 1, "")});
  const Assignment& c0 = *w.Find("c0");
  EXPECT_EQ(c0.local_rank, 0);
  EXPECT_EQ(c0.local_size, 1);
  EXPECT_EQ(c0.cross_rank, 2);
  EXPECT_EQ(w.cross_size, 4);
  EXPECT_EQ(c0.by_node.rank, 3);
  EXPECT_EQ(c0.by_node.size, 5);
  EXPECT_EQ(c0.by_node.local_rank, 2);
  EXPECT_EQ(c0.by_node.local_size, 3);
  EXPECT_EQ(c0.by_node.cross_rank, 0);
  EXPECT_EQ(c0.by_node.cross_size, 3);
  EXPECT_EQ(w.Find("a1")->by_node.local_rank, 1);
  EXPECT_EQ(w.Find("b0")->by_node.cross_rank, 1);
  EXPECT_EQ(w.Find("b0")->by_node.local_size, 1);
  // No node declared: its address is its node, a node of its own.
  EXPECT_EQ(w.Find("d0")->by_node.cross_rank, 2);
  EXPECT_EQ(w.Find("d0")->by_node.local_size, 1);
}

// A pod's declared slots keep their order by node too (slot i's GPU is
// local rank i's in its pod), after the node's earlier pods.
TEST(World, ByNodeKeepsEachPodsSlotOrder) {
  WorkerSpec q = OnNode("q-0", "10.0.0.2", 1, "n1");
  WorkerSpec p1 = OnNode("p-1", "10.0.0.1", 2, "n1"), p0 = OnNode("p-0", "10.0.0.1", 2, "n1");
  p1.slot = 1;
  p0.slot = 0;
  World w = BuildWorld(1, {p1, q, p0});
  EXPECT_EQ(w.Find("p-0")->by_node.local_rank, 0);
  EXPECT_EQ(w.Find("p-1")->by_node.local_rank, 1);
  EXPECT_EQ(w.Find("q-0")->by_node.local_rank, 2) << "pod q's lowest rank comes after pod p's";
  EXPECT_EQ(w.Find("q-0")->by_node.local_size, 3);
  EXPECT_EQ(w.Find("q-0")->by_node.cross_size, 1);
}

// Without nodes, by_node is the address placement.
TEST(World, ByNodeWithoutNodesIsByAddress) {
  World w = BuildWorld(1, {{"a", "h1", 2}, {"b", "h2", 1}, {"c", "h1", 2}});
  for (const Assignment& a : w.members) EXPECT_EQ(a.by_node, static_cast<const Placement&>(a));
}

}  // namespace
}  // namespace khorovod::rendezvous
