// HostLayout: which ranks share a host, derived from every rank's Placement
// (its cross_rank names its host, its local_rank its place there).
//
// The hierarchical allreduce (backend/shm/hierarchical_allreduce.h) needs
// two groups per rank: its host group (the ranks of its host, in local-rank
// order) and its cross group (the ranks with its local rank, one per host,
// in host order). It runs only on a uniform layout: at least two hosts, and
// every host runs the same number of ranks (> 1) with local ranks 0..n-1;
// any other layout falls back to the flat Gloo allreduce.
//
// FromPlacements fails with kInvalidArgument on placements that contradict
// each other (a rank's fields out of range, two ranks with one host and
// local rank, a host whose ranks disagree on its local_size): then no
// grouping is trustworthy, and the caller falls back as well.
//
// Thread-safety: a value type.
#pragma once

#include <vector>

#include "khorovod/placement.h"
#include "khorovod/status.h"

namespace khorovod::shm {

class HostLayout {
 public:
  // placements[r] is rank r's placement (placements[r].rank == r).
  static StatusOr<HostLayout> FromPlacements(const std::vector<Placement>& placements);

  int size() const { return static_cast<int>(host_of_.size()); }
  int hosts() const { return static_cast<int>(members_.size()); }
  // Hosts numbered by cross_rank; ranks of host h in local-rank order.
  const std::vector<int>& HostRanks(int host) const { return members_[static_cast<size_t>(host)]; }
  int HostOf(int rank) const { return host_of_[static_cast<size_t>(rank)]; }
  int LocalRankOf(int rank) const { return local_rank_of_[static_cast<size_t>(rank)]; }

  // At least two hosts, all with the same number (> 1) of ranks.
  bool Uniform() const;
  // Ranks per host when Uniform().
  int ranks_per_host() const { return members_.empty() ? 0 : static_cast<int>(members_[0].size()); }

  // The ranks of `rank`'s host, in local-rank order.
  const std::vector<int>& HostGroup(int rank) const { return HostRanks(HostOf(rank)); }
  // The ranks with `rank`'s local rank, in host order; only when Uniform().
  std::vector<int> CrossGroup(int rank) const;

 private:
  std::vector<std::vector<int>> members_;  // [host][local rank] -> rank
  std::vector<int> host_of_;
  std::vector<int> local_rank_of_;
};

}  // namespace khorovod::shm
