#include "world.h"

#include <map>

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
  return world;
}

}  // namespace khorovod::rendezvous
