// RuntimeInternals: the two things the elastic layer needs from inside a
// Runtime that are not part of the public API: its worker metrics (elastic
// resets, recoveries, state syncs and commits are recorded there) and the
// mark that training finished (shutdown() then tells the rendezvous, so late
// joiners are sent away: docs/elastic.md, "Late joiners at job end").
//
// Runtime names this class its friend, so the public header exposes neither
// RuntimeImpl nor the metrics type.
//
// Thread-safety: as the Runtime's own methods; WorkerMetrics is thread-safe.
#pragma once

#include "khorovod/runtime.h"

namespace khorovod {

class WorkerMetrics;

class RuntimeInternals {
 public:
  static WorkerMetrics& Metrics(Runtime& runtime);
  static void MarkTrainingFinished(Runtime& runtime);
};

}  // namespace khorovod
