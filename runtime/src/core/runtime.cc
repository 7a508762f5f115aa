// Runtime's lifecycle calls, each forwarded to RuntimeImpl
// (core/runtime_impl.h). The collectives are core/runtime_ops.cc, the
// process sets core/runtime_process_sets.cc.
#include "khorovod/runtime.h"

#include "core/runtime_impl.h"
#include "core/runtime_internals.h"

namespace khorovod {

// --- Runtime: lifecycle -------------------------------------------------------

Runtime::Runtime() : impl_(std::make_unique<RuntimeImpl>()) {}
Runtime::~Runtime() = default;

Status Runtime::init(const Config& config) { return impl_->Init(config); }

Status Runtime::init() {
  auto config = Config::FromEnvironment();
  if (!config.ok()) return config.status();
  return impl_->Init(*config);
}

Status Runtime::shutdown() { return impl_->Finish(); }
void Runtime::begin_step() { impl_->metrics().StepBegin(); }
void Runtime::end_step(int64_t samples) { impl_->metrics().StepEnd(samples); }
WorkerMetrics& RuntimeInternals::Metrics(Runtime& runtime) { return runtime.impl_->metrics(); }
void RuntimeInternals::MarkTrainingFinished(Runtime& runtime) {
  runtime.impl_->MarkTrainingFinished();
}
Status Runtime::reset() { return impl_->Reset(); }
bool Runtime::membership_changed() const { return impl_->MembershipChanged(); }
void Runtime::at_commit_boundary() { impl_->AtCommitBoundary(); }
bool Runtime::is_initialized() const { return impl_->initialized(); }
Status Runtime::start_timeline(const std::string& path, bool mark_cycles) {
  return impl_->StartTimeline(path, mark_cycles);
}
Status Runtime::stop_timeline() { return impl_->StopTimeline(); }
Topology Runtime::topology() const { return impl_->topology(); }
int Runtime::rank() const { return topology().rank; }
int Runtime::size() const { return topology().size; }
int Runtime::local_rank() const { return topology().local_rank; }
int Runtime::local_size() const { return topology().local_size; }
int Runtime::cross_rank() const { return topology().cross_rank; }
int Runtime::cross_size() const { return topology().cross_size; }

}  // namespace khorovod
