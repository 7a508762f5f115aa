// The TensorFlow op definitions of khorovod.tensorflow: names, attributes
// and shape functions. The kernels are in collective_kernels.cc and
// control_kernels.cc; the Python wrappers and gradients in
// python/khorovod/tensorflow/mpi_ops.py.
//
// Every collective names its tensor for the runtime's negotiation:
// `tensor_name` when set (eager calls, ignore_name_scope), else the node's
// name in its graph, which is unique there and the same on every rank that
// builds the same graph (Horovod names graph tensors the same way).
// Attribute names follow Horovod's ops (reduce_op, prescale_factor,
// postscale_factor, process_set_id), so gradient functions read them alike.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace khorovod::tensorflow_ops {
namespace {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// The first dimension becomes unknown (allgather, alltoall, reducescatter).
absl::Status FirstDimUnknown(InferenceContext* c) {
  ShapeHandle in = c->input(0);
  if (!c->RankKnown(in)) {
    c->set_output(0, c->UnknownShape());
    return absl::OkStatus();
  }
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(in, 1, &in));
  TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
  c->set_output(0, out);
  return absl::OkStatus();
}

absl::Status Scalar(InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return absl::OkStatus();
}

}  // namespace

#define KHOROVOD_NUMERIC_TYPES "{int8, uint8, int16, int32, int64, half, bfloat16, float, double}"
// The collectives that only move data also take uint16, moved as int16
// (same bytes; the runtime has no unsigned 16-bit type to reduce).
#define KHOROVOD_ALL_TYPES \
  "{int8, uint8, int16, uint16, int32, int64, half, bfloat16, float, double, bool}"

REGISTER_OP("KhorovodAllreduce")
    .Attr("T: " KHOROVOD_NUMERIC_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("sum: T")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("KhorovodGroupedAllreduce")
    .Attr("T: " KHOROVOD_NUMERIC_TYPES)
    .Attr("num_tensors: int >= 1")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("tensor_name: string = ''")
    .Input("tensors: num_tensors*T")
    .Output("sum: num_tensors*T")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    });

REGISTER_OP("KhorovodAllgather")
    .Attr("T: " KHOROVOD_ALL_TYPES)
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn(FirstDimUnknown);

REGISTER_OP("KhorovodBroadcast")
    .Attr("T: " KHOROVOD_ALL_TYPES)
    .Attr("root_rank: int")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("KhorovodAlltoall")
    .Attr("T: " KHOROVOD_ALL_TYPES)
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(FirstDimUnknown(c));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

REGISTER_OP("KhorovodReducescatter")
    .Attr("T: " KHOROVOD_NUMERIC_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn(FirstDimUnknown);

REGISTER_OP("KhorovodJoin").Output("last_rank: int32").SetIsStateful().SetShapeFn(Scalar);

REGISTER_OP("KhorovodBarrier")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs);

// Topology read when the op runs, not when the graph is built (Horovod's
// size_op and friends). `process_set_id` matters for size and included.
REGISTER_OP("KhorovodTopology")
    .Attr("query: {'size', 'rank', 'local_size', 'local_rank', 'process_set_included'}")
    .Attr("process_set_id: int = 0")
    .Output("value: int32")
    .SetIsStateful()
    .SetShapeFn(Scalar);

// Ends a training step for the worker's metrics (Runtime::end_step) when
// it runs: the Keras DistributedOptimizer puts one after each update, so a
// step is marked inside model.fit's compiled train step.
REGISTER_OP("KhorovodEndStep")
    .Input("samples: int64")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs);

}  // namespace khorovod::tensorflow_ops
