// ResponseCache: deterministic slot assignment, LRU eviction, lookups.
#include "core/response_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/enforce.h"

namespace khorovod {
namespace {

Response Resp(const std::string& name, int64_t elements = 4) {
  Response r;
  r.op = OpType::kAllreduce;
  r.names = {name};
  r.sizes = {elements};
  return r;
}

Request Req(const std::string& name, int64_t elements = 4) {
  Request q;
  q.op = OpType::kAllreduce;
  q.name = name;
  q.shape = {elements};
  return q;
}

uint32_t PutNew(ResponseCache& c, const std::string& name) {
  Request q = Req(name);
  return c.Put(Resp(name), &q);
}

TEST(ResponseCache, AssignsTheLowestFreeSlot) {
  ResponseCache c(4);
  EXPECT_EQ(c.capacity(), 4u);
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(PutNew(c, "a"), 0u);
  EXPECT_EQ(PutNew(c, "b"), 1u);
  EXPECT_EQ(PutNew(c, "c"), 2u);
  c.Erase(1);
  EXPECT_FALSE(c.Occupied(1));
  EXPECT_EQ(PutNew(c, "d"), 1u);
  EXPECT_EQ(PutNew(c, "e"), 3u);
  EXPECT_EQ(c.name(0), "a");
  EXPECT_EQ(c.name(1), "d");
  EXPECT_EQ(c.name(2), "c");
  EXPECT_EQ(c.name(3), "e");
}

TEST(ResponseCache, PutOfAnExistingNameKeepsItsSlotAndReplacesTheEntry) {
  ResponseCache c(3);
  PutNew(c, "a");
  PutNew(c, "b");
  Request changed = Req("a", 9);
  EXPECT_EQ(c.Put(Resp("a", 9), &changed), 0u);
  EXPECT_EQ(c.response(0).sizes, std::vector<int64_t>{9});
  EXPECT_EQ(c.Find(changed).lookup, ResponseCache::Lookup::kHit);
  EXPECT_EQ(c.Find(Req("a")).lookup, ResponseCache::Lookup::kInvalid);
  EXPECT_EQ(PutNew(c, "c"), 2u);  // no slot was consumed by the replacement
}

TEST(ResponseCache, FindReportsHitInvalidAndMiss) {
  ResponseCache c(2);
  const uint32_t slot = PutNew(c, "a");
  Request same = Req("a");
  same.rank = 3;  // the rank is not a parameter
  ResponseCache::Result r = c.Find(same);
  EXPECT_EQ(r.lookup, ResponseCache::Lookup::kHit);
  EXPECT_EQ(r.slot, slot);

  Request other_shape = Req("a", 5);
  r = c.Find(other_shape);
  EXPECT_EQ(r.lookup, ResponseCache::Lookup::kInvalid);
  EXPECT_EQ(r.slot, slot);
  Request other_op = Req("a");
  other_op.reduce_op = ReduceOp::kMax;
  EXPECT_EQ(c.Find(other_op).lookup, ResponseCache::Lookup::kInvalid);

  EXPECT_EQ(c.Find(Req("zzz")).lookup, ResponseCache::Lookup::kMiss);
}

TEST(ResponseCache, EntryWithoutALocalRequestIsInvalidForAnySubmission) {
  ResponseCache c(2);
  const uint32_t slot = c.Put(Resp("joined"), nullptr);
  ResponseCache::Result r = c.Find(Req("joined"));
  EXPECT_EQ(r.lookup, ResponseCache::Lookup::kInvalid);
  EXPECT_EQ(r.slot, slot);
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsedWhenFull) {
  ResponseCache c(3);
  PutNew(c, "a");
  PutNew(c, "b");
  PutNew(c, "c");
  EXPECT_EQ(PutNew(c, "d"), 0u);  // evicts a
  EXPECT_EQ(c.Find(Req("a")).lookup, ResponseCache::Lookup::kMiss);
  EXPECT_EQ(PutNew(c, "e"), 1u);  // evicts b
  EXPECT_EQ(c.Find(Req("b")).lookup, ResponseCache::Lookup::kMiss);
  EXPECT_EQ(c.Find(Req("c")).lookup, ResponseCache::Lookup::kHit);
}

TEST(ResponseCache, TouchAndReplacementRefreshRecency) {
  ResponseCache c(3);
  PutNew(c, "a");
  PutNew(c, "b");
  PutNew(c, "c");
  c.Touch(0);                     // a is now the most recent
  EXPECT_EQ(PutNew(c, "d"), 1u);  // evicts b
  PutNew(c, "c");                 // replacement refreshes c
  EXPECT_EQ(PutNew(c, "e"), 0u);  // evicts a (touched before c and d)
  EXPECT_EQ(c.name(0), "e");
  EXPECT_EQ(c.name(1), "d");
  EXPECT_EQ(c.name(2), "c");
}

TEST(ResponseCache, AFreeSlotIsPreferredOverEviction) {
  ResponseCache c(3);
  PutNew(c, "a");
  PutNew(c, "b");
  PutNew(c, "c");
  c.Erase(2);
  EXPECT_EQ(PutNew(c, "d"), 2u);
  EXPECT_TRUE(c.Occupied(0));
}

TEST(ResponseCache, EraseFreesTheSlotAndTheName) {
  ResponseCache c(2);
  PutNew(c, "a");
  c.Erase(0);
  EXPECT_FALSE(c.Occupied(0));
  EXPECT_EQ(c.Find(Req("a")).lookup, ResponseCache::Lookup::kMiss);
  c.Erase(0);   // erasing an empty slot is a no-op
  c.Erase(99);  // so is an out-of-range slot
  EXPECT_FALSE(c.Occupied(99));
  EXPECT_EQ(PutNew(c, "a"), 0u);
}

TEST(ResponseCache, TouchOfAnEmptySlotIsAnInvariantViolation) {
  ResponseCache c(2);
  EXPECT_THROW(c.Touch(0), InvariantViolation);
  EXPECT_THROW(c.Touch(7), InvariantViolation);
}

TEST(ResponseCache, CapacityZeroDisablesTheCache) {
  ResponseCache c(0);
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(c.capacity(), 0u);
  EXPECT_EQ(c.Find(Req("a")).lookup, ResponseCache::Lookup::kMiss);
  Request q = Req("a");
  EXPECT_THROW(c.Put(Resp("a"), &q), InvariantViolation);
  EXPECT_FALSE(c.Occupied(0));
}

TEST(ResponseCache, CacheableRules) {
  for (OpType op : {OpType::kAllreduce, OpType::kAllgather, OpType::kBroadcast, OpType::kAlltoall,
                    OpType::kReducescatter}) {
    Response r = Resp("x");
    r.op = op;
    EXPECT_TRUE(ResponseCache::Cacheable(r)) << OpTypeName(op);
  }
  Response r = Resp("x");
  r.op = OpType::kBarrier;
  EXPECT_FALSE(ResponseCache::Cacheable(r));
  r.op = OpType::kJoin;
  EXPECT_FALSE(ResponseCache::Cacheable(r));
  r = Resp("x");
  r.kind = Response::Kind::kError;
  EXPECT_FALSE(ResponseCache::Cacheable(r));
  r = Resp("x");
  r.names = {"x", "y"};
  EXPECT_FALSE(ResponseCache::Cacheable(r));
  r.names.clear();
  EXPECT_FALSE(ResponseCache::Cacheable(r));

  ResponseCache c(2);
  Response bad = Resp("x");
  bad.kind = Response::Kind::kError;
  EXPECT_THROW(c.Put(bad, nullptr), InvariantViolation);
}

// An independent model of the documented policy: lowest free slot, else the
// least recently used slot (ties to the lowest).
struct Model {
  std::vector<std::string> names;  // "" = free
  std::vector<uint64_t> used;
  uint64_t clock = 0;
  explicit Model(size_t n) : names(n), used(n, 0) {}
  uint32_t Put(const std::string& name) {
    for (uint32_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return Use(i);
    }
    for (uint32_t i = 0; i < names.size(); ++i) {
      if (names[i].empty()) {
        names[i] = name;
        return Use(i);
      }
    }
    uint32_t lru = 0;
    for (uint32_t i = 1; i < names.size(); ++i) {
      if (used[i] < used[lru]) lru = i;
    }
    names[lru] = name;
    return Use(lru);
  }
  uint32_t Use(uint32_t i) {
    used[i] = ++clock;
    return i;
  }
};

TEST(ResponseCache, TwoCachesFedTheSameSequenceStayIdentical) {
  constexpr size_t kCapacity = 8;
  ResponseCache a(kCapacity), b(kCapacity);
  Model model(kCapacity);
  std::mt19937 rng(1234);
  for (int step = 0; step < 5000; ++step) {
    SCOPED_TRACE(step);
    const int action = static_cast<int>(rng() % 4);
    const uint32_t slot = static_cast<uint32_t>(rng() % kCapacity);
    if (action <= 1) {
      const std::string name = "t" + std::to_string(rng() % 20);
      Request q = Req(name);
      // Rank b did not submit (joined): its local request is absent.
      const uint32_t sa = a.Put(Resp(name), &q);
      const uint32_t sb = b.Put(Resp(name), step % 3 ? &q : nullptr);
      ASSERT_EQ(sa, sb);
      ASSERT_EQ(sa, model.Put(name));
    } else if (action == 2 && a.Occupied(slot)) {
      a.Touch(slot);
      b.Touch(slot);
      model.Use(slot);
    } else if (action == 3) {
      a.Erase(slot);
      b.Erase(slot);
      model.names[slot].clear();
    }
    for (uint32_t s = 0; s < kCapacity; ++s) {
      ASSERT_EQ(a.Occupied(s), b.Occupied(s)) << "slot " << s;
      ASSERT_EQ(a.Occupied(s), !model.names[s].empty()) << "slot " << s;
      if (a.Occupied(s)) {
        ASSERT_EQ(a.name(s), b.name(s));
        ASSERT_EQ(a.name(s), model.names[s]);
      }
    }
  }
}

}  // namespace
}  // namespace khorovod
