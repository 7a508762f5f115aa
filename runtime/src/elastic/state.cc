#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include "core/runtime_internals.h"
#include "elastic/checkpoint.h"
#include "khorovod/elastic.h"
#include "observability/worker_metrics.h"

namespace khorovod::elastic {

void State::add_tensor(const std::string& name, const TensorView& view) {
  tensors_.push_back({name, view, {}});
}

int64_t& State::counter(const std::string& name) { return counters_[name]; }

void State::Snapshot() {
  for (Entry& e : tensors_) {
    e.saved.resize(e.view.num_bytes());
    if (!e.saved.empty()) std::memcpy(e.saved.data(), e.view.data, e.saved.size());
  }
  saved_counters_ = counters_;
  saved_serial_ = serial_;
}

void State::checkpoint_to(const std::string& path, int every) {
  checkpoint_path_ = path;
  checkpoint_every_ = every < 1 ? 1 : every;
}

void State::WriteCheckpointIfDue() {
  if (checkpoint_path_.empty() || runtime_.rank() != 0 || saved_serial_ % checkpoint_every_ != 0)
    return;
  CheckpointData data;
  data.serial = saved_serial_;
  data.counters = saved_counters_;
  for (const Entry& e : tensors_) data.tensors.push_back({e.name, e.saved});
  Status s = WriteCheckpoint(checkpoint_path_, data);
  if (!s.ok() && !checkpoint_warned_) {
    checkpoint_warned_ = true;  // once: a full disk would otherwise flood the log every step
    std::fprintf(stderr,
                 "khorovod elastic: %s (training goes on; later failures are not reported)\n",
                 s.ToString().c_str());
  }
}

Status State::commit() {
  ++serial_;
  Snapshot();
  RecordCommit(runtime_);
  ++commits_;
  WriteCheckpointIfDue();
  // Heartbeats reach ranks at different moments; agreeing on the flag here
  // makes every rank re-form at this same commit (as Horovod's
  // check_host_updates does).
  int32_t changed = runtime_.membership_changed() ? 1 : 0;
  TensorView flag{&changed, DataType::kInt32, {1}, {}};
  KH_RETURN_IF_ERROR(runtime_.allreduce("elastic.membership", flag, flag, {ReduceOp::kMax}));
  runtime_.at_commit_boundary();  // a worker stopped with SIGTERM leaves here
  if (changed) {
    return Status(StatusCode::kMembershipChanged,
                  "workers joined or left; re-forming at this commit");
  }
  return Status::Ok();
}

void State::restore() {
  for (Entry& e : tensors_) {
    if (e.saved.size() == e.view.num_bytes() && !e.saved.empty()) {
      std::memcpy(e.view.data, e.saved.data(), e.saved.size());
    }
  }
  // Value by value: assigning the map would reuse its nodes for other keys
  // and leave the references counter() handed out pointing at the wrong
  // counters.
  for (auto& [name, value] : counters_) {
    auto it = saved_counters_.find(name);
    value = it == saved_counters_.end() ? 0 : it->second;
  }
  serial_ = saved_serial_;
}

Status State::ElectSource(int* root, bool* from_checkpoint) {
  const int64_t checkpoint = checkpoint_path_.empty() ? 0 : PeekCheckpointSerial(checkpoint_path_);
  int64_t mine[2] = {serial_, checkpoint};
  Tensor all;
  KH_RETURN_IF_ERROR(
      runtime_.allgather("elastic.election", TensorView{mine, DataType::kInt64, {1, 2}, {}}, &all));
  const int64_t* v = all.data_as<int64_t>();
  const int size = runtime_.size();
  int live = 0, disk = 0;
  for (int r = 1; r < size; ++r) {
    if (v[2 * r] > v[2 * live]) live = r;
    if (v[2 * r + 1] > v[2 * disk + 1]) disk = r;
  }
  *from_checkpoint = v[2 * disk + 1] > v[2 * live];
  *root = *from_checkpoint ? disk : live;
  if (*from_checkpoint && runtime_.rank() == *root) {
    std::fprintf(
        stderr,
        "khorovod elastic: WARNING: no live worker holds a commit newer than %lld; resuming from "
        "the checkpoint %s (commit %lld)\n",
        static_cast<long long>(v[2 * live]), checkpoint_path_.c_str(),
        static_cast<long long>(v[2 * disk + 1]));
  }
  return Status::Ok();
}

// Fills the views, counters and serial from the checkpoint file. A file that
// does not match the registered state is refused with its reason; the caller
// then broadcasts what it holds instead.
Status State::LoadCheckpoint() {
  auto data = ReadCheckpoint(checkpoint_path_);
  if (!data.ok()) return data.status();
  if (data->tensors.size() != tensors_.size()) {
    return Status::InvalidArgument(
        "checkpoint " + checkpoint_path_ + " holds " + std::to_string(data->tensors.size()) +
        " tensors, the state registers " + std::to_string(tensors_.size()));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Entry& e = tensors_[i];
    const CheckpointTensor& t = data->tensors[i];
    if (t.name != e.name || t.bytes.size() != e.view.num_bytes()) {
      return Status::InvalidArgument("checkpoint " + checkpoint_path_ + ": tensor '" + t.name +
                                     "' (" + std::to_string(t.bytes.size()) +
                                     " bytes) does not match '" + e.name + "' (" +
                                     std::to_string(e.view.num_bytes()) + " bytes)");
    }
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!data->tensors[i].bytes.empty()) {
      std::memcpy(tensors_[i].view.data, data->tensors[i].bytes.data(),
                  data->tensors[i].bytes.size());
    }
  }
  for (auto& [name, value] : counters_) {
    auto it = data->counters.find(name);
    value = it == data->counters.end() ? 0 : it->second;
  }
  serial_ = data->serial;
  return Status::Ok();
}

