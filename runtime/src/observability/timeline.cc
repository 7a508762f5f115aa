// Timeline: see timeline.h.
#include "observability/timeline.h"

#include <nlohmann/json.hpp>

namespace khorovod {

namespace {

// The row of the cycle marks; tensors get rows from 1 on.
constexpr const char* kCycleRow = "khorovod.cycles";

}  // namespace

Timeline::Timeline(std::string process_name) : process_name_(std::move(process_name)) {}

StatusOr<std::unique_ptr<Timeline>> Timeline::Open(const std::string& path,
                                                   const std::string& process_name) {
  auto timeline = std::make_unique<Timeline>(process_name);
  KH_RETURN_IF_ERROR(timeline->Start(path));
  return timeline;
}

Timeline::~Timeline() { Stop(); }

Status Timeline::Start(const std::string& path, bool mark_cycles) {
  MutexLock control(control_mu_);
  StopLocked();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Status::InvalidArgument("timeline '" + path + "': cannot open it for writing");
  file_ = f;
  tids_.clear();
  nlohmann::json meta = {
      {"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", process_name_}}}};
  std::fprintf(file_, "[\n%s", meta.dump().c_str());
  {
    MutexLock lock(mu_);
    origin_ = Clock::now();
    pending_.clear();
    dropped_ = 0;
    closing_ = false;
  }
  mark_cycles_.store(mark_cycles, std::memory_order_relaxed);
  writer_ = std::thread([this] { WriterLoop(); });
  active_.store(true, std::memory_order_release);
  return Status::Ok();
}

void Timeline::MarkCycle(Clock::time_point at) {
  if (!active() || !mark_cycles_.load(std::memory_order_relaxed)) return;
  Record(kCycleRow, "CYCLE_START", at, at, 0);
}

void Timeline::Record(std::string_view tensor, const char* phase, Clock::time_point start,
                      Clock::time_point end, size_t bytes, size_t fused) {
  if (!active()) return;
  Event e{std::string(tensor), phase, 0, 0, bytes, fused};
  {
    MutexLock lock(mu_);
    if (closing_) return;
    const auto us = [this](Clock::time_point t) REQUIRES(mu_) {
      return std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count();
    };
    e.start_us = us(start);
    e.duration_us = std::max<int64_t>(us(end) - us(start), 0);
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
      MutexLock lock(mu_);
      lock.Wait(cv_, [this]() REQUIRES(mu_) { return closing_ || !pending_.empty(); });
      batch.swap(pending_);
      closing = closing_;
    }
    for (const Event& e : batch) Write(e);
    batch.clear();
    std::fflush(file_);
    if (closing) {
      MutexLock lock(mu_);
      if (pending_.empty()) return;
    }
  }
}

void Timeline::Write(const Event& e) {
  auto [it, added] = tids_.emplace(e.tensor, static_cast<int>(tids_.size()) + 1);
  if (added) {
    nlohmann::json meta = {{"name", "thread_name"},
                           {"ph", "M"},
                           {"pid", 0},
                           {"tid", it->second},
                           {"args", {{"name", e.tensor}}}};
    std::fprintf(file_, ",\n%s", meta.dump().c_str());
  }
  if (e.phase == std::string_view("CYCLE_START")) {
    nlohmann::json mark = {{"name", e.phase}, {"ph", "i"},         {"s", "p"},
                           {"pid", 0},        {"tid", it->second}, {"ts", e.start_us}};
    std::fprintf(file_, ",\n%s", mark.dump().c_str());
    return;
  }
  nlohmann::json args = {{"tensor", e.tensor}, {"bytes", e.bytes}};
  if (e.fused) args["fused_tensors"] = e.fused;
  nlohmann::json ev = {{"name", e.phase},        {"ph", "X"},        {"pid", 0},
                       {"tid", it->second},      {"ts", e.start_us}, {"dur", e.duration_us},
                       {"args", std::move(args)}};
  std::fprintf(file_, ",\n%s", ev.dump().c_str());
}

void Timeline::Stop() {
  MutexLock control(control_mu_);
  StopLocked();
}

void Timeline::StopLocked() {
  uint64_t dropped = 0;  // final: Record adds none once closing_ is set
  {
    MutexLock lock(mu_);
    if (closing_) return;
    closing_ = true;
    dropped = dropped_;
  }
  active_.store(false, std::memory_order_release);
  cv_.notify_one();
  if (writer_.joinable()) writer_.join();
  if (dropped) {
    nlohmann::json note = {
        {"name", "dropped_events"}, {"ph", "M"}, {"pid", 0}, {"args", {{"count", dropped}}}};
    std::fprintf(file_, ",\n%s", note.dump().c_str());
  }
  std::fprintf(file_, "\n]\n");
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace khorovod
