// _khorovod: the Python extension over libkhorovod (the one shared runtime).
//
// Contract: a thin, framework-neutral layer. Tensors cross the boundary as
// TensorView values built from a raw address, a dtype code, a shape and a
// device; the Python side (khorovod.torch) takes them from torch tensors and
// keeps the tensors alive until the returned Handle completes, which is the
// lifetime rule of runtime.h. Nothing here reads torch.
//
// Errors: every call that can fail returns the Status as (code, message),
// never throws; khorovod/_errors.py maps the code to a Python exception so
// that one place decides the Python error model. Programming errors at this
// boundary (a bad dtype code) raise ValueError through pybind11.
//
// Threading and the GIL: every call that may block (init, reset, shutdown,
// wait, barrier, join, the blocking allreduce) releases the GIL, so the
// runtime's background thread and other Python threads keep running.
// Submissions hold it: they only enqueue. A Runtime may be used from any thread, as runtime.h
// allows.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dlpack_export.h"
#include "khorovod/backend_info.h"
#include "khorovod/runtime.h"
#include "process_sets_binding.h"
#include "worker_metrics_binding.h"

namespace py = pybind11;
using khorovod::DataType;
using khorovod::Handle;
using khorovod::Runtime;
using khorovod::Status;
using khorovod::TensorView;

