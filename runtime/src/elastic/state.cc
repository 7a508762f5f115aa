#include <chrono>
#include <cstring>
#include <optional>

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
}

Status State::commit() {
  Snapshot();
  ++commits_;
  // Heartbeats reach ranks at different moments; agreeing on the flag here
  // makes every rank re-form at this same commit (as Horovod's
  // check_host_updates does).
  int32_t changed = runtime_.membership_changed() ? 1 : 0;
  TensorView flag{&changed, DataType::kInt32, {1}, {}};
  KH_RETURN_IF_ERROR(runtime_.allreduce("elastic.membership", flag, flag, {ReduceOp::kMax}));
  if (changed) {
    return Status(StatusCode::kMembershipChanged, "workers joined or left; re-forming at this commit");
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
}

Status State::sync() {
  const auto start = std::chrono::steady_clock::now();
  size_t bytes = 0;
  for (const Entry& e : tensors_) bytes += e.view.num_bytes();
  bytes += counters_.size() * sizeof(int64_t);
  std::vector<Handle> handles;
  for (Entry& e : tensors_) handles.push_back(runtime_.broadcast_async("elastic.state." + e.name, e.view));
  std::vector<int64_t> values;
  for (const auto& [name, value] : counters_) values.push_back(value);
  TensorView counters{values.data(), DataType::kInt64, {static_cast<int64_t>(values.size())}, {}};
  if (!values.empty()) handles.push_back(runtime_.broadcast_async("elastic.counters", counters));
  Status first;
  for (const Handle& h : handles) {
    Status s = h.wait();
    if (!s.ok() && first.ok()) first = s;
  }
  KH_RETURN_IF_ERROR(first);
  size_t i = 0;
  for (auto& [name, value] : counters_) value = values[i++];
  Snapshot();
  detail::MetricsOf(runtime_)->StateSync(bytes, std::chrono::steady_clock::now() - start);
  return Status::Ok();
}

void State::run_reset_callbacks() {
  for (auto& cb : reset_callbacks_) cb();
}

Status run(Runtime& runtime, State& state, const std::function<Status()>& train,
           const RunOptions& options) {
  WorkerMetrics* metrics = detail::MetricsOf(runtime);
  int resets = 0;
  bool synced = false;
  // Set from the start of a reset until the sync after it succeeds.
  std::optional<std::chrono::steady_clock::time_point> recovering_since;
  while (true) {
    Status s = synced ? train() : state.sync();
    if (s.ok()) {
      if (synced) return s;
      synced = true;
      if (recovering_since) metrics->Recovered(std::chrono::steady_clock::now() - *recovering_since);
      recovering_since.reset();
      continue;
    }
    // kAborted: a peer shut its session down to re-form while this rank was
    // mid-step; like a failure, the partial step is rolled back.
    if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kAborted) {
      state.restore();
      metrics->Reset(s.code() == StatusCode::kUnavailable ? ResetCause::kPeerFailure : ResetCause::kPeerAborted);
    } else if (s.code() == StatusCode::kMembershipChanged) {
      metrics->Reset(ResetCause::kMembershipChanged);
    } else {
      return s;
    }
    if (!recovering_since) recovering_since = std::chrono::steady_clock::now();
    if (++resets > options.reset_limit) {
      return Status::FailedPrecondition("elastic run gave up after " + std::to_string(options.reset_limit) +
                                        " resets; last cause: " + s.ToString());
    }
    KH_RETURN_IF_ERROR(runtime.reset());
    state.run_reset_callbacks();
    synced = false;
  }
}

}  // namespace khorovod::elastic
