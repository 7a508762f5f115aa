// Timeline: a Chrome-trace (about://tracing, Perfetto) JSON file of what the
// runtime did with each tensor, like Horovod's HOROVOD_TIMELINE. Switched on
// by KHOROVOD_TIMELINE=path (Config::timeline_path) from init(), or at run
// time between Start(path) and Stop() (Runtime::start_timeline). One object
// lives as long as the Runtime; while stopped it records nothing, and each
// Start writes a new, complete file.
//
// File format: a JSON array of trace events. Each tensor gets its own row
// (tid), named by a "thread_name" metadata event the first time it appears.
// Per operation the rows show complete ("ph": "X") events, timestamps in
// microseconds since the timeline opened:
//   NEGOTIATE_<OP>            submission until the op starts executing
//   MEMCPY_IN_FUSION_BUFFER   packing a fused allreduce (fused tensors only)
//   <OP>                      the data-plane collective (ALLREDUCE, BROADCAST...)
//   MEMCPY_OUT_FUSION_BUFFER  unpacking a fused allreduce
// args carry the tensor's bytes and, for fused allreduces, the group size.
// With mark_cycles, each negotiation round that did work adds an instant
// event CYCLE_START on its own row.
// The file is a complete JSON array once Stop() (or the destructor) ran;
// after a crash it lacks the closing bracket, which trace viewers accept.
//
// Cost: while stopped, Record() is one atomic load. Running, it copies the tensor name and appends
// to a queue under a short lock; a background thread formats and writes. Past kMaxPending queued
// events, new ones are dropped (and counted in the file's last event), so a slow disk never stalls
// training.
//
// Thread-safety: every method may be called from any thread; Start and
// Stop are serialized among themselves.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "khorovod/status.h"
#include "khorovod/util/mutex.h"

namespace khorovod {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxPending = 1 << 20;

  // A stopped timeline.
  explicit Timeline(std::string process_name);
  // A timeline started on `path`.
  static StatusOr<std::unique_ptr<Timeline>> Open(const std::string& path,
                                                  const std::string& process_name);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Creates (truncates) `path` and starts recording, with timestamps from
  // now; a running timeline is stopped (its file completed) first.
  // kInvalidArgument naming the path when it cannot be opened.
  Status Start(const std::string& path, bool mark_cycles = false);
  // Writes what is queued, closes the array and the file. Idempotent.
  void Stop();
  void Close() { Stop(); }
  bool active() const { return active_.load(std::memory_order_acquire); }

  // `phase` must be a string literal (it is stored as a pointer).
  void Record(std::string_view tensor, const char* phase, Clock::time_point start,
              Clock::time_point end, size_t bytes, size_t fused = 0);
  // A CYCLE_START instant event, when started with mark_cycles.
  void MarkCycle(Clock::time_point at);

 private:
  struct Event {
    std::string tensor;
    const char* phase;
    int64_t start_us;
    int64_t duration_us;
    size_t bytes;
    size_t fused;
  };
  void WriterLoop();
  void Write(const Event& e);
  void StopLocked() REQUIRES(control_mu_);

  const std::string process_name_;
  Mutex control_mu_;  // serializes Start and Stop
  std::atomic<bool> active_{false};
  std::atomic<bool> mark_cycles_{false};
  // Set by Start before the writer starts; the writer's until it is joined.
  std::FILE* file_ = nullptr;
  Mutex mu_;
  Clock::time_point origin_ GUARDED_BY(mu_);
  std::condition_variable cv_;
  std::vector<Event> pending_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = true;  // no file open
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  // Writer thread only.
  std::unordered_map<std::string, int> tids_;
  std::thread writer_;
};

}  // namespace khorovod
