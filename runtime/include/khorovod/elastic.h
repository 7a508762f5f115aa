// Elastic training: a State that survives workers joining and failing, and
// run(), the loop that drives it (Horovod's hvd.elastic.State and
// @hvd.elastic.run).
//
//   State state(runtime);
//   state.add_tensor("weights", weights_view);
//   int64_t& epoch = state.counter("epoch");
//   Status s = elastic::run(runtime, state, [&] {
//     for (; epoch < 10; ++epoch) { ... train ...; KH_RETURN_IF_ERROR(state.commit()); }
//     return Status::Ok();
//   });
//
// commit() snapshots the registered tensors and counters, then asks the
// runtime whether workers were added or removed; if so it returns
// kMembershipChanged and run() re-forms the ring (reset) and broadcasts the
// state from the new rank 0 (sync), without rolling back. Ranks agree on the
// flag inside commit() (one small allreduce), so all re-form at the same
// commit. A collective that fails because a peer died returns kUnavailable
// (kAborted if a peer was re-forming); run() then restores the last commit,
// resets and syncs. Any other error ends run().
//
// Thread-safety: a State is used by the training thread only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "khorovod/runtime.h"

namespace khorovod::elastic {

class State {
 public:
  explicit State(Runtime& runtime) : runtime_(runtime) {}

  // A host buffer that is part of the training state (parameters, optimizer
  // slots). It must outlive the State. Registration order must be the same
  // on every worker.
  void add_tensor(const std::string& name, const TensorView& view);
  // A named integer saved and restored with the tensors (epoch, batch).
  int64_t& counter(const std::string& name);
  // Called after every reset, before sync (e.g. to rescale the learning rate
  // or re-shard data for the new world size).
  void on_reset(std::function<void()> callback) { reset_callbacks_.push_back(std::move(callback)); }

  // Snapshot, then report a membership change as kMembershipChanged.
  Status commit();
  // Returns the tensors and counters to the last snapshot.
  void restore();
  // Broadcasts tensors and counters from rank 0, then snapshots them.
  Status sync();

  int64_t commits() const { return commits_; }
  void run_reset_callbacks();

 private:
  struct Entry {
    std::string name;
    TensorView view;
    std::vector<std::byte> saved;
  };
  void Snapshot();

  Runtime& runtime_;
  std::vector<Entry> tensors_;
  std::map<std::string, int64_t> counters_;
  std::map<std::string, int64_t> saved_counters_;
  std::vector<std::function<void()>> reset_callbacks_;
  int64_t commits_ = 0;
};

struct RunOptions {
  // Re-formations allowed before run() gives up.
  int reset_limit = 100;
};

// Calls `train` until it returns OK, recovering from membership changes and
// peer failures as described above. Returns train's error if it is neither.
Status run(Runtime& runtime, State& state, const std::function<Status()>& train,
           const RunOptions& options = {});

}  // namespace khorovod::elastic
