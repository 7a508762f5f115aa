// ProcessSetTable: the process sets registered in one session (generation),
// as every rank sees them: id -> ascending global member ranks. The global
// set (id 0, every rank) is always present.
//
// User threads read it to refuse, at submission, operations on a set that
// does not exist or that this rank is not a member of; the background
// thread changes it when a registration or removal was negotiated (every
// rank applies the same change in the same round), so all ranks agree on
// the table between rounds.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "khorovod/status.h"
#include "khorovod/util/mutex.h"

namespace khorovod {

class ProcessSetTable {
 public:
  ProcessSetTable(int rank, int size);

  struct View {
    std::vector<int> ranks;  // global ranks, ascending
    int rank = -1;           // this rank's index in `ranks`; -1: not a member
  };
  std::optional<View> Find(int id) const;
  std::vector<int> Ids() const;
  // kInvalidArgument naming the problem when this rank may not submit an
  // operation on set `id`; for a broadcast also checks that `root` (a
  // global rank) is a member.
  Status CheckSubmit(int id, const char* what, const std::string& name, const int* root) const;

  void Add(int id, std::vector<int> ranks);
  void Remove(int id);

 private:
  const int rank_;
  mutable Mutex mu_;
  std::map<int, std::vector<int>> sets_ GUARDED_BY(mu_);
};

// "[0, 2, 3]"; shared by the process-set messages.
std::string RankListString(const std::vector<int>& ranks);
// Index of global rank `rank` in the ascending `members`; -1 if absent.
int IndexIn(const std::vector<int>& members, int rank);

}  // namespace khorovod
