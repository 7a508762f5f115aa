// Rendezvous: how a worker learns its place in the job and reaches its
// peers, generation after generation.
//
// A *generation* is one frozen membership of the job: every worker in it
// has a rank, the size, and its local and cross placement. A static job
// (khorovodrun -np N, file store) has exactly one generation. An elastic job
// asks the rendezvous server for the next generation each time the ring
// must re-form, and learns between commits whether it should.
//
// Thread-safety: NextGeneration, Connect, ReportFailure and Leave are called
// by one thread at a time (the runtime's owner); MembershipChanged may be
// called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "khorovod/config.h"
#include "khorovod/status.h"

namespace gloo {
class Context;
}

namespace khorovod {

// This worker's place in one generation.
struct Assignment : Placement {
  int64_t generation = 0;
  // The same counted by node (rendezvous/world.h); the placement above for
  // a static job, whose hosts are its machines.
  Placement by_node;
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Waits (bounded) for a generation newer than `previous` (-1: the first)
  // that includes this worker.
  virtual StatusOr<Assignment> NextGeneration(int64_t previous) = 0;
  // Connects a Gloo context among the members of `assignment`.
  virtual StatusOr<std::shared_ptr<gloo::Context>> Connect(const Assignment& assignment,
                                                           const Config& config) = 0;
  // The running generation should re-form at the next commit (also when
  // this worker got SIGTERM and leaves at that commit).
  virtual bool MembershipChanged() const = 0;
  // At a commit, after the agreement round (Runtime::at_commit_boundary):
  // from now on SIGTERM is deferred to a commit; a deferred SIGTERM that
  // MembershipChanged() announced leaves the job and ends the process.
  virtual void AtCommitBoundary() {}
  // This worker saw generation `generation` fail (a peer died).
  virtual void ReportFailure(int64_t generation, const std::string& reason) = 0;
  // This worker is leaving the job for good; `training_finished`: because
  // its training loop ended (late joiners are then told the job is finishing).
  virtual void Leave(bool training_finished) = 0;
  virtual bool elastic() const = 0;
};

// The single-generation rendezvous of a static job: the assignment comes
// from the Config, peers meet through Gloo's FileStore (or, for one rank, an
// in-process store).
std::unique_ptr<Rendezvous> MakeStaticRendezvous();

// The elastic rendezvous through the job's khorovod-rendezvous server at
// config.rendezvous_addr, authenticated with config.rendezvous_token.
StatusOr<std::unique_ptr<Rendezvous>> MakeHttpRendezvous(const Config& config);

}  // namespace khorovod
