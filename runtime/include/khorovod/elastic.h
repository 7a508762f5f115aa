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
// state (sync), without rolling back. sync() broadcasts from the lowest rank
// that holds the newest commit (every commit has a serial number), so
// progress is never lost while any holder of the newest commit lives; a
// rank that failed mid-step and rolled back never overwrites a peer that
// completed the step. With checkpoint_to(), a checkpoint newer than every
// live worker's commit (all holders died) is loaded and broadcast instead. Ranks agree on the
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
  // Broadcasts tensors and counters from the holder of the newest commit
  // (or the newest checkpoint), then snapshots them. Collective.
  Status sync();
  // Keeps every `every`-th commit in a file at `path` (written by rank 0,
  // atomically), so that a job which loses every worker holding the state
  // resumes from it instead of from the start. The path must be readable
  // by the workers that may restart the job (a shared volume on
  // Kubernetes). Write failures are reported on stderr and do not stop
  // training.
  void checkpoint_to(const std::string& path, int every = 1);

  int64_t commits() const { return commits_; }
  // The serial of the last commit this State holds (0: none yet).
  int64_t committed_serial() const { return saved_serial_; }
  void run_reset_callbacks();

 private:
  struct Entry {
    std::string name;
    TensorView view;
    std::vector<std::byte> saved;
  };
  void Snapshot();
  // Collective: the rank to broadcast from, and whether it must first load
  // the checkpoint file.
  Status ElectSource(int* root, bool* from_checkpoint);
  Status LoadCheckpoint();
  void WriteCheckpointIfDue();

  Runtime& runtime_;
  std::vector<Entry> tensors_;
  std::map<std::string, int64_t> counters_;
  std::map<std::string, int64_t> saved_counters_;
  std::vector<std::function<void()>> reset_callbacks_;
  int64_t commits_ = 0;
  int64_t serial_ = 0;        // serial of the commit the views hold
  int64_t saved_serial_ = 0;  // serial of the snapshot
  std::string checkpoint_path_;
  int checkpoint_every_ = 1;
  bool checkpoint_warned_ = false;
};

struct RunOptions {
  // Re-formations allowed before run() gives up.
  int reset_limit = 100;
};

// Calls `train` until it returns OK, recovering from membership changes and
// peer failures as described above. Returns train's error if it is neither.
Status run(Runtime& runtime, State& state, const std::function<Status()>& train,
           const RunOptions& options = {});

// For an elastic loop written outside C++ (khorovod.torch's run, in
// Python): what run() and State::sync() record in the worker's metrics
// and tell the rendezvous, as calls (docs/observability.md).
// A reset, by the status that caused it: kUnavailable a failed peer,
// kAborted a peer re-forming, anything else a membership change.
void RecordReset(Runtime& runtime, StatusCode cause);
// From the start of a reset to the end of the sync after it.
void RecordRecovered(Runtime& runtime, std::chrono::steady_clock::duration elapsed);
void RecordStateSync(Runtime& runtime, size_t bytes, std::chrono::steady_clock::duration elapsed);
// A commit took its snapshot: the steps since the last one are kept (goodput).
void RecordCommit(Runtime& runtime);
// The training function returned: shutdown() then tells the rendezvous the
// job's training finished, so late joiners are sent away (docs/elastic.md,
// "Late joiners at job end").
void MarkTrainingFinished(Runtime& runtime);

}  // namespace khorovod::elastic