Status State::sync() {
  const auto start = std::chrono::steady_clock::now();
  int root = 0;
  bool from_checkpoint = false;
  KH_RETURN_IF_ERROR(ElectSource(&root, &from_checkpoint));
  if (from_checkpoint && runtime_.rank() == root) {
    if (Status s = LoadCheckpoint(); !s.ok()) {
      std::fprintf(stderr,
                   "khorovod elastic: WARNING: %s; broadcasting this rank's state instead\n",
                   s.ToString().c_str());
    }
  }
  size_t bytes = 0;
  for (const Entry& e : tensors_) bytes += e.view.num_bytes();
  bytes += (counters_.size() + 1) * sizeof(int64_t);
  BroadcastOptions from{root};
  std::vector<Handle> handles;
  for (Entry& e : tensors_)
    handles.push_back(runtime_.broadcast_async("elastic.state." + e.name, e.view, from));
  std::vector<int64_t> values;
  for (const auto& [name, value] : counters_) values.push_back(value);
  values.push_back(serial_);
  TensorView counters{values.data(), DataType::kInt64, {static_cast<int64_t>(values.size())}, {}};
  handles.push_back(runtime_.broadcast_async("elastic.counters", counters, from));
  Status first;
  for (const Handle& h : handles) {
    Status s = h.wait();
    if (!s.ok() && first.ok()) first = s;
  }
  KH_RETURN_IF_ERROR(first);
  size_t i = 0;
  for (auto& [name, value] : counters_) value = values[i++];
  serial_ = values[i];
  Snapshot();
  RecordStateSync(runtime_, bytes, std::chrono::steady_clock::now() - start);
  return Status::Ok();
}

void State::run_reset_callbacks() {
  for (auto& cb : reset_callbacks_) cb();
}

void RecordReset(Runtime& runtime, StatusCode cause) {
  RuntimeInternals::Metrics(runtime).Reset(
      cause == StatusCode::kUnavailable ? ResetCause::kPeerFailure
      : cause == StatusCode::kAborted   ? ResetCause::kPeerAborted
                                        : ResetCause::kMembershipChanged);
}

void RecordRecovered(Runtime& runtime, std::chrono::steady_clock::duration elapsed) {
  RuntimeInternals::Metrics(runtime).Recovered(elapsed);
}

void RecordCommit(Runtime& runtime) { RuntimeInternals::Metrics(runtime).Committed(); }

void RecordStateSync(Runtime& runtime, size_t bytes, std::chrono::steady_clock::duration elapsed) {
  RuntimeInternals::Metrics(runtime).StateSync(bytes, elapsed);
}

void MarkTrainingFinished(Runtime& runtime) { RuntimeInternals::MarkTrainingFinished(runtime); }

Status run(Runtime& runtime, State& state, const std::function<Status()>& train,
           const RunOptions& options) {
  int resets = 0;
  bool synced = false;
  // Set from the start of a reset until the sync after it succeeds.
  std::optional<std::chrono::steady_clock::time_point> recovering_since;
  while (true) {
    Status s = synced ? train() : state.sync();
    if (s.ok()) {
      if (synced) {
        MarkTrainingFinished(runtime);
        return s;
      }
      synced = true;
      if (recovering_since)
        RecordRecovered(runtime, std::chrono::steady_clock::now() - *recovering_since);
      recovering_since.reset();
      continue;
    }
    // kAborted: a peer shut its session down to re-form while this rank was
    // mid-step; like a failure, the partial step is rolled back.
    if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kAborted) {
      state.restore();
    } else if (s.code() != StatusCode::kMembershipChanged) {
      return s;
    }
    RecordReset(runtime, s.code());
    if (!recovering_since) recovering_since = std::chrono::steady_clock::now();
    if (++resets > options.reset_limit) {
      return Status::FailedPrecondition("elastic run gave up after " +
                                        std::to_string(options.reset_limit) +
                                        " resets; last cause: " + s.ToString());
    }
    KH_RETURN_IF_ERROR(runtime.reset());
    state.run_reset_callbacks();
    synced = false;
  }
}

}  // namespace khorovod::elastic
