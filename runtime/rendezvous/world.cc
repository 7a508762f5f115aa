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

namespace {

// The by-node placement (world.h) of members whose address placement is
// set: a node's pods (addresses) in the order of their lowest rank, each
// pod's ranks in its local-rank order, so a pod's slot i keeps its place
// among its pod's ranks. An address is on the node its first worker
// declared.
void AssignByNode(const std::vector<WorkerSpec>& ordered, World* world) {
  std::map<std::string, std::string> node_of;  // address -> node key
  std::map<std::string, int> node_index;       // node key -> cross rank
  std::map<std::string, int> node_total;       // node key -> ranks on it
  std::map<std::string, int> pod_offset;       // address -> its first local rank on the node
  for (size_t r = 0; r < ordered.size(); ++r) {
    const WorkerSpec& w = ordered[r];
    if (node_of.count(w.address)) continue;
    // Prefixed, so that no node name can pass for an address.
    const std::string key = w.node.empty() ? "address " + w.address : "node " + w.node;
    node_of[w.address] = key;
    node_index.try_emplace(key, static_cast<int>(node_index.size()));
    pod_offset[w.address] = node_total[key];
    node_total[key] += world->members[r].local_size;
  }
  for (Assignment& a : world->members) {
    const std::string& key = node_of[a.address];
    a.by_node = Placement{a.rank,          a.size,          pod_offset[a.address] + a.local_rank,
                          node_total[key], node_index[key], static_cast<int>(node_index.size())};
  }
}

}  // namespace

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
  AssignByNode(ordered, &world);
  return world;
}

}  // namespace khorovod::rendezvous