namespace {

using StatusTuple = std::tuple<int, std::string>;

StatusTuple ToTuple(const Status& s) { return {static_cast<int>(s.code()), s.message()}; }

TensorView MakeView(uintptr_t address, int dtype, std::vector<int64_t> shape, int device_kind,
                    int device_index) {
  if (dtype < 0 || !khorovod::IsValidDataType(static_cast<uint8_t>(dtype))) {
    throw py::value_error("khorovod: unknown dtype code " + std::to_string(dtype));
  }
  if (device_kind != 0 && device_kind != 1) {
    throw py::value_error("khorovod: unknown device kind " + std::to_string(device_kind));
  }
  TensorView v;
  v.data = reinterpret_cast<void*>(address);
  v.dtype = static_cast<DataType>(dtype);
  v.shape = std::move(shape);
  v.device = {static_cast<khorovod::DeviceKind>(device_kind), device_index};
  return v;
}

khorovod::AllreduceOptions ReduceOptions(int op, double prescale, double postscale,
                                         int process_set = 0) {
  if (op < 0 || op > static_cast<int>(khorovod::ReduceOp::kAdasum)) {
    throw py::value_error("khorovod: unknown reduce op " + std::to_string(op));
  }
  return {static_cast<khorovod::ReduceOp>(op), prescale, postscale, process_set};
}

// take_output() of a host result as (bytes, dtype code, shape); copies
// once into Python.
py::tuple TakeOutput(const Handle& h) {
  khorovod::Tensor t = h.take_output();
  if (!t.on_host())
    throw py::value_error("khorovod: take_output on a device result; use take_output_dlpack");
  py::bytes data(reinterpret_cast<const char*>(t.storage.data()), t.storage.size());
  return py::make_tuple(data, static_cast<int>(t.dtype), t.shape);
}

// take_output() as (DLPack capsule or None when empty, dtype code, shape,
// device kind, device index): no copy, and device results stay on their
// device.
py::tuple TakeOutputDLPack(const Handle& h) {
  khorovod::Tensor t = h.take_output();
  const int dtype = static_cast<int>(t.dtype);
  const auto shape = t.shape;
  const int kind = static_cast<int>(t.device.kind), index = t.device.index;
  py::object capsule = py::none();
  if (t.num_elements() > 0) capsule = khorovod::python::ToDLPack(std::move(t));
  return py::make_tuple(capsule, dtype, shape, kind, index);
}

// The module's parts, each a table of bindings.
void BindValues(py::module_& m) {
  // What a backend reports about the library it runs on (khorovod/backend_info.h),
  // read from the process environment's configuration: (status code,
  // message, facts).
  m.def("describe_backend", [](const std::string& name) {
    std::map<std::string, std::string> facts;
    auto config = khorovod::Config::FromEnvironment();
    if (!config.ok())
      return std::make_tuple(static_cast<int>(config.status().code()), config.status().message(),
                             facts);
    auto info = khorovod::DescribeBackend(name, *config);
    if (!info.ok())
      return std::make_tuple(static_cast<int>(info.status().code()), info.status().message(),
                             facts);
    return std::make_tuple(0, std::string(), *info);
  });

  py::class_<TensorView>(m, "TensorView")
      .def(py::init(&MakeView), py::arg("address"), py::arg("dtype"), py::arg("shape"),
           py::arg("device_kind") = 0, py::arg("device_index") = 0);

  py::dict codes;
  for (int c = 0; c <= static_cast<int>(khorovod::StatusCode::kJobFinished); ++c) {
    codes[py::str(khorovod::StatusCodeName(static_cast<khorovod::StatusCode>(c)))] = c;
  }
  m.attr("STATUS_CODES") = codes;

  py::class_<Handle>(m, "Handle")
      .def("ready", &Handle::ready)
      .def("wait",
           [](const Handle& h) {
             Status s;
             {
               py::gil_scoped_release release;
               s = h.wait();
             }
             return ToTuple(s);
           })
      .def("take_output", &TakeOutput)
      .def("take_output_dlpack", &TakeOutputDLPack)
      .def("received_splits", &Handle::received_splits)
      .def("join_last_rank", &Handle::join_last_rank);
}

// Runtime's lifecycle and topology.
void BindLifecycle(py::class_<Runtime>& runtime) {
  runtime.def(py::init<>())
      .def("init",
           [](Runtime& rt) {
             py::gil_scoped_release release;
             return ToTuple(rt.init());
           })
      .def("shutdown",
           [](Runtime& rt) {
             py::gil_scoped_release release;
             return ToTuple(rt.shutdown());
           })
      .def("reset",
           [](Runtime& rt) {
             py::gil_scoped_release release;
             return ToTuple(rt.reset());
           })
      // The object's address, for khorovod.tensorflow's op library, whose
      // kernels reach this Runtime through its RuntimeSlot (attached while
      // the Python context holds this object, detached before shutdown).
      .def("address", [](Runtime& rt) { return reinterpret_cast<uintptr_t>(&rt); })
      .def("is_initialized", &Runtime::is_initialized)
      .def("membership_changed", &Runtime::membership_changed)
      .def("at_commit_boundary", &Runtime::at_commit_boundary,
           py::call_guard<py::gil_scoped_release>())
      .def("rank", &Runtime::rank)
      .def("size", &Runtime::size)
      .def("local_rank", &Runtime::local_rank)
      .def("local_size", &Runtime::local_size)
      .def("cross_rank", &Runtime::cross_rank)
      .def("cross_size", &Runtime::cross_size);
}

// The collectives: submissions hold the GIL (they only enqueue); blocking
// calls release it.
void BindCollectives(py::class_<Runtime>& runtime) {
  runtime
      .def("allreduce_async",
           [](Runtime& rt, const std::string& name, const TensorView& in, const TensorView& out,
              int op, double prescale, double postscale) {
             return rt.allreduce_async(name, in, out, ReduceOptions(op, prescale, postscale));
           })
      // allreduce_ from Python: one call, submit and wait, with the GIL
      // released throughout (no Handle, no second round trip into C++).
      .def("allreduce",
           [](Runtime& rt, const std::string& name, const TensorView& in, const TensorView& out,
              int op, double prescale, double postscale, int process_set) {
             const auto options = ReduceOptions(op, prescale, postscale, process_set);
             Status s;
             {
               py::gil_scoped_release release;
               s = rt.allreduce(name, in, out, options);
             }
             return ToTuple(s);
           })
      .def("grouped_allreduce_async",
           [](Runtime& rt, const std::vector<std::string>& names, const std::vector<TensorView>& in,
              const std::vector<TensorView>& out, int op, double prescale, double postscale) {
             return rt.grouped_allreduce_async(names, in, out,
                                               ReduceOptions(op, prescale, postscale));
           })
      .def("allgather_async", [](Runtime& rt, const std::string& name,
                                 const TensorView& in) { return rt.allgather_async(name, in); })
      .def("broadcast_async", [](Runtime& rt, const std::string& name, const TensorView& buf,
                                 int root) { return rt.broadcast_async(name, buf, {root}); })
      .def("alltoall_async",
           [](Runtime& rt, const std::string& name, const TensorView& in,
              std::vector<int64_t> splits) {
             return rt.alltoall_async(name, in, {std::move(splits)});
           })
      .def("reducescatter_async",
           [](Runtime& rt, const std::string& name, const TensorView& in, int op, double prescale,
              double postscale) {
             const auto o = ReduceOptions(op, prescale, postscale);
             return rt.reducescatter_async(name, in, {o.op, o.prescale_factor, o.postscale_factor});
           })
      .def("barrier",
           [](Runtime& rt) {
             py::gil_scoped_release release;
             return ToTuple(rt.barrier());
           })
      .def("join", [](Runtime& rt) {
        int last = -1;
        Status s;
        {
          py::gil_scoped_release release;
          s = rt.join(&last);
        }
        return std::make_tuple(static_cast<int>(s.code()), s.message(), last);
      });
}

}  // namespace

PYBIND11_MODULE(_khorovod, m) {
  m.doc() = "khorovod runtime bindings (internal; use khorovod and khorovod.torch)";
  BindValues(m);
  py::class_<Runtime> runtime(m, "Runtime");
  BindLifecycle(runtime);
  BindCollectives(runtime);
  khorovod::python::BindWorkerMetrics(runtime);
  khorovod::python::BindProcessSets(runtime);
}
