#include "core/process_set_table.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace khorovod {

std::string RankListString(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  os << ']';
  return os.str();
}

int IndexIn(const std::vector<int>& members, int rank) {
  auto it = std::lower_bound(members.begin(), members.end(), rank);
  return it != members.end() && *it == rank ? static_cast<int>(it - members.begin()) : -1;
}

ProcessSetTable::ProcessSetTable(int rank, int size) : rank_(rank) {
  std::vector<int> all(static_cast<size_t>(std::max(size, 0)));
  std::iota(all.begin(), all.end(), 0);
  sets_.emplace(0, std::move(all));
}

std::optional<ProcessSetTable::View> ProcessSetTable::Find(int id) const {
  MutexLock lock(mu_);
  auto it = sets_.find(id);
  if (it == sets_.end()) return std::nullopt;
  return View{it->second, IndexIn(it->second, rank_)};
}

std::vector<int> ProcessSetTable::Ids() const {
  MutexLock lock(mu_);
  std::vector<int> ids;
  for (const auto& [id, ranks] : sets_) ids.push_back(id);
  return ids;
}

Status ProcessSetTable::CheckSubmit(int id, const char* what, const std::string& name,
                                    const int* root) const {
  if (id == 0) return Status::Ok();
  std::optional<View> set = Find(id);
  const std::string op = std::string(what) + " '" + name + "': ";
  if (!set) {
    return Status::InvalidArgument(
        op + "process set " + std::to_string(id) +
        " is not registered (removed, never added, or dropped by an elastic reset)");
  }
  if (set->rank < 0) {
    return Status::InvalidArgument(op + "rank " + std::to_string(rank_) +
                                   " is not a member of process set " + std::to_string(id) + " " +
                                   RankListString(set->ranks));
  }
  if (root && IndexIn(set->ranks, *root) < 0) {
    return Status::InvalidArgument(op + "root rank " + std::to_string(*root) +
                                   " is not a member of process set " + std::to_string(id) + " " +
                                   RankListString(set->ranks));
  }
  return Status::Ok();
}

void ProcessSetTable::Add(int id, std::vector<int> ranks) {
  MutexLock lock(mu_);
  sets_[id] = std::move(ranks);
}

void ProcessSetTable::Remove(int id) {
  MutexLock lock(mu_);
  if (id != 0) sets_.erase(id);
}

}  // namespace khorovod
