// RendezvousClient: a worker's side of the elastic rendezvous protocol.
//
// The worker's life, as the runtime drives it:
//
//   RendezvousClient rdzv(endpoint, "myjob", {"worker-3", "10.0.0.7", 4});
//   KH_RETURN_IF_ERROR(rdzv.Register());
//   for (;;) {
//     StatusOr<GenerationInfo> g = rdzv.WaitForNextGeneration(std::chrono::minutes(10));
//     ... HttpStore(endpoint, "myjob", g->generation) -> gloo context with g->rank, g->size ...
//     ... train; a heartbeat thread calls rdzv.Heartbeat() every heartbeat_interval();
//     ... when it reports membership_changed, or a collective fails, reset at the
//     ... next commit point and loop (WaitForNextGeneration also tells the
//     ... server that this worker is ready for the next generation).
//   }
//   rdzv.Leave("done");
//
// Server restarts: the server keeps no state across restarts. When a call
// finds that the server no longer knows this worker (404 unknown_worker),
// Heartbeat() and WaitForNextGeneration() register again by themselves;
// Heartbeat() then reports reregistered and membership_changed, and the next
// WaitForNextGeneration() waits for a generation of the new server.
//
// Fencing: every call carries this process's incarnation. Once the server
// has declared this incarnation lost (missed heartbeats, a failure report,
// another process registered under the name), it answers 410 worker_fenced;
// the client then never registers again: Heartbeat() reports `fenced`, and
// Register() and WaitForNextGeneration() fail with kFailedPrecondition. A
// zombie back from a network partition thus cannot rejoin under the name
// its replacement holds.
//
// Errors (khorovod::Status; the message names the request, the HTTP status
// and the server's error code and text):
//   kInvalidArgument     the server rejected a request as malformed (400)
//   kFailedPrecondition  bad token (401), unknown job (404), job failed (409)
//   kUnavailable         server unreachable after retries, or this worker is
//                        blacklisted (429; the message gives the retry delay)
//   kDeadlineExceeded    WaitForNextGeneration's timeout passed
//   kJobFinished         WaitForNextGeneration: a worker finished training
//                        (left with kLeaveFinished); no generation will form
// Connection failures are retried with backoff (RetryPolicy) before a call
// gives up, so a restarting server is ridden out.
//
// Thread-safety: all methods are thread-safe; Heartbeat() from a heartbeat
// thread may run concurrently with WaitForNextGeneration() on the main thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "http_json_client.h"
#include "khorovod/placement.h"
#include "khorovod/status.h"
#include "khorovod/util/mutex.h"

namespace khorovod::rendezvous {

struct WorkerIdentity {
  std::string name;     // unique in the job, [A-Za-z0-9._:-]
  std::string address;  // host address of this worker's data plane
  int slots = 1;        // worker processes on this host
  int slot = -1;        // this worker's slot on its host, -1 if undeclared
  std::string node{};   // the machine it runs on (KHOROVOD_NODE_NAME), "" if unknown
  // This process's id, sent with every call about itself; empty: the client
  // draws a random one. See Fencing below.
  std::string incarnation{};
};

struct WorldMember : Placement {
  std::string name;
  std::string address;
  int slots = 1;
};

// This worker's placement in a generation, and everyone's.
struct GenerationInfo : Placement {
  int64_t generation = 0;
  // This worker's placement counted by node (rendezvous/world.h); the
  // address placement above when the server sends none.
  Placement by_node;
  std::vector<WorldMember> world;  // indexed by rank
  std::string server_id;
};

struct HeartbeatInfo {
  int64_t generation = 0;           // the server's current generation
  bool active = false;              // this worker is a member of it
  bool membership_changed = false;  // reset at the next commit point
  // The current generation lost a member or one asked for the next: it can
  // no longer finish a collective (see Membership's HeartbeatView).
  bool reforming = false;
  bool job_failed = false;  // the job failed: stop with failure_reason
  std::string failure_reason;
  bool reregistered = false;  // the server had forgotten this worker (restart)
  // The server had forgotten this worker and refused it again (e.g. a
  // blacklist cooldown): its world is gone, and only the generation wait,
  // which honours retry-after, can bring it back.
  bool forgotten = false;
  // The server declared this process lost and fenced it: it must stop (see
  // Fencing); its generation is over.
  bool fenced = false;
};

struct RendezvousClientOptions {
  RetryPolicy retry;
};

class RendezvousClient {
 public:
  RendezvousClient(HttpEndpoint endpoint, std::string job, WorkerIdentity self,
                   RendezvousClientOptions options = {});

  // Registers (or re-registers) this worker; it is pending until a
  // generation admits it. A blacklisted name (429) fails at once.
  Status Register();
  // Like Register(), but a blacklisted registration is tried again after the
  // server's retry_after while that falls within `patience` (e.g. the
  // elastic timeout), so a worker whose name failed several times in a row
  // (a Kubernetes pod restarted under the same name) is not locked out. The
  // last kUnavailable is returned when the cooldown outlasts the patience.
  Status Register(std::chrono::milliseconds patience);

  // Reports liveness. A failed job is reported in the result (job_failed),
  // not as an error.
  StatusOr<HeartbeatInfo> Heartbeat();

  // Leaves the job (not counted as a failure). Leaving twice is fine. Until
  // the next explicit Register(), heartbeats and generation waits no longer
  // register this worker again when the server answers that it is unknown.
  Status Leave(const std::string& reason = "");

  // Tells the server this worker failed; it is removed and the failure
  // counts towards its blacklisting.
  Status ReportFailure(const std::string& reason);

  // Waits (at most `timeout`) for the first generation after the last one
  // this worker was given by this server, which also declares the worker
  // ready for it. Returns this worker's place in it.
  StatusOr<GenerationInfo> WaitForNextGeneration(std::chrono::milliseconds timeout);

  // The last generation returned by WaitForNextGeneration (0: none yet).
  int64_t last_generation() const;
  // How often to call Heartbeat(), as suggested by the server at Register().
  std::chrono::milliseconds heartbeat_interval() const;
  // The id of the server instance this worker is registered with.
  std::string server_id() const;
  // This process's incarnation id.
  const std::string& incarnation() const { return self_.incarnation; }

 private:
  // mu_ held; *retry_after is the server's cooldown when it answered 429.
  Status RegisterLocked(std::chrono::milliseconds* retry_after = nullptr) REQUIRES(mu_);
  std::string WorkerPathFor(const char* verb) const;
  // A request body carrying this process's incarnation.
  nlohmann::json Body() const;

  JsonHttpClient http_;
  const std::string job_;
  const WorkerIdentity self_;

  mutable Mutex mu_;
  int64_t last_generation_ GUARDED_BY(mu_) = 0;
  uint64_t registrations_ GUARDED_BY(mu_) = 0;  // bumped by every successful Register
  bool left_ GUARDED_BY(mu_) = false;           // Leave() called since the last Register()
  std::chrono::milliseconds heartbeat_interval_ GUARDED_BY(mu_){1000};
  std::string server_id_ GUARDED_BY(mu_);
};

}  // namespace khorovod::rendezvous
