// ProcessSetComm: a process set's own data plane (khorovod/process_set.h):
// a Gloo context among the set's members, a host backend on it and an
// executor that runs the set's responses with the set's rank and size.
// ProcessSetComms: a session's comms, and the execution of a round's
// responses across the global executor and the sets' ones.
//
// The members' context is built from the job's: each member creates one
// transport pair per other member on the job's device, the pair addresses
// travel in one exchange over the job's control channel, then every pair
// connects. The exchange is collective over the whole job (non-members send
// nothing and get no comm), so ConnectProcessSet must be called by every
// rank's background thread at the same point of the same round.
//
// Thread-safety: none; owned by the background thread.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/control_channel.h"
#include "core/executor.h"
#include "core/negotiator.h"
#include "core/process_set_table.h"
#include "khorovod/config.h"

namespace gloo {
class Context;
}

namespace khorovod {

struct ProcessSetComm {
  std::shared_ptr<gloo::Context> context;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Executor> executor;
};

struct ProcessSetCommInit {
  const Config* config = nullptr;  // the job's: rank, fusion threshold
  std::shared_ptr<gloo::Context> job_context;
  ControlChannel* channel = nullptr;
  TensorQueue* queue = nullptr;
  WorkerMetrics* metrics = nullptr;
  Timeline* timeline = nullptr;
};

// `members`: ascending global ranks. Returns null on non-members. A failed
// exchange or connection (a peer is gone) is kUnavailable.
StatusOr<std::unique_ptr<ProcessSetComm>> ConnectProcessSet(const std::vector<int>& members,
                                                            const ProcessSetCommInit& init);

class ProcessSetComms {
 public:
  // `table` is the session's, updated here as registrations and removals
  // are executed.
  ProcessSetComms(ProcessSetCommInit init, std::shared_ptr<ProcessSetTable> table);

  // Runs a round's responses: the global ones on `global`, then
  // registrations, each set's responses (by id, on its comm where this rank
  // is a member), and removals last. Every rank follows that order on the
  // comms it belongs to, so no two ranks wait for each other on different
  // comms. A non-OK status is fatal for the session (as Executor::Execute).
  Status Execute(const std::vector<Response>& responses, Executor& global, Negotiator& negotiator);
  // Closes every set's connections.
  void Clear() { comms_.clear(); }

 private:
  Status Add(const Response& r, Negotiator& negotiator);
  void Remove(const Response& r, Negotiator& negotiator);

  ProcessSetCommInit init_;
  std::shared_ptr<ProcessSetTable> table_;
  std::map<int, std::unique_ptr<ProcessSetComm>> comms_;  // sets this rank is a member of
};

}  // namespace khorovod
