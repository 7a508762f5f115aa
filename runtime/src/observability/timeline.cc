// Timeline: see timeline.h.
#include "observability/timeline.h"

#include <nlohmann/json.hpp>

namespace khorovod {

StatusOr<std::unique_ptr<Timeline>> Timeline::Open(const std::string& path, const std::string& process_name) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Status::InvalidArgument("KHOROVOD_TIMELINE='" + path + "': cannot open it for writing");
  return std::unique_ptr<Timeline>(new Timeline(f, process_name));
}

Timeline::Timeline(std::FILE* file, std::string process_name) : file_(file), origin_(Clock::now()) {
  nlohmann::json meta = {{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", process_name}}}};
  std::fprintf(file_, "[\n%s", meta.dump().c_str());
  writer_ = std::thread([this] { WriterLoop(); });
}

Timeline::~Timeline() { Close(); }

void Timeline::Record(std::string_view tensor, const char* phase, Clock::time_point start, Clock::time_point end,
                      size_t bytes, size_t fused) {
  const auto us = [this](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count();
  };
  Event e{std::string(tensor), phase, us(start), std::max<int64_t>(us(end) - us(start), 0), bytes, fused};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    if (pending_.size() >= kMaxPending) {
      ++dropped_;
      return;
    }
    pending_.push_back(std::move(e));
  }
  cv_.notify_one();
}

void Timeline::WriterLoop() {
  std::vector<Event> batch;
  while (true) {
    bool closing;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return closing_ || !pending_.empty(); });
      batch.swap(pending_);
      closing = closing_;
    }
    for (const Event& e : batch) Write(e);
    batch.clear();
    std::fflush(file_);
    if (closing) {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.empty()) return;
    }
  }
}

void Timeline::Write(const Event& e) {
  auto [it, added] = tids_.emplace(e.tensor, static_cast<int>(tids_.size()) + 1);
  if (added) {
    nlohmann::json meta = {{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", it->second},
                           {"args", {{"name", e.tensor}}}};
    std::fprintf(file_, ",\n%s", meta.dump().c_str());
  }
  nlohmann::json args = {{"tensor", e.tensor}, {"bytes", e.bytes}};
  if (e.fused) args["fused_tensors"] = e.fused;
  nlohmann::json ev = {{"name", e.phase}, {"ph", "X"}, {"pid", 0}, {"tid", it->second},
                       {"ts", e.start_us}, {"dur", e.duration_us}, {"args", std::move(args)}};
  std::fprintf(file_, ",\n%s", ev.dump().c_str());
}

void Timeline::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    closing_ = true;
  }
  cv_.notify_one();
  if (writer_.joinable()) writer_.join();
  if (dropped_) {
    nlohmann::json note = {{"name", "dropped_events"}, {"ph", "M"}, {"pid", 0}, {"args", {{"count", dropped_}}}};
    std::fprintf(file_, ",\n%s", note.dump().c_str());
  }
  std::fprintf(file_, "\n]\n");
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace khorovod
