// World: the frozen, ordered membership of one generation, and BuildWorld,
// the pure function that assigns ranks to an ordered list of workers.
//
// Rank assignment (the order is decided by Membership; BuildWorld keeps it):
//   rank        = position in the list; size = list length
//   local_rank  = position among the workers with the same address (workers
//                 sharing an address are on one host), in rank order
//                 except that when every worker of an address declares a
//                 distinct slot in [0, local_size), local_rank = slot (as
//                 Horovod ranks a host's slots: slot i is local rank i, so
//                 the GPU khorovod-slots gave slot i is local rank i's)
//   local_size  = number of workers with that address
//   cross_rank  = index of the worker's host, hosts numbered in the order of
//                 their lowest rank; cross_size = number of distinct hosts
//   by_node     = the same counted by node instead of by address: a node's
//                 addresses (pods) in the order of their lowest rank, each
//                 one's workers in its local-rank order, so local_rank =
//                 the ranks of the node's earlier pods + the local rank in
//                 its own; local_size = workers on the node; cross_rank =
//                 index of the node, nodes numbered in the order of their
//                 lowest rank. An address is on the node its first worker
//                 declared; one that declared none is on a node of its own
//                 address. Pods of one node have addresses of their own,
//                 so the two differ when a node runs several pods of the
//                 job: the address grouping says who can share memory, the
//                 node one where they run.
//
// Thread-safety: value types and a pure function. A World is immutable once
// built and is shared as std::shared_ptr<const World>.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "khorovod/placement.h"

namespace khorovod::rendezvous {

// What a worker declares when it registers.
struct WorkerSpec {
  std::string name;     // unique within the job; [A-Za-z0-9._:-]
  std::string address;  // host address the worker's data plane listens on
  int slots = 1;        // worker processes its host runs (caps admissions per address)
  int slot = -1;        // its slot on the host (khorovod-slots' slot index), -1 if undeclared
  // The process behind the name: a random id the client draws once per
  // process ("" from an old client: no fencing). A name is reused across
  // processes (a Kubernetes pod re-created under the same name); the
  // incarnation tells the replacement from a lost predecessor (Membership's
  // fencing).
  std::string incarnation{};
  // Registered by the launcher as it starts the worker's process (in-process
  // only; the HTTP API never sets them): the process is expected to register
  // and ask for a generation itself; `awaited`: the members are told at once
  // and the next generation waits for it (Membership's "Spawned workers").
  bool spawned = false;
  bool awaited = false;
  // The machine it runs on as its orchestrator names it (Kubernetes'
  // spec.nodeName, KHOROVOD_NODE_NAME); "" when unknown.
  std::string node{};
};

// One member's place in the world, with who it is.
struct Assignment : Placement {
  std::string name;
  std::string address;
  int slots = 1;
  Placement by_node;  // the same rank, local and cross by node (see above)
};

struct World {
  int64_t generation = 0;
  int size = 0;
  int cross_size = 0;
  std::vector<Assignment> members;  // indexed by rank
  std::chrono::milliseconds formation_time{0};

  // The member named `name`, or nullptr.
  const Assignment* Find(const std::string& name) const;
};

World BuildWorld(int64_t generation, const std::vector<WorkerSpec>& ordered);

}  // namespace khorovod::rendezvous
