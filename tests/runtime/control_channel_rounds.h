// Checked rounds of a ControlChannel (backend/control_channel.h) for the
// channels' unit tests: one world rank per thread on loopback
// (loopback_mesh.h), words that name their rank, round and position, and
// the coordinator's primitives. Each check records a test failure and
// returns false, so a caller's ASSERT_TRUE stops the thread at the first
// wrong round.
#pragma once

#include <gloo/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "backend/control_channel.h"
#include "loopback_mesh.h"

namespace khorovod::testing {

// Runs body(rank, world) on `size` threads, each with its own world rank.
template <class Body>
void OnEveryLoopbackRank(int size, std::chrono::milliseconds timeout, Body body) {
  gloo::rendezvous::HashStore store;
  std::vector<std::future<void>> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&store, rank, size, timeout, &body] {
      auto world = LoopbackWorld(store, rank, size, timeout);
      if (world) body(rank, world);
    }));
  }
  for (auto& r : ranks) r.get();
}

// A word that names its rank, round and position, so a stale word (an
// earlier round's, left in a reused buffer or slot) or a misplaced one
// cannot pass for the right one.
inline uint64_t RoundWord(int rank, int round, size_t i) {
  return (uint64_t(rank) << 48) | (uint64_t(round) << 16) | i;
}

// One AllgatherWords round of `words` words from each of `size` ranks.
inline bool CheckedRound(ControlChannel& channel, int rank, int size, int round, size_t words) {
  std::vector<uint64_t> mine(words), all;
  for (size_t i = 0; i < words; ++i) mine[i] = RoundWord(rank, round, i);
  Status s = channel.AllgatherWords(mine, &all);
  EXPECT_TRUE(s.ok()) << "round " << round << ": " << s;
  if (!s.ok()) return false;
  EXPECT_EQ(all.size(), words * size);
  if (all.size() != words * size) return false;
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < words; ++i) {
      EXPECT_EQ(all[r * words + i], RoundWord(r, round, i))
          << "round " << round << " rank " << r << " word " << i;
      if (all[r * words + i] != RoundWord(r, round, i)) return false;
    }
  return true;
}

// The coordinator's primitives once: every rank's string gathered to rank
// 0 in rank order, and rank 0's answer broadcast back.
inline bool CheckedCoordinatorRound(ControlChannel& channel, int rank, int size, int round) {
  std::vector<std::string> gathered;
  Status s = channel.GatherToRoot("rank" + std::to_string(rank), &gathered);
  EXPECT_TRUE(s.ok()) << "gather, round " << round << ": " << s;
  if (!s.ok()) return false;
  if (rank == 0) {
    EXPECT_EQ(gathered.size(), static_cast<size_t>(size));
    if (gathered.size() != static_cast<size_t>(size)) return false;
    for (int r = 0; r < size; ++r) EXPECT_EQ(gathered[r], "rank" + std::to_string(r));
  }
  std::string answer = rank == 0 ? "answer" + std::to_string(round) : "";
  s = channel.BroadcastFromRoot(&answer);
  EXPECT_TRUE(s.ok()) << "broadcast, round " << round << ": " << s;
  EXPECT_EQ(answer, "answer" + std::to_string(round));
  return s.ok() && answer == "answer" + std::to_string(round);
}

// The next `rounds` rounds of `words` words each fail with kUnavailable,
// long before any channel timeout the tests set (broken from then on,
// without waiting).
inline void ExpectNextRoundsFailSoon(ControlChannel& channel, int rounds, size_t words = 1) {
  for (int i = 0; i < rounds; ++i) {
    std::vector<uint64_t> mine(words), all;
    const auto start = std::chrono::steady_clock::now();
    Status s = channel.AllgatherWords(mine, &all);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
}

}  // namespace khorovod::testing
