// TensorQueue: duplicate-name refusal, all-or-nothing batches, name release
// on completion, closing, and waiting for work.
#include "core/tensor_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "khorovod/handle.h"
#include "test_util.h"

namespace khorovod {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using testing::HasSubstr;

PendingOp Op(const std::string& name, int parts = 1) {
  PendingOp op;
  op.request.name = name;
  op.completion = std::make_shared<Completion>(parts);
  return op;
}

std::vector<PendingOp> Batch(std::initializer_list<const char*> names) {
  std::vector<PendingOp> ops;
  for (const char* n : names) ops.push_back(Op(n));
  return ops;
}

std::vector<std::string> Drain(TensorQueue& q) {
  std::vector<PendingOp> ops;
  q.PopAll(&ops);
  std::vector<std::string> names;
  for (const PendingOp& op : ops) names.push_back(op.request.name);
  return names;
}

TEST(TensorQueue, PopAllReturnsEverythingInPushOrder) {
  TensorQueue q;
  ASSERT_TRUE(q.Push(Batch({"a", "b"})).ok());
  ASSERT_TRUE(q.Push(Batch({"c"})).ok());
  ASSERT_TRUE(q.Push({}).ok());
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(Drain(q).empty());
}

TEST(TensorQueue, CountsQueuedBytesAndWakesTheBoardUntilPopAll) {
  TensorQueue q;
  WaiterBoard& board = *q.waiters();
  std::vector<float> data(16);
  PendingOp op = Op("a");
  op.input = TensorView{data.data(), DataType::kFloat32, {16}, {}};
  const uint64_t changes = board.changes();
  ASSERT_TRUE(q.Push({}).ok());
  std::vector<PendingOp> one;
  one.push_back(std::move(op));
  ASSERT_TRUE(q.Push(std::move(one)).ok());
  EXPECT_EQ(q.incoming_bytes(), 64u);
  EXPECT_GT(board.changes(), changes);  // a sleeping background thread wakes
  EXPECT_EQ(Drain(q).size(), 1u);
  EXPECT_EQ(q.incoming_bytes(), 0u);
}

TEST(TensorQueue, AResultAwaitedWithoutABlockedThreadShowsUntilPopAll) {
  TensorQueue q;
  ASSERT_TRUE(q.Push(Batch({"a"})).ok());
  EXPECT_FALSE(q.awaited_since_pop());
  // What a completion callback or an unfinished poll does.
  q.waiters()->NoteAwaited();
  EXPECT_TRUE(q.awaited_since_pop());
  EXPECT_EQ(Drain(q).size(), 1u);
  EXPECT_FALSE(q.awaited_since_pop());
}

TEST(TensorQueue, DuplicateWithinABatchRefusesTheWholeBatch) {
  TensorQueue q;
  Status s = q.Push(Batch({"a", "b", "a"}));
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(HasSubstr(s.message(), "'a'"));
  EXPECT_TRUE(Drain(q).empty());
  // Nothing of the refused batch was reserved.
  EXPECT_TRUE(q.Push(Batch({"a", "b"})).ok());
}

TEST(TensorQueue, DuplicateOfAnInFlightNameIsRefused) {
  TensorQueue q;
  ASSERT_TRUE(q.Push(Batch({"a"})).ok());
  EXPECT_EQ(q.Push(Batch({"a"})).code(), StatusCode::kAlreadyExists);
  std::vector<PendingOp> popped;
  q.PopAll(&popped);
  // Still in flight after the background thread took it.
  Status s = q.Push(Batch({"b", "a"}));
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(HasSubstr(s.message(), "'a'"));
  EXPECT_TRUE(Drain(q).empty()) << "'b' must not be enqueued from a refused batch";
  EXPECT_TRUE(q.Push(Batch({"b"})).ok());
}

TEST(TensorQueue, CompleteFreesTheNameAndFinishesTheCompletion) {
  TensorQueue q;
  ASSERT_TRUE(q.Push(Batch({"a"})).ok());
  std::vector<PendingOp> ops;
  q.PopAll(&ops);
  ASSERT_EQ(ops.size(), 1u);
  Handle h(ops[0].completion);
  q.Complete(ops[0], Status::Mismatch("bad shape"));
  ASSERT_TRUE(h.ready());
  EXPECT_EQ(h.wait().code(), StatusCode::kMismatch);
  EXPECT_TRUE(q.Push(Batch({"a"})).ok());
}

TEST(TensorQueue, CompleteOfOnePartOfAMultiPartOperation) {
  TensorQueue q;
  auto shared = std::make_shared<Completion>(2);
  std::vector<PendingOp> ops = {Op("g.0"), Op("g.1")};
  for (PendingOp& op : ops) op.completion = shared;
  ASSERT_TRUE(q.Push(ops).ok());
  q.Complete(ops[0], Status::Ok());
  EXPECT_FALSE(shared->Ready());
  EXPECT_TRUE(q.Push(Batch({"g.0"})).ok()) << "the finished part's name is free";
  EXPECT_EQ(q.Push(Batch({"g.1"})).code(), StatusCode::kAlreadyExists);
  q.Complete(ops[1], Status::Ok());
  EXPECT_TRUE(shared->Ready());
}

TEST(TensorQueue, NameIsFreeByTheTimeAWaiterWakes) {
  for (int round = 0; round < 100; ++round) {
    TensorQueue q;
    ASSERT_TRUE(q.Push(Batch({"x"})).ok());
    std::vector<PendingOp> ops;
    q.PopAll(&ops);
    Handle h(ops[0].completion);
    Status resubmitted = Status::Internal("waiter did not run");
    std::thread waiter([&] {
      if (h.wait().ok()) resubmitted = q.Push(Batch({"x"}));
    });
    q.Complete(ops[0], Status::Ok());
    waiter.join();
    ASSERT_TRUE(resubmitted.ok()) << "round " << round << ": " << resubmitted;
  }
}

TEST(TensorQueue, CloseRefusesLaterPushesWithTheGivenStatus) {
  TensorQueue q;
  ASSERT_TRUE(q.Push(Batch({"a"})).ok());
  q.Close(Status::Unavailable("peer 3 died"));
  Status s = q.Push(Batch({"b"}));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "peer 3 died");
  EXPECT_EQ(q.Push({}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(Drain(q), std::vector<std::string>{"a"}) << "work queued before Close stays";
}

TEST(TensorQueue, WaitForWorkReturnsAtTheDeadlineWhenEmpty) {
  TensorQueue q;
  const auto deadline = SteadyClock::now() + 2ms;
  q.WaitForWork(deadline);
  EXPECT_GE(SteadyClock::now(), deadline);
  q.WaitForWork(SteadyClock::now() - 1s);  // a past deadline returns at once
}

TEST(TensorQueue, WaitForWorkReturnsImmediatelyWhenWorkIsQueued) {
  TensorQueue q;
  ASSERT_TRUE(q.Push(Batch({"a"})).ok());
  // Far enough out that reaching it means the queued work was ignored.
  const auto deadline = SteadyClock::now() + 30s;
  q.WaitForWork(deadline);
  EXPECT_LT(SteadyClock::now(), deadline);
}

TEST(TensorQueue, WaitForWorkWakesOnAPushFromAnotherThread) {
  TensorQueue q;
  const auto deadline = SteadyClock::now() + 30s;
  std::thread waiter([&] { q.WaitForWork(deadline); });
  ASSERT_TRUE(q.Push(Batch({"a"})).ok());
  waiter.join();
  EXPECT_LT(SteadyClock::now(), deadline);
}

TEST(TensorQueue, ShutdownRequestWakesTheWaiter) {
  TensorQueue q;
  EXPECT_FALSE(q.shutdown_requested());
  const auto deadline = SteadyClock::now() + 30s;
  std::thread waiter([&] { q.WaitForWork(deadline); });
  q.RequestShutdown();
  waiter.join();
  EXPECT_LT(SteadyClock::now(), deadline);
  EXPECT_TRUE(q.shutdown_requested());
}

}  // namespace
}  // namespace khorovod
