// Timeline: a Chrome-trace (about://tracing, Perfetto) JSON file of what the
// runtime did with each tensor, like Horovod's HOROVOD_TIMELINE. Switched on
// by KHOROVOD_TIMELINE=path (Config::timeline_path).
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
// The file is a complete JSON array once Close() (or the destructor) ran;
// after a crash it lacks the closing bracket, which trace viewers accept.
//
// Cost: Record() copies the tensor name and appends to a queue under a
// short lock; a background thread formats and writes. Past kMaxPending
// queued events, new ones are dropped (and counted in the file's last
// event), so a slow disk never stalls training.
//
// Thread-safety: Record() from any thread; Close() once.
#pragma once

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

namespace khorovod {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxPending = 1 << 20;

  // Creates (truncates) `path` and starts the writer. kInvalidArgument
  // naming the path when it cannot be opened.
  static StatusOr<std::unique_ptr<Timeline>> Open(const std::string& path, const std::string& process_name);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // `phase` must be a string literal (it is stored as a pointer).
  void Record(std::string_view tensor, const char* phase, Clock::time_point start, Clock::time_point end,
              size_t bytes, size_t fused = 0);
  // Writes what is queued, closes the array and the file. Idempotent.
  void Close();

 private:
  struct Event {
    std::string tensor;
    const char* phase;
    int64_t start_us;
    int64_t duration_us;
    size_t bytes;
    size_t fused;
  };
  Timeline(std::FILE* file, std::string process_name);
  void WriterLoop();
  void Write(const Event& e);

  std::FILE* file_;
  const Clock::time_point origin_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> pending_;
  bool closing_ = false;
  uint64_t dropped_ = 0;
  // Writer thread only.
  std::unordered_map<std::string, int> tids_;
  std::thread writer_;
};

}  // namespace khorovod
