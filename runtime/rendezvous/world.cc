#include "world.h"

#include <map>
#include <vector>

namespace khorovod::rendezvous {

const Assignment* World::Find(const std::string& name) const {
  for (const Assignment& a : members) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

World BuildWorld(int64_t generation, const std::vector<WorkerSpec>& ordered) {
  World world;
  world.generation = generation;
  world.size = static_cast<int>(ordered.size());

  std::map<std::string, int> host_index;  // address -> cross_rank
  std::map<std::string, int> host_count;  // address -> workers seen so far
  world.members.reserve(ordered.size());
  for (size_t r = 0; r < ordered.size(); ++r) {
    const WorkerSpec& w = ordered[r];
    auto [it, inserted] = host_index.try_emplace(w.address, static_cast<int>(host_index.size()));
    Assignment a;
    a.name = w.name;
    a.address = w.address;
    a.slots = w.slots;
    a.rank = static_cast<int>(r);
    a.cross_rank = it->second;
    a.local_rank = host_count[w.address]++;
    world.members.push_back(std::move(a));
  }
  world.cross_size = static_cast<int>(host_index.size());
  for (Assignment& a : world.members) {
    a.size = world.size;
    a.local_size = host_count[a.address];
    a.cross_size = world.cross_size;
  }
  // Declared slots that number a host's workers 0..local_size-1 become
  // their local ranks.
  std::map<std::string, std::vector<bool>> slots_seen;  // address -> slot taken
  std::map<std::string, bool> by_slot;                  // address -> every slot valid and distinct
  for (size_t r = 0; r < ordered.size(); ++r) {
    const std::string& address = ordered[r].address;
    auto& seen = slots_seen.try_emplace(address, host_count[address], false).first->second;
    const int slot = ordered[r].slot;
    bool& ok = by_slot.try_emplace(address, true).first->second;
    ok = ok && slot >= 0 && slot < static_cast<int>(seen.size()) && !seen[slot];
    if (ok) seen[slot] = true;
  }
  for (size_t r = 0; r < ordered.size(); ++r)
    if (by_slot[ordered[r].address]) world.members[r].local_rank = ordered[r].slot;
  return world;
}

}  // namespace khorovod::rendezvous
