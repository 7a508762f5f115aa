#include "process_sets_binding.h"

#include <pybind11/stl.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace khorovod::python {
namespace {

namespace py = pybind11;

ReduceOp CheckedOp(int op) {
  if (op < 0 || op > static_cast<int>(ReduceOp::kAdasum)) {
    throw py::value_error("khorovod: unknown reduce op " + std::to_string(op));
  }
  return static_cast<ReduceOp>(op);
}

AllreduceOptions Reduce(int op, double prescale, double postscale, int set) {
  return {CheckedOp(op), prescale, postscale, set};
}

}  // namespace

void BindProcessSets(py::class_<Runtime>& runtime) {
  runtime
      .def("add_process_set",
           [](Runtime& rt, const std::vector<int>& ranks) {
             StatusOr<int> id = [&] {
               py::gil_scoped_release release;
               return rt.add_process_set(ranks);
             }();
             const Status s = id.ok() ? Status::Ok() : id.status();
             return std::make_tuple(static_cast<int>(s.code()), s.message(), id.ok() ? *id : -1);
           })
      .def("remove_process_set",
           [](Runtime& rt, int id) {
             Status s;
             {
               py::gil_scoped_release release;
               s = rt.remove_process_set(id);
             }
             return std::make_tuple(static_cast<int>(s.code()), s.message());
           })
      .def("process_set_ids", &Runtime::process_set_ids)
      .def("process_set_ranks", &Runtime::process_set_ranks)
      .def("process_set_rank", &Runtime::process_set_rank)
      .def("process_set_size", &Runtime::process_set_size)
      .def("allreduce_async_in_set",
           [](Runtime& rt, const std::string& name, const TensorView& in, const TensorView& out,
              int op, double prescale, double postscale, int set) {
             return rt.allreduce_async(name, in, out, Reduce(op, prescale, postscale, set));
           })
      .def("grouped_allreduce_async_in_set",
           [](Runtime& rt, const std::vector<std::string>& names, const std::vector<TensorView>& in,
              const std::vector<TensorView>& out, int op, double prescale, double postscale,
              int set) {
             return rt.grouped_allreduce_async(names, in, out,
                                               Reduce(op, prescale, postscale, set));
           })
      .def("allgather_async_in_set",
           [](Runtime& rt, const std::string& name, const TensorView& in, int set) {
             AllgatherOptions o;
             o.process_set = set;
             return rt.allgather_async(name, in, o);
           })
      .def("broadcast_async_in_set",
           [](Runtime& rt, const std::string& name, const TensorView& buf, int root, int set) {
             return rt.broadcast_async(name, buf, {root, set});
           })
      .def("alltoall_async_in_set",
           [](Runtime& rt, const std::string& name, const TensorView& in,
              std::vector<int64_t> splits, int set) {
             return rt.alltoall_async(name, in, {std::move(splits), set});
           })
      .def("reducescatter_async_in_set",
           [](Runtime& rt, const std::string& name, const TensorView& in, int op, double prescale,
              double postscale, int set) {
             return rt.reducescatter_async(name, in, {CheckedOp(op), prescale, postscale, set});
           })
      .def("barrier_in_set", [](Runtime& rt, int set) {
        Status s;
        {
          py::gil_scoped_release release;
          s = rt.barrier(set);
        }
        return std::make_tuple(static_cast<int>(s.code()), s.message());
      });
}

}  // namespace khorovod::python
