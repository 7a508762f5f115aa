// RuntimeImpl: what a Runtime (khorovod/runtime.h) holds: the rendezvous,
// the session of the generation it is in (core/session.h) with its
// background thread (core/background_loop.h), and what outlives sessions:
// the worker's identity in the job, the device it pinned, its metrics and
// timeline. Runtime's methods (core/runtime.cc, core/runtime_ops.cc,
// core/runtime_process_sets.cc) forward to it.
//
// Lifecycle: Init() joins the first generation (static: the one world);
// Reset() ends the session and joins the next generation (elastic only);
// Finish() ends the session and leaves the job. In an elastic job a
// generation that fails to form (a peer dead, vanished or replaced) sends
// the worker back to the rendezvous for the next one, for up to the elastic
// timeout; only the rendezvous' verdict ends the job.
//
// Thread-safety: Init, Reset and Finish from one thread at a time (the
// Runtime's contract: init and shutdown do not race). Everything else may
// be called from any thread: the session pointer is guarded by mu_
// (shared for submissions, exclusive to start or end a session).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "core/session.h"
#include "khorovod/metrics/http_endpoint.h"
#include "khorovod/runtime.h"
#include "khorovod/util/mutex.h"

namespace khorovod {

class RuntimeImpl {
 public:
  RuntimeImpl() = default;
  ~RuntimeImpl() { (void)Finish(); }
  RuntimeImpl(const RuntimeImpl&) = delete;
  RuntimeImpl& operator=(const RuntimeImpl&) = delete;

  Status Init(const Config& config);
  Status Reset();
  // Leaves the job for good (elastic) and ends the session.
  Status Finish();

  bool initialized() const;
  Topology topology() const;
  bool MembershipChanged() const { return rendezvous_ && rendezvous_->MembershipChanged(); }
  void AtCommitBoundary() {
    if (rendezvous_) rendezvous_->AtCommitBoundary();
  }

  // Validates device placement and process sets against the session and
  // enqueues `ops` as one batch; a refused batch returns a failed handle.
  Handle Submit(std::vector<PendingOp> ops);
  Status CheckRoot(int root) const;
  // The running session's process sets; null before init().
  std::shared_ptr<const ProcessSetTable> process_sets() const;
  // The running session's count of blocked callers (TensorQueue::waiters);
  // null before init(). A blocking collective counts itself in it before it
  // submits (common/waiter_signal.h).
  std::shared_ptr<WaiterBoard> waiters() const;

  // Runtime::start_timeline: the file rule of KHOROVOD_TIMELINE ("{rank}",
  // else rank 0 only), applied with the current rank.
  Status StartTimeline(const std::string& pattern, bool mark_cycles);
  Status StopTimeline();

  WorkerMetrics& metrics() { return *metrics_; }
  // elastic::run returned from the training function: Finish() then tells
  // the rendezvous the job's training finished, so late joiners are sent
  // away (docs/elastic.md, "Late joiners at job end").
  void MarkTrainingFinished() { training_finished_ = true; }

 private:
  Status JoinNextGeneration();
  Status EnterGeneration(const Assignment& assignment);
  Status StartObservability(const Config& config);
  Status StartSession(const Config& config, const Assignment& assignment);
  // Ends the session (joins its thread), keeping what the next one inherits.
  Status Shutdown();
  Status CheckProcessSet(const PendingOp& op) const REQUIRES_SHARED(mu_);
  Status CheckDevice(const PendingOp& op) const REQUIRES_SHARED(mu_);

  mutable SharedMutex mu_;
  std::unique_ptr<Session> session_ GUARDED_BY(mu_);
  // Survive across generations: the worker's identity in the job.
  Config base_config_;
  int64_t static_inits_ = 0;  // static-job Init() calls so far (Init: one caller at a time)
  std::unique_ptr<Rendezvous> rendezvous_;
  int64_t generation_ = -1;
  // The device this process's first session pinned, kept across elastic
  // generations (see StartSession).
  std::optional<Device> pinned_device_;
  // What the last session's device backend retired (NCCL: its communicator),
  // handed to the next session's; dropped by Finish().
  std::shared_ptr<BackendLegacy> device_legacy_;
  // Observability lives as long as the Runtime (sessions hold raw pointers
  // to it; ~RuntimeImpl ends the session in Finish() before members go).
  // The endpoint is declared after the metrics so it stops serving first.
  const std::unique_ptr<WorkerMetrics> metrics_ = std::make_unique<WorkerMetrics>();
  std::unique_ptr<metrics::MetricsEndpoint> endpoint_;
  std::unique_ptr<Timeline> timeline_;
  bool timeline_opened_ = false;
  bool training_finished_ = false;  // see MarkTrainingFinished
};

}  // namespace khorovod
