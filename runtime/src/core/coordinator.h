// Coordinator: rank 0's table of tensors that some ranks have submitted.
//
// It turns the Requests of all ranks into an ordered list of Responses:
//   * a tensor is ready once every rank submitted it (a joined rank counts
//     as having submitted any allreduce);
//   * ready tensors are checked for agreement (op, dtype, shape, root,
//     scaling, group); disagreement yields a kMismatch error Response that
//     names the field and each rank's value;
//   * members of a group are released together, once all are ready;
//   * a tensor still incomplete waits, however long: a slow rank is not an
//     error (as in Horovod); Pending() lists what waits, for the stall
//     inspector (core/stall_inspector.h) to warn about or shut down on;
//   * join requests are counted; when every rank joined, one kJoin Response;
//   * process sets (khorovod/process_set.h): an operation on a set is ready
//     once every member submitted it, and its response is in the set's
//     terms (member order, set-local root); registrations and removals
//     (OpType::kProcessSet) are global operations that change the table
//     of sets; a name submitted under two sets by ranks that wait for each
//     other is a kMismatch on both.
// Responses come out in the order their tensors were first seen, so the
// result is a pure function of the inputs and the clock readings passed in.
//
// Thread-safety: none; owned by rank 0's background thread.
#pragma once

#include <chrono>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/message.h"
#include "core/stall_inspector.h"

namespace khorovod {

class Coordinator {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Coordinator(int size);

  void Add(const Request& request, Clock::time_point now);
  std::vector<Response> Collect();
  // Every tensor submitted by some but not all members of its set, with the
  // global ranks still missing (a joined rank is not missing).
  std::vector<PendingTensor> Pending() const;
  bool empty() const { return table_.empty(); }

 private:
  struct Entry {
    std::string name;
    int32_t process_set = 0;
    std::vector<int> members;  // the set's global ranks; empty: not registered
    std::vector<std::optional<Request>> by_rank;
    int submitted = 0;
    Clock::time_point first_seen;
  };

  bool Ready(const Entry& e) const;
  std::optional<std::string> CheckAgreement(const Entry& e) const;
  std::optional<std::string> JoinConflict(const Entry& e) const;
  Response BuildResponse(const Entry& e) const;
  Response ErrorFor(const Entry& e, StatusCode code, const std::string& message) const;
  // Registers or removes the set an agreed kProcessSet entry names.
  Response ApplyProcessSet(const Entry& e);
  // Entries that deadlock on each other through one name in two sets.
  std::vector<std::list<Entry>::iterator> CrossSetConflicts() const;

  // Collect's phases (coordinator.cc says what each releases).
  using ReadyGroups = std::map<std::string, std::vector<std::list<Entry>::iterator>>;
  void ReleaseCrossSetConflicts(std::vector<Response>& out);
  void ReleaseReady(std::vector<Response>& out);
  bool ReleaseOne(std::list<Entry>::iterator it, ReadyGroups& ready_groups,
                  std::vector<Response>& out);
  void ReleaseUnregistered(std::vector<Response>& out);
  void ReleaseJoin(std::vector<Response>& out);
  // Removes an entry from the table and the name index.
  void Drop(std::list<Entry>::iterator it);

  int size_;
  std::list<Entry> table_;  // arrival order
  std::map<std::pair<int32_t, std::string>, std::list<Entry>::iterator> by_name_;
  std::map<int32_t, std::vector<int>> sets_;  // 0: every rank
  int32_t next_set_id_ = 1;
  std::vector<bool> joined_;
  int joined_count_ = 0;
  int last_joined_ = -1;
};

}  // namespace khorovod
