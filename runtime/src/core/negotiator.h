// Negotiator: one negotiation round of the coordination protocol, written
// once for every backend (backends only supply ControlChannel primitives).
//
// A round, run by every rank's background thread in lockstep:
//   1. Each new local op is looked up in the ResponseCache. A hit sets the
//      op's bit in a "ready" bit vector; a known name with changed
//      parameters, or a cached op that has waited too long, sets its bit in
//      an "invalid" vector; everything else is queued for the coordinator.
//   2. One all-to-all exchange of [flags | ready | invalid | eager payload],
//      ANDed locally (flags and invalid travel inverted, so the AND computes
//      their OR). A tensor is ready when its bit is set on every rank: that
//      is the whole cost of a steady-state step. Small host allreduces carry
//      their data in the same message (core/eager_allreduce.h) and, when
//      every rank sent theirs, need no second exchange.
//   3. Ready cached responses are emitted in slot order; invalid slots are
//      erased on every rank and their ops renegotiated.
//   4. If any rank has uncached requests, requests are gathered to rank 0,
//      whose Coordinator answers with a response list that is broadcast and
//      appended, in order, to the round's output. Errors and joins are
//      delivered here directly.
//   Before the exchange rank 0 runs the stall inspection when it is due
//   (core/stall_inspector.h): it logs Horovod's warning, and past the stall
//   shutdown time raises a flag that ends every rank's session (kAborted,
//   with Round::shutdown_reason).
// The output is identical on every rank, so executing it in order keeps the
// ranks' collectives matched.
//
// Thread-safety: none; owned by the background thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/control_channel.h"
#include "core/coordinator.h"
#include "core/eager_allreduce.h"
#include "core/response_cache.h"
#include "core/tensor_queue.h"
#include "khorovod/config.h"

namespace khorovod {

class Negotiator {
 public:
  using Clock = std::chrono::steady_clock;

  Negotiator(const Config& config, ControlChannel* channel, TensorQueue* queue);

  void Add(PendingOp op);
  bool has_local_work() const { return !ops_.empty(); }

  // An allreduce whose every contribution arrived with the negotiation:
  // the executor reduces them locally (ReduceEager).
  struct EagerAllreduce {
    Response response;
    std::vector<const std::byte*> contributions;  // rank order, into Round::exchanged
  };
  struct Round {
    std::vector<Response> responses;    // to execute, in order
    std::vector<EagerAllreduce> eager;  // to complete locally, in any order
    std::vector<uint64_t> exchanged;    // every rank's message; backs `eager`
    bool shutdown = false;        // some rank asked to shut down, or a stall shut the job down
    bool stall_shutdown = false;  // the stall shutdown time passed (see shutdown_reason)
    std::string shutdown_reason;  // set with stall_shutdown
    bool idle = true;             // no rank had anything to do
  };
  // A non-OK status means the control channel failed (a peer is gone).
  Status RunRound(bool shutdown_requested, Clock::time_point now, Round* out);

  // Removes and returns the local op named `name`; nullopt when this rank
  // has none (it joined).
  std::optional<PendingOp> Take(const std::string& name);
  // Completes every local op with `status`.
  void FailAll(const Status& status);

  const ResponseCache& cache() const { return cache_; }

 private:
  enum class State { kNew, kCached, kToSend, kSent };
  struct LocalOp {
    PendingOp op;
    State state = State::kNew;
    uint32_t slot = 0;
  };

  // One round's bits: this rank's until ExchangeBits, the job's after.
  struct RoundBits {
    size_t words = 0;          // 64-bit words per bit vector (cache capacity / 64, rounded up)
    size_t message_words = 0;  // per rank in the exchange: flags, ready, invalid, eager payload
    std::vector<uint64_t> ready, invalid;
    std::vector<Request> to_send;
    uint64_t flags = 0;
  };
  RoundBits CollectLocal(bool shutdown_requested, Clock::time_point now);
  Status ExchangeBits(RoundBits& bits, Round* out);
  bool TakeShutdown(uint64_t global_flags, Round* out);
  Status TakeFromCache(RoundBits& bits, Round* out);

  void Classify(LocalOp& local, Clock::time_point now, std::vector<uint64_t>& ready,
                std::vector<uint64_t>& invalid);
  std::vector<Response> TakeCachedReady(const std::vector<uint64_t>& ready);
  void WriteEagerPayload(uint64_t* block);
  // Moves globally ready slots that every rank sent eagerly from `ready`
  // into out->eager.
  Status TakeEager(size_t message_words, std::vector<uint64_t>& ready, Round* out);
  void RequeueEvicted();
  Status Negotiate(std::vector<Request> to_send, Clock::time_point now, std::vector<Response>* out);
  void Deliver(const Response& response);
  // Rank 0: runs the stall inspection when due, logs its warning; true when
  // the job must shut down.
  bool InspectStalls(Clock::time_point now);

  int rank_;
  int size_;
  std::chrono::milliseconds stale_after_;
  ControlChannel* channel_;
  TensorQueue* queue_;
  ResponseCache cache_;
  std::optional<Coordinator> coordinator_;         // rank 0 only
  std::optional<StallInspector> stall_inspector_;  // rank 0 only
  std::string stall_shutdown_message_;
  std::map<std::string, LocalOp> ops_;
  bool joined_ = false;
};

}  // namespace khorovod
