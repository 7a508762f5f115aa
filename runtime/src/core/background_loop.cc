// RunBackgroundLoop: see core/background_loop.h.
#include "core/background_loop.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/waiter_signal.h"
#include "core/burst_rule.h"

namespace khorovod {
namespace {

using Clock = std::chrono::steady_clock;

// How long an idle rank waits for local work before joining a round anyway;
// it bounds how long a busy peer waits for an idle one.
constexpr auto kIdleWait = std::chrono::milliseconds(5);

// After a round that did work, the next submission usually follows within
// microseconds; spinning that long avoids a costly sleep and wake-up (when
// the SpinPolicy allows spinning at all).
constexpr auto kBusySpin = std::chrono::microseconds(200);

// Gathers the burst of submissions that woke an idle rank into one round,
// as core/burst_rule.h decides: polling (with yields) while submissions may
// follow within microseconds, sleeping on the waiter board while a small
// burst waits for more.
void WaitForBurstToEnd(const TensorQueue& queue, std::chrono::microseconds cycle_time) {
  WaiterBoard& board = *queue.waiters();
  const auto start = Clock::now();
  uint64_t seen = queue.submissions();
  auto last_arrival = start;
  // Bounded: JudgeBurst ends every burst SmallBurstHold after its start.
  for (;;) {
    const uint64_t changes = board.changes();
    const auto now = Clock::now();
    if (const uint64_t n = queue.submissions(); n != seen) {
      seen = n;
      last_arrival = now;
    }
    const BurstState state{
        std::chrono::duration_cast<std::chrono::microseconds>(now - start),
        std::chrono::duration_cast<std::chrono::microseconds>(now - last_arrival),
        queue.incoming_bytes(), board.blocked(), queue.awaited_since_pop()};
    switch (JudgeBurst(state, cycle_time)) {
      case BurstVerdict::kRunRound:
        return;
      case BurstVerdict::kPoll:
        std::this_thread::yield();
        break;
      case BurstVerdict::kSleep:
        board.WaitForChange(changes, start + SmallBurstHold(cycle_time));
        break;
    }
  }
}

// Phase 1: wait until the next round is due. An idle rank sleeps until work
// arrives (or kIdleWait passes) and then lets the burst end; a rank with
// work left waits out the cycle time since the last round's start.
void WaitForNextRound(Session& s, const Negotiator::Round& last_round,
                      Clock::time_point last_start) {
  if (!s.negotiator->has_local_work()) {
    s.queue.WaitForWork(Clock::now() + kIdleWait,
                        last_round.idle ? std::chrono::microseconds(0) : s.spin.Budget(kBusySpin));
    if (s.queue.has_incoming()) WaitForBurstToEnd(s.queue, s.config.cycle_time);
  } else {
    std::this_thread::sleep_until(last_start + s.config.cycle_time);
  }
}

// How a session's loop ended.
struct LoopEnd {
  Status fatal;
  bool stall_shutdown = false;
  bool done() const { return !fatal.ok(); }
};

// Phase 2: one round: hand the queued operations to the negotiator, agree
// with the other ranks, record the round, execute what was agreed.
LoopEnd RunOneRound(Session& s, Clock::time_point start, Negotiator::Round& round,
                    std::vector<PendingOp>& drained) {
  drained.clear();
  s.queue.PopAll(&drained);
  for (PendingOp& op : drained) s.negotiator->Add(std::move(op));
  Status fatal = s.negotiator->RunRound(s.queue.shutdown_requested(), start, &round);
  if (!fatal.ok()) return {fatal};
  if (s.metrics && !round.idle) s.metrics->NegotiationRound(Clock::now() - start);
  if (s.timeline && !round.idle) s.timeline->MarkCycle(start);
  if (round.shutdown) {
    return {Status::Aborted(round.stall_shutdown
                                ? round.shutdown_reason
                                : "khorovod was shut down before the operation completed"),
            round.stall_shutdown};
  }
  s.executor->CompleteEager(round.eager, *s.negotiator);
  return {s.set_comms->Execute(round.responses, *s.executor, *s.negotiator)};
}

// Phase 3: fail what is pending and what comes later; after an error, close
// every connection now rather than at shutdown: peers blocked on this rank
// then see EOF at once instead of waiting for their timeout, so one failure
// reaches every rank quickly.
void EndSession(Session& s, const LoopEnd& end) {
  // After shutdown() later calls are refused. After a failure (a peer lost,
  // the generation abandoned while it re-forms, a stall shutdown) they fail
  // as the pending ones did (kAborted/kUnavailable: Python's
  // HorovodInternalError), so elastic run() recovers whichever op of a step
  // (a tf.function's second collective, say) comes after the failure.
  const bool user_shutdown = end.fatal.code() == StatusCode::kAborted && !end.stall_shutdown &&
                             s.queue.shutdown_requested();
  s.queue.Close(user_shutdown
                    ? Status::FailedPrecondition("khorovod was shut down; call init() again")
                    : end.fatal);
  s.negotiator->FailAll(end.fatal);
  std::vector<PendingOp> late;
  s.queue.PopAll(&late);
  for (PendingOp& op : late) s.queue.Complete(op, end.fatal);
  if (end.fatal.code() == StatusCode::kAborted) return;
  s.set_comms->Clear();
  s.executor.reset();
  s.negotiator.reset();
  // Only its backend: user threads may still reach the DeviceBackend
  // object through Submit's device check.
  s.device->Drop(end.fatal);
  s.backend.reset();
  s.channel.reset();
  s.context.reset();
}

}  // namespace

void RunBackgroundLoop(Session& s) {
  LoopEnd end;
  auto last_start = Clock::now() - s.config.cycle_time;
  try {
    Negotiator::Round round;
    std::vector<PendingOp> drained;
    while (!end.done()) {
      WaitForNextRound(s, round, last_start);
      last_start = Clock::now();
      end = RunOneRound(s, last_start, round, drained);
    }
  } catch (const std::exception& e) {
    end = {Status::Internal(std::string("background thread: ") + e.what())};
  }
  EndSession(s, end);
}

}  // namespace khorovod
