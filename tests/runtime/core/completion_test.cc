// Completion and Handle: multi-part completion, first error wins, bounded
// waits, output hand-off, and concurrent finishers.
#include "core/completion.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "khorovod/handle.h"

namespace khorovod {
namespace {

using namespace std::chrono_literals;

TEST(Completion, FinishesOnTheLastPart) {
  auto c = std::make_shared<Completion>(3);
  Handle h(c);
  EXPECT_TRUE(h.valid());
  EXPECT_FALSE(h.ready());
  c->Finish(Status::Ok());
  c->Finish(Status::Ok());
  EXPECT_FALSE(h.ready());
  EXPECT_EQ(h.wait_for(1ms).code(), StatusCode::kDeadlineExceeded);
  c->Finish(Status::Ok());
  EXPECT_TRUE(h.ready());
  EXPECT_TRUE(h.wait().ok());
  EXPECT_TRUE(h.wait_for(1ms).ok());
}

TEST(Completion, FirstErrorWins) {
  Completion c(4);
  c.Finish(Status::Ok());
  c.Finish(Status::Mismatch("first"));
  c.Finish(Status::Stalled("second"));
  EXPECT_FALSE(c.Ready());
  c.Finish(Status::Ok());
  ASSERT_TRUE(c.Ready());
  Status s = c.Wait();
  EXPECT_EQ(s.code(), StatusCode::kMismatch);
  EXPECT_EQ(s.message(), "first");
}

TEST(Completion, ACallbackOrAnUnfinishedPollMarksTheBoardAwaited) {
  auto board = std::make_shared<WaiterBoard>();
  Completion c(1);
  c.SetWaiterBoard(board);
  EXPECT_FALSE(c.Ready());
  EXPECT_EQ(board->awaited(), 1u);
  c.OnDone([](const Status&) {});
  EXPECT_EQ(board->awaited(), 2u);
  c.Finish(Status::Ok());
  // Once finished, neither awaits anything.
  EXPECT_TRUE(c.Ready());
  c.OnDone([](const Status&) {});
  EXPECT_EQ(board->awaited(), 2u);
}

TEST(Completion, FinishAfterDoneIsIgnored) {
  Completion c(1);
  c.Finish(Status::Ok());
  c.Finish(Status::Aborted("late"));
  EXPECT_TRUE(c.Wait().ok());
}

TEST(Completion, WaitForReturnsDeadlineExceededWhilePending) {
  Handle h(std::make_shared<Completion>(1));
  Status s = h.wait_for(1ms);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(s.message().empty());
  EXPECT_EQ(h.wait_for(0ms).code(), StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(h.ready()) << "a bounded wait does not complete the operation";
}

TEST(Completion, FailedIsReadyImmediately) {
  Handle h(Completion::Failed(Status::FailedPrecondition("not initialized")));
  EXPECT_TRUE(h.ready());
  EXPECT_EQ(h.wait_for(0ms).code(), StatusCode::kFailedPrecondition);
  Status s = h.wait();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "not initialized");
}

TEST(Completion, TakeOutputMovesTheTensorOut) {
  auto c = std::make_shared<Completion>(1);
  Tensor t(DataType::kInt32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data_as<int32_t>()[i] = i * 10;
  c->SetOutput(std::move(t), {1, 2});
  c->Finish(Status::Ok());
  Handle h(c);
  Handle copy = h;  // copies share the operation
  ASSERT_TRUE(copy.wait().ok());
  EXPECT_EQ(h.received_splits(), (std::vector<int64_t>{1, 2}));
  Tensor out = copy.take_output();
  EXPECT_EQ(out.dtype, DataType::kInt32);
  EXPECT_EQ(out.shape, (Shape{2, 3}));
  ASSERT_EQ(out.storage.size(), 24u);
  EXPECT_EQ(out.data_as<int32_t>()[5], 50);
  Tensor again = h.take_output();
  EXPECT_TRUE(again.storage.empty()) << "the second take returns an empty tensor";
  EXPECT_TRUE(again.shape.empty());
}

TEST(Completion, JoinLastRank) {
  auto c = std::make_shared<Completion>(1);
  Handle h(c);
  EXPECT_EQ(h.join_last_rank(), -1);
  c->SetJoinLastRank(3);
  c->Finish(Status::Ok());
  EXPECT_EQ(h.join_last_rank(), 3);
}

TEST(Completion, EmptyHandle) {
  Handle h;
  EXPECT_FALSE(h.valid());
  EXPECT_FALSE(h.ready());
  EXPECT_EQ(h.wait().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.wait_for(1ms).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(h.take_output().storage.empty());
  EXPECT_TRUE(h.received_splits().empty());
  EXPECT_EQ(h.join_last_rank(), -1);
}

TEST(Completion, ConcurrentFinishersAndWaiters) {
  constexpr int kParts = 64;
  constexpr int kThreads = 8;
  for (int round = 0; round < 20; ++round) {
    auto c = std::make_shared<Completion>(kParts);
    Handle h(c);
    std::vector<Status> waited(3);
    std::vector<std::thread> waiters;
    for (size_t w = 0; w < waited.size(); ++w) {
      waiters.emplace_back([&h, &waited, w] { waited[w] = h.wait(); });
    }
    std::atomic<int> finished{0};
    std::vector<std::thread> finishers;
    for (int t = 0; t < kThreads; ++t) {
      finishers.emplace_back([&, t] {
        for (int p = t; p < kParts; p += kThreads) {
          // Exactly one part fails; which thread gets there first varies.
          c->Finish(p == 17 ? Status::Unavailable("part 17") : Status::Ok());
          finished.fetch_add(1);
        }
      });
    }
    for (auto& th : finishers) th.join();
    for (auto& th : waiters) th.join();
    EXPECT_EQ(finished.load(), kParts);
    EXPECT_TRUE(h.ready());
    for (const Status& s : waited) {
      EXPECT_EQ(s.code(), StatusCode::kUnavailable);
      EXPECT_EQ(s.message(), "part 17");
    }
  }
}

TEST(Completion, OutputSetBeforeTheLastFinishIsVisibleToTheWaiter) {
  for (int round = 0; round < 50; ++round) {
    auto c = std::make_shared<Completion>(2);
    Handle h(c);
    Tensor seen;
    std::thread waiter([&] {
      if (h.wait().ok()) seen = h.take_output();
    });
    std::thread finisher([&] {
      Tensor t(DataType::kUInt8, {3});
      t.storage[2] = std::byte{42};
      c->SetOutput(std::move(t));
      c->Finish(Status::Ok());
    });
    c->Finish(Status::Ok());
    finisher.join();
    waiter.join();
    ASSERT_EQ(seen.storage.size(), 3u);
    EXPECT_EQ(seen.storage[2], std::byte{42});
  }
}

TEST(Completion, OnDoneRunsOnceWithTheFinalStatus) {
  auto c = std::make_shared<Completion>(2);
  Handle h(c);
  std::vector<StatusCode> seen;
  h.on_done([&](const Status& s) { seen.push_back(s.code()); });
  c->Finish(Status::Mismatch("first part"));
  EXPECT_TRUE(seen.empty());  // one part still running
  c->Finish(Status::Ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], StatusCode::kMismatch);
  // Registered after completion: runs at once, on this thread.
  h.on_done([&](const Status& s) { seen.push_back(s.code()); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], StatusCode::kMismatch);
  c->Finish(Status::Ok());  // a stray extra Finish runs nothing again
  EXPECT_EQ(seen.size(), 2u);
}

TEST(Completion, OnDoneFromAnotherThreadSeesTheOutput) {
  auto c = std::make_shared<Completion>(1);
  Handle h(c);
  std::atomic<int64_t> rows{-1};
  h.on_done([&](const Status& s) {
    if (s.ok()) rows = h.take_output().shape.at(0);
  });
  std::thread finisher([&] {
    c->SetOutput(Tensor(DataType::kInt32, {7}));
    c->Finish(Status::Ok());
  });
  finisher.join();
  EXPECT_EQ(rows.load(), 7);
  Handle empty;
  StatusCode code = StatusCode::kOk;
  empty.on_done([&](const Status& s) { code = s.code(); });
  EXPECT_EQ(code, StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace khorovod
