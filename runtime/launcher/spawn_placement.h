// Spawn placement: the placement horovodrun's elastic driver exports to a
// worker it spawns (HOROVOD_RANK, HOROVOD_SIZE, ... at spawn time).
//
// Horovod's elastic driver assigns ranks host by host: the hosts in discovery
// order, each contributing its usable slots, cut at the job's maximum
// (get_host_assignments), and spawns every worker with its slot's placement
// in the environment. Scripts read it before init() (Horovod's elastic tests
// use HOROVOD_RANK to pick which worker fails). The rendezvous still assigns
// the ranks each generation: hvd.rank() after init() is authoritative.
//
// Contract: SpawnPlacement(hosts, cap, host, local_index) is the placement of
// slot `local_index` (0-based) of `host` in the world made of the first `cap`
// slots of `hosts` (in order; a host's `slots` are its usable slots, 0 for a
// blacklisted host). cross_* number the hosts that have a slot in that world.
// InvalidArgument when `host` is not listed, `cap` < 1, or the slot is not
// in the world (local_index outside the host's slots or beyond `cap`).
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "khorovod/placement.h"
#include "khorovod/status.h"
#include "launcher/host_discovery.h"

namespace khorovod::launcher {

StatusOr<Placement> SpawnPlacement(const std::vector<DiscoveredHost>& hosts, int cap,
                                   const std::string& host, int local_index);

}  // namespace khorovod::launcher
