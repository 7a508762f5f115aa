// The worker side of observability on a real single-rank Runtime: step
// accounting, collective counters, the metrics endpoint (and its port
// conflict error), the exposed-communication clock of Completion, and the
// Chrome-trace timeline file.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/completion.h"
#include "core/runtime_internals.h"
#include "khorovod/runtime.h"
#include "observability/worker_metrics.h"

namespace khorovod {
namespace {

// Value of one sample line `series value` in an exposition; NaN when absent.
double Sample(const std::string& text, const std::string& series) {
  const std::string key = series + " ";
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + key.size()));
    at += key.size();
  }
  return std::nan("");
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/khorovod-obs-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TensorView View(std::vector<float>& v) {
  return TensorView{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, {}};
}

TEST(WorkerObservability, StepsCollectivesAndTimeline) {
  TempDir dir;
  Config config;
  config.timeline_path = dir.path() + "/timeline.json";
  config.baseline_samples_per_second = 1e9;  // makes the throughput efficiency exist
  Runtime rt;
  ASSERT_TRUE(rt.init(config).ok());

  std::vector<float> a(100, 1.f), b(200, 2.f), c(300, 3.f), w(50, 4.f);
  constexpr int kSteps = 3;
  for (int step = 0; step < kSteps; ++step) {
    rt.begin_step();
    ASSERT_TRUE(rt.grouped_allreduce({"a", "b", "c"}, {View(a), View(b), View(c)},
                                     {View(a), View(b), View(c)})
                    .ok());
    ASSERT_TRUE(rt.broadcast("w", View(w)).ok());
    rt.end_step(16);
  }

  const std::string text = RuntimeInternals::Metrics(rt).Render();
  EXPECT_EQ(Sample(text, "khorovod_worker_steps_total"), kSteps) << text;
  EXPECT_EQ(Sample(text, "khorovod_worker_samples_total"), 16 * kSteps);
  EXPECT_EQ(Sample(text, "khorovod_worker_world_size"), 1);
  EXPECT_EQ(Sample(text, "khorovod_worker_rank"), 0);
  EXPECT_EQ(Sample(text, "khorovod_worker_collective_tensors_total{op=\"allreduce\"}"), 3 * kSteps);
  EXPECT_EQ(Sample(text, "khorovod_worker_collective_calls_total{op=\"allreduce\"}"), kSteps)
      << "one fused call per step";
  EXPECT_EQ(Sample(text, "khorovod_worker_collective_bytes_total{op=\"allreduce\"}"),
            600 * 4 * kSteps);
  EXPECT_EQ(Sample(text, "khorovod_worker_collective_bytes_total{op=\"broadcast\"}"),
            50 * 4 * kSteps);
  EXPECT_EQ(Sample(text, "khorovod_worker_fusion_fill_ratio_count"), kSteps);
  EXPECT_GE(Sample(text, "khorovod_worker_negotiation_rounds_total"), 1);
  const double step = Sample(text, "khorovod_worker_step_seconds_total");
  const double compute = Sample(text, "khorovod_worker_compute_seconds_total");
  const double comm = Sample(text, "khorovod_worker_exposed_communication_seconds_total");
  EXPECT_GT(step, 0);
  EXPECT_NEAR(compute + comm, step, 1e-9 + step * 1e-9);
  const double efficiency = Sample(text, "khorovod_worker_step_efficiency");
  EXPECT_GE(efficiency, 0);
  EXPECT_LE(efficiency, 1);
  EXPECT_GT(Sample(text, "khorovod_worker_throughput_efficiency"), 0);
  // Scaling efficiency needs no baseline: a job that only ever had one
  // worker is at its smallest world size, so 1, and its per-size counters
  // carry every marked step.
  EXPECT_EQ(Sample(text, "khorovod_worker_scaling_efficiency"), 1) << text;
  EXPECT_EQ(Sample(text, "khorovod_worker_samples_at_world_size_total{world_size=\"1\"}"),
            16 * kSteps);
  EXPECT_NEAR(Sample(text, "khorovod_worker_step_seconds_at_world_size_total{world_size=\"1\"}"),
              step, 1e-9 + step * 1e-9);
  EXPECT_EQ(Sample(text, "khorovod_worker_world_size_observed{world_size=\"1\"}"), 1);

  ASSERT_TRUE(rt.shutdown().ok());

  // The timeline: valid JSON, a named row per tensor, every phase of a
  // fused allreduce in order, and the broadcast.
  std::ifstream in(config.timeline_path);
  ASSERT_TRUE(in) << config.timeline_path;
  nlohmann::json trace = nlohmann::json::parse(in);
  ASSERT_TRUE(trace.is_array());
  std::map<int, std::string> rows;
  std::map<std::string, std::vector<nlohmann::json>> events;  // tensor -> X events in file order
  for (const auto& e : trace) {
    ASSERT_TRUE(e.contains("ph") && e.contains("name")) << e.dump();
    if (e["ph"] == "M" && e["name"] == "thread_name") rows[e["tid"]] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("tid")) << e.dump();
    EXPECT_GE(e["dur"].get<int64_t>(), 0);
    ASSERT_TRUE(rows.count(e["tid"])) << "event before its row's name: " << e.dump();
    EXPECT_EQ(rows[e["tid"]], e["args"]["tensor"]);
    events[e["args"]["tensor"]].push_back(e);
  }
  for (const char* name : {"a", "b", "c"}) {
    const auto& ev = events[name];
    ASSERT_EQ(ev.size(), 4u * kSteps) << name;
    const char* phases[] = {"NEGOTIATE_ALLREDUCE", "MEMCPY_IN_FUSION_BUFFER", "ALLREDUCE",
                            "MEMCPY_OUT_FUSION_BUFFER"};
    for (size_t i = 0; i < ev.size(); ++i) {
      EXPECT_EQ(ev[i]["name"], phases[i % 4]) << name << " event " << i;
      if (i % 4) {
        EXPECT_GE(ev[i]["ts"].get<int64_t>(), ev[i - 1]["ts"].get<int64_t>())
            << name << " event " << i;
        EXPECT_EQ(ev[i]["args"]["fused_tensors"], 3);
      }
    }
  }
  ASSERT_EQ(events["w"].size(), 2u * kSteps);
  EXPECT_EQ(events["w"][0]["name"], "NEGOTIATE_BROADCAST");
  EXPECT_EQ(events["w"][1]["name"], "BROADCAST");
  EXPECT_EQ(events["w"][1]["args"]["bytes"], 200);
}

