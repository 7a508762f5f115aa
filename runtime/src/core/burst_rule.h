// The burst rule: when a background thread that was idle until work arrived
// stops gathering submissions and starts a negotiation round.
//
// Every round costs a negotiation exchange and, per fused group, a
// collective: latency that a few KiB of tensors cannot amortize, and CPU
// time (wake-ups, system calls) that ranks sharing cores take from each
// other's compute. So:
// - a user thread blocked on a result ends the burst at once: it submits
//   nothing more until a round completes its operation;
// - a burst of at least kMinRoundBytes ends once submissions have paused
//   for kBurstQuiet (a backward pass submits one gradient after another),
//   or one cycle time after it began;
// - a smaller burst waits for more (the next layers' gradients) while no
//   thread is blocked and nothing else awaits a result, up to
//   SmallBurstHold after it began: sending a few KiB early overlaps almost
//   nothing with the backward pass, while a round of their own costs a
//   whole exchange. torch DDP's first gradient bucket (1 MiB) makes the
//   same trade; 64 KiB keeps the overlap that matters. A result awaited
//   without a blocked thread (a completion callback, as TensorFlow's
//   kernels register, or a poll that found an operation unfinished) ends
//   the hold: the burst then ends as a large one does.
// A peer that started a round waits in it for a rank that holds, so the
// hold also bounds that wait (as kIdleWait bounds it for an idle rank).
// A cycle time of zero turns gathering off: every burst ends at once.
//
// Thread-safety: pure functions and constants.
#pragma once

#include <chrono>
#include <cstdint>

namespace khorovod {

inline constexpr std::chrono::microseconds kBurstQuiet{100};
inline constexpr uint64_t kMinRoundBytes = 64 << 10;
inline constexpr std::chrono::microseconds kSmallBurstHold{10'000};

// What the background thread sees while it gathers a burst.
struct BurstState {
  std::chrono::microseconds since_start{0};  // since the burst's first submission was seen
  std::chrono::microseconds since_last{0};   // since the latest submission was seen
  uint64_t queued_bytes = 0;                 // input bytes queued so far
  int blocked_threads = 0;                   // user threads blocked on a result
  bool awaited = false;  // a result was awaited otherwise since the last round took the queue
};

enum class BurstVerdict {
  kRunRound,  // the burst has ended
  kPoll,      // submissions may follow within microseconds: look again soon
  kSleep,     // a small burst, paused: sleep until a change or SmallBurstHold
};

BurstVerdict JudgeBurst(const BurstState& state, std::chrono::microseconds cycle_time);

// How long after its start a small burst may be held (zero when the cycle
// time is zero; never less than the cycle time).
std::chrono::microseconds SmallBurstHold(std::chrono::microseconds cycle_time);

}  // namespace khorovod
