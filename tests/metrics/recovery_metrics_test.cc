// RecoveryMetrics (runtime/src/observability/recovery_metrics.h): the phases
// of a recovery, the steps a failure rolls back, useful step time, goodput.
#include "observability/recovery_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <sstream>
#include <string>

#include "khorovod/metrics/exposition.h"

namespace khorovod {
namespace {

// The value of the sample line that starts with `series ` in `text`, or -1.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

TEST(RecoveryMetrics, AFailureRollsBackTheUncommittedStepsAndIsTimedByPhase) {
  prometheus::Registry registry;
  RecoveryMetrics m(registry);
  for (int i = 0; i < 3; ++i) m.StepEnded(0.1);
  m.Committed();
  m.StepEnded(0.1);
  m.StepEnded(0.1);
  m.ResetStarted(/*rolled_back=*/true);
  m.ResetStarted(true);  // a reset that failed and was retried: one recovery
  m.StateSynced(std::chrono::milliseconds(50));
  m.Recovered();
  m.StepEnded(0.25);
  m.StepEnded(0.1);  // only the first step after a recovery is its phase
  m.Committed();
  const std::string text = metrics::Render({&registry});
  EXPECT_DOUBLE_EQ(Sample(text, "khorovod_worker_steps_rolled_back_total"), 2);
  EXPECT_NEAR(Sample(text, "khorovod_worker_rolled_back_step_seconds_total"), 0.2, 1e-9);
  EXPECT_NEAR(Sample(text, "khorovod_worker_useful_step_seconds_total"), 0.65, 1e-9);
  const std::string phase = "khorovod_worker_recovery_phase_seconds";
  for (const char* p : {"detection", "rendezvous", "state_sync", "first_step"})
    EXPECT_DOUBLE_EQ(Sample(text, phase + "_count{phase=\"" + std::string(p) + "\"}"), 1) << p;
  EXPECT_NEAR(Sample(text, phase + "_sum{phase=\"state_sync\"}"), 0.05, 1e-9);
  EXPECT_NEAR(Sample(text, phase + "_sum{phase=\"first_step\"}"), 0.25, 1e-9);
  const double goodput = Sample(text, "khorovod_worker_goodput_ratio");
  EXPECT_GT(goodput, 0);
  EXPECT_LE(goodput, 1);
}

TEST(RecoveryMetrics, AMembershipChangeRollsNothingBackAndHasNoDetectionPhase) {
  prometheus::Registry registry;
  RecoveryMetrics m(registry);
  m.StateSynced(std::chrono::milliseconds(10));  // the job's first sync: no recovery
  m.StepEnded(0.1);
  m.Committed();
  m.ResetStarted(/*rolled_back=*/false);  // a worker joined or left at this commit
  m.StateSynced(std::chrono::milliseconds(20));
  m.Recovered();
  m.StepEnded(0.1);
  const std::string text = metrics::Render({&registry});
  const std::string phase = "khorovod_worker_recovery_phase_seconds";
  EXPECT_DOUBLE_EQ(Sample(text, "khorovod_worker_steps_rolled_back_total"), 0);
  EXPECT_DOUBLE_EQ(Sample(text, phase + "_count{phase=\"detection\"}"), 0);
  EXPECT_DOUBLE_EQ(Sample(text, phase + "_count{phase=\"state_sync\"}"), 1);
  EXPECT_NEAR(Sample(text, phase + "_sum{phase=\"state_sync\"}"), 0.02, 1e-9);
  EXPECT_DOUBLE_EQ(Sample(text, phase + "_count{phase=\"first_step\"}"), 1);
}

}  // namespace
}  // namespace khorovod
