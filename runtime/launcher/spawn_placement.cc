#include "launcher/spawn_placement.h"

#include <algorithm>

namespace khorovod::launcher {

StatusOr<Placement> SpawnPlacement(const std::vector<DiscoveredHost>& hosts, int cap,
                                   const std::string& host, int local_index) {
  if (cap < 1) return Status::InvalidArgument("spawn placement: cap must be >= 1");
  Placement p;
  bool found = false;
  int next_rank = 0;
  int cross_size = 0;
  for (const auto& h : hosts) {
    const int in_world = std::max(0, std::min(h.slots, cap - next_rank));
    if (h.name == host && !found) {
      if (local_index < 0 || local_index >= in_world) {
        return Status::InvalidArgument("spawn placement: slot " + std::to_string(local_index) +
                                       " of host " + host + " is not among the job's first " +
                                       std::to_string(cap) + " slots");
      }
      found = true;
      p.rank = next_rank + local_index;
      p.local_rank = local_index;
      p.local_size = in_world;
      p.cross_rank = cross_size;
    }
    if (in_world > 0) ++cross_size;
    next_rank += in_world;
  }
  if (!found) return Status::InvalidArgument("spawn placement: host " + host + " is not listed");
  p.size = next_rank;
  p.cross_size = cross_size;
  return p;
}

}  // namespace khorovod::launcher
