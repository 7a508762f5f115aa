// The worker-metrics marks the Python layer records for PyTorch jobs:
// training steps (DistributedOptimizer.step) and the elastic loop's resets,
// recoveries and state syncs (khorovod/elastic.py), the same series the
// C++ elastic::run and step marks feed (docs/observability.md).
//
// Thread-safety: as Runtime (the metrics are atomics).
#pragma once

#include <pybind11/pybind11.h>

#include "khorovod/runtime.h"

namespace khorovod::python {

// Adds begin_step, end_step, record_reset, record_commit, record_recovered,
// record_state_sync and mark_training_finished (khorovod/elastic.h), and
// start_timeline and stop_timeline, to the Runtime class.
void BindWorkerMetrics(pybind11::class_<Runtime>& runtime);

}  // namespace khorovod::python
