#include "worker_metrics_binding.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <tuple>

#include "khorovod/elastic.h"
#include "khorovod/status.h"

namespace khorovod::python {
namespace {

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

}  // namespace

void BindWorkerMetrics(pybind11::class_<Runtime>& runtime) {
  runtime.def("begin_step", &Runtime::begin_step)
      .def("end_step", &Runtime::end_step)
      // The status code that made the elastic loop reset, as elastic::run
      // classifies it: UNAVAILABLE a failed peer, ABORTED a peer re-forming,
      // anything else (MEMBERSHIP_CHANGED) a membership change.
      .def("record_reset",
           [](Runtime& rt, int code) { elastic::RecordReset(rt, static_cast<StatusCode>(code)); })
      .def("record_commit", [](Runtime& rt) { elastic::RecordCommit(rt); })
      .def("record_recovered",
           [](Runtime& rt, double seconds) { elastic::RecordRecovered(rt, Seconds(seconds)); })
      .def("record_state_sync",
           [](Runtime& rt, int64_t bytes, double seconds) {
             elastic::RecordStateSync(rt, static_cast<size_t>(bytes < 0 ? 0 : bytes),
                                      Seconds(seconds));
           })
      // elastic.run's training function returned: shutdown() then tells the
      // rendezvous the training finished, so late joiners are sent away.
      .def("mark_training_finished", [](Runtime& rt) { elastic::MarkTrainingFinished(rt); })
      .def("start_timeline",
           [](Runtime& rt, const std::string& path, bool mark_cycles) {
             const Status s = rt.start_timeline(path, mark_cycles);
             return std::make_tuple(static_cast<int>(s.code()), s.message());
           })
      .def("stop_timeline", [](Runtime& rt) {
        Status s;
        {
          pybind11::gil_scoped_release release;  // waits for the writer to finish the file
          s = rt.stop_timeline();
        }
        return std::make_tuple(static_cast<int>(s.code()), s.message());
      });
}

}  // namespace khorovod::python