// The names of the tensors with events in a timeline file, which must be a
// complete JSON array; *cycles counts the CYCLE_START marks.
std::set<std::string> TimelineTensors(const std::string& path, int* cycles = nullptr) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  nlohmann::json trace = nlohmann::json::parse(in);  // throws (fails the test) when incomplete
  EXPECT_TRUE(trace.is_array());
  std::set<std::string> tensors;
  if (cycles) *cycles = 0;
  for (const auto& e : trace) {
    if (e["ph"] == "X") tensors.insert(e["args"]["tensor"].get<std::string>());
    if (e["ph"] == "i" && e["name"] == "CYCLE_START" && cycles) ++*cycles;
  }
  return tensors;
}

TEST(WorkerObservability, TimelineStartedAndStoppedAtRunTime) {
  TempDir dir;
  Runtime rt;
  EXPECT_EQ(rt.start_timeline(dir.path() + "/early.json").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(rt.init(Config{}).ok());
  std::vector<float> v(10, 1.f);
  ASSERT_TRUE(rt.allreduce("before", View(v), View(v)).ok());
  const std::string first = dir.path() + "/first.json", second = dir.path() + "/second.json";
  ASSERT_TRUE(rt.start_timeline(first).ok());
  ASSERT_TRUE(rt.allreduce("during", View(v), View(v)).ok());
  ASSERT_TRUE(rt.broadcast("during.bcast", View(v)).ok());
  ASSERT_TRUE(rt.stop_timeline().ok());
  ASSERT_TRUE(rt.stop_timeline().ok());  // idempotent
  ASSERT_TRUE(rt.allreduce("between", View(v), View(v)).ok());
  // Complete on disk as soon as stop_timeline returns, while still running.
  EXPECT_EQ(TimelineTensors(first), (std::set<std::string>{"during", "during.bcast"}));

  ASSERT_TRUE(rt.start_timeline(second, /*mark_cycles=*/true).ok());
  ASSERT_TRUE(rt.allreduce("again", View(v), View(v)).ok());
  // A new start completes the running file and begins the new one.
  const std::string third = dir.path() + "/third.json";
  ASSERT_TRUE(rt.start_timeline(third).ok());
  ASSERT_TRUE(rt.allreduce("last", View(v), View(v)).ok());
  ASSERT_TRUE(rt.shutdown().ok());  // stops it too
  int cycles = 0;
  EXPECT_EQ(TimelineTensors(second, &cycles), std::set<std::string>{"again"});
  EXPECT_GE(cycles, 1);
  EXPECT_EQ(TimelineTensors(third), std::set<std::string>{"last"});
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/early.json"));

  Runtime other;
  ASSERT_TRUE(other.init(Config{}).ok());
  Status bad = other.start_timeline("/nonexistent-dir/khorovod/t.json");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad;
  ASSERT_TRUE(other.shutdown().ok());
}

TEST(WorkerObservability, TimelineInAnUnwritablePlaceFailsInit) {
  Config config;
  config.timeline_path = "/nonexistent-dir/khorovod/timeline.json";
  Runtime rt;
  Status s = rt.init(config);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("KHOROVOD_TIMELINE"), std::string::npos) << s;
}

