#include "backend/shm/host_layout.h"

#include <string>

namespace khorovod::shm {
namespace {

Status Contradiction(int rank, const std::string& why) {
  return Status::InvalidArgument("placement of rank " + std::to_string(rank) + ": " + why);
}

}  // namespace

StatusOr<HostLayout> HostLayout::FromPlacements(const std::vector<Placement>& placements) {
  const int size = static_cast<int>(placements.size());
  if (size == 0) return Status::InvalidArgument("no placements");
  const int hosts = placements[0].cross_size;
  HostLayout layout;
  layout.members_.assign(static_cast<size_t>(hosts > 0 ? hosts : 0), {});
  layout.host_of_.assign(static_cast<size_t>(size), -1);
  layout.local_rank_of_.assign(static_cast<size_t>(size), -1);
  for (int r = 0; r < size; ++r) {
    const Placement& p = placements[static_cast<size_t>(r)];
    if (p.rank != r || p.size != size)
      return Contradiction(r, "rank or size disagree with the world");
    if (p.cross_size != hosts || p.cross_rank < 0 || p.cross_rank >= hosts) {
      return Contradiction(r, "cross_rank/cross_size disagree with rank 0's host count");
    }
    if (p.local_rank < 0 || p.local_rank >= p.local_size)
      return Contradiction(r, "local_rank out of range");
    auto& host = layout.members_[static_cast<size_t>(p.cross_rank)];
    if (host.size() < static_cast<size_t>(p.local_size))
      host.resize(static_cast<size_t>(p.local_size), -1);
    if (host[static_cast<size_t>(p.local_rank)] != -1) {
      return Contradiction(r, "shares host " + std::to_string(p.cross_rank) + " and local rank " +
                                  std::to_string(p.local_rank) + " with rank " +
                                  std::to_string(host[static_cast<size_t>(p.local_rank)]));
    }
    host[static_cast<size_t>(p.local_rank)] = r;
    layout.host_of_[static_cast<size_t>(r)] = p.cross_rank;
    layout.local_rank_of_[static_cast<size_t>(r)] = p.local_rank;
  }
  // Every host's ranks must fill local ranks 0..local_size-1 exactly once,
  // and agree on local_size (a gap means a rank reported a larger one).
  for (int h = 0; h < hosts; ++h) {
    for (int r : layout.members_[static_cast<size_t>(h)]) {
      if (r == -1)
        return Status::InvalidArgument("host " + std::to_string(h) +
                                       " has a gap in its local ranks");
      if (placements[static_cast<size_t>(r)].local_size !=
          static_cast<int>(layout.members_[static_cast<size_t>(h)].size())) {
        return Contradiction(r, "local_size disagrees with its host's ranks");
      }
    }
  }
  return layout;
}

bool HostLayout::Uniform() const {
  if (members_.size() < 2) return false;
  const size_t per_host = members_[0].size();
  if (per_host < 2) return false;
  for (const auto& host : members_) {
    if (host.size() != per_host) return false;
  }
  return true;
}

std::vector<int> HostLayout::CrossGroup(int rank) const {
  std::vector<int> group;
  const size_t local = static_cast<size_t>(LocalRankOf(rank));
  for (const auto& host : members_) {
    if (local < host.size()) group.push_back(host[local]);
  }
  return group;
}

}  // namespace khorovod::shm