// A port that was free a moment ago (loopback; the race is harmless here).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(WorkerObservability, MetricsPortServesAndAConflictFailsInit) {
  Config config;
  config.metrics_host = "127.0.0.1";
  config.metrics_port = FreePort();
  Runtime rt;
  ASSERT_TRUE(rt.init(config).ok());
  rt.end_step(8);
  httplib::Client client("127.0.0.1", config.metrics_port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(Sample(res->body, "khorovod_worker_samples_total"), 8) << res->body;

  Runtime second;
  Status s = second.init(config);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(std::to_string(config.metrics_port)), std::string::npos) << s;
  EXPECT_TRUE(rt.shutdown().ok());
}

TEST(WorkerObservability, OnlyBlockingWaitsFeedTheCommunicationClock) {
  auto sink = std::make_shared<std::atomic<int64_t>>(0);
  Completion done;
  done.SetWaitSink(sink);
  done.Finish(Status::Ok());
  EXPECT_TRUE(done.Wait().ok());
  EXPECT_EQ(sink->load(), 0) << "a finished op costs no exposed communication";

  Completion pending;
  pending.SetWaitSink(sink);
  EXPECT_EQ(pending.WaitFor(std::chrono::milliseconds(20)).code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(sink->load(), 20'000'000) << "the blocked 20 ms are counted";
}

TEST(WorkerObservability, StepMarksSplitComputeAndCommunication) {
  WorkerMetrics m;
  m.StepBegin();
  m.blocked_ns()->fetch_add(1'000);  // as if a wait inside the step blocked 1 us
  m.StepEnd(4);
  const std::string text = m.Render();
  const double step = Sample(text, "khorovod_worker_step_seconds_total");
  const double comm = Sample(text, "khorovod_worker_exposed_communication_seconds_total");
  EXPECT_GT(step, 0);
  EXPECT_NEAR(comm, std::min(step, 1e-6), 1e-12);
  // A step with no mark in between starts where the last one ended.
  m.StepEnd(4);
  EXPECT_EQ(Sample(m.Render(), "khorovod_worker_steps_total"), 2);
  EXPECT_EQ(Sample(m.Render(), "khorovod_worker_exposed_communication_seconds_total"), comm);
}

}  // namespace
}  // namespace khorovod
