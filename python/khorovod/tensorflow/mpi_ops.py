"""khorovod.tensorflow's ops: TensorFlow custom ops over the khorovod runtime
(as horovod.tensorflow.mpi_ops), and their gradients.

Contract:
- The ops live in _khorovod_tf_ops.so, compiled against one TensorFlow
  version (khorovod._build_info.TENSORFLOW_VERSION); importing this module
  under another major.minor raises ImportError saying so, since custom ops
  are tied to TensorFlow's C++ ABI. Their kernels reach the process's
  runtime through the op library's slot, attached by the Python context
  after every init() and detached before shutdown().
- Each op is a CPU AsyncOpKernel handing TensorFlow's own buffers to the
  runtime: the data path never goes through numpy or Python. They run
  eagerly and inside tf.function graphs.
- Names: an explicit ``name`` is the tensor's name for the runtime (in a
  graph under the current name scope unless ``ignore_name_scope``).
  Unnamed eager calls use one fixed name per collective and process set:
  eager ops complete before the next starts, so names never overlap in
  flight, and TensorFlow's eager kernel cache (keyed by attributes) does
  not grow per call. Unnamed graph ops are named after their input tensor,
  which is the same on every rank that builds the same graph (Horovod's
  rule).
- Failures raise tf.errors: FailedPreconditionError for ranks that
  disagree (MISMATCH) or before init, InvalidArgumentError for refused
  arguments, UnknownError (message "khorovod UNAVAILABLE:" or
  "khorovod ABORTED:") when a peer failed or the job is re-forming.
- Gradients: allreduce, grouped allreduce, allgather, broadcast, alltoall
  and reducescatter are differentiable, with Horovod's gradient rules.

Thread-safety: the ops may run concurrently from any thread.
"""

import ctypes
import os

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from .. import _build_info
from .._context import CONTEXT
from ..process_sets import global_process_set, resolve, set_rank, set_size
from .util import _executing_eagerly, _normalize_name

# Reduce ops, with the runtime's wire values (ops.h).
Sum = 0
Average = 1
Min = 2
Max = 3
Product = 4
Adasum = 5


def _check_version():
    built = _build_info.TENSORFLOW_VERSION
    if not built:
        raise ImportError(
            "khorovod.tensorflow: this khorovod was built without TensorFlow's ops "
            "(TensorFlow was not importable when it was built); install TensorFlow "
            "first, then reinstall khorovod (pip install --force-reinstall --no-deps .)"
        )
    if built.split(".")[:2] != tf.__version__.split(".")[:2]:
        raise ImportError(
            f"khorovod.tensorflow: its ops were built against TensorFlow {built}, "
            f"but TensorFlow {tf.__version__} is installed; reinstall khorovod "
            "so that it builds against this TensorFlow"
        )


_check_version()
_LIB_PATH = os.path.join(os.path.dirname(__file__), "_khorovod_tf_ops.so")
MPI_LIB = tf.load_op_library(_LIB_PATH)
_SLOT = ctypes.CDLL(_LIB_PATH)
_SLOT.khorovod_tf_attach_runtime.argtypes = [ctypes.c_void_p]
_SLOT.khorovod_tf_attach_runtime.restype = None
_SLOT.khorovod_tf_detach_runtime.argtypes = []
_SLOT.khorovod_tf_detach_runtime.restype = None


def _attach(runtime):
    if runtime is None:
        _SLOT.khorovod_tf_detach_runtime()
    else:
        _SLOT.khorovod_tf_attach_runtime(runtime.address())


CONTEXT.add_runtime_listener(_attach)


def _set_id(process_set):
    """The runtime's id for a ProcessSet; a raw id (gradient functions read
    it from their op) passes through."""
    if isinstance(process_set, int):
        return process_set
    return resolve(process_set)


def _names(kind, name, tensor, process_set_id, ignore_name_scope):
    """(node name, tensor_name attr) for one op; see the module docstring."""
    if _executing_eagerly():
        suffix = f".set{process_set_id}" if process_set_id else ""
        return None, name if name is not None else f"{kind}.eager{suffix}"
    if name is None:
        name = f"Khorovod{kind}_{_normalize_name(tensor.name)}"
        return name, ""
    return _normalize_name(name), (name if ignore_name_scope else "")


def _allreduce(
    tensor,
    name=None,
    op=Sum,
    prescale_factor=1.0,
    postscale_factor=1.0,
    ignore_name_scope=False,
    process_set=global_process_set,
):
    """The allreduce op itself (allreduce() adds compression and sparse
    handling on top)."""
    set_id = _set_id(process_set)
    node, tensor_name = _names("Allreduce", name, tensor, set_id, ignore_name_scope)
    return MPI_LIB.khorovod_allreduce(
        tensor,
        reduce_op=op,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        ignore_name_scope=ignore_name_scope,
        process_set_id=set_id,
        tensor_name=tensor_name,
        name=node,
    )


def _grouped_allreduce(
    tensors,
    name=None,
    op=Sum,
    prescale_factor=1.0,
    postscale_factor=1.0,
    ignore_name_scope=False,
    process_set=global_process_set,
):
    """One fused allreduce of several tensors of one dtype."""
    set_id = _set_id(process_set)
    node, tensor_name = _names("GroupedAllreduce", name, tensors[0], set_id, ignore_name_scope)
    if node is not None and name is None:
        node = _normalize_name(f"KhorovodGroupedAllreduce_{tensors[0].name}_{tensors[-1].name}")
    return MPI_LIB.khorovod_grouped_allreduce(
        list(tensors),
        reduce_op=op,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        ignore_name_scope=ignore_name_scope,
        process_set_id=set_id,
        tensor_name=tensor_name,
        name=node,
    )


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension (which may
    differ between ranks)."""
    set_id = _set_id(process_set)
    node, tensor_name = _names("Allgather", name, tensor, set_id, ignore_name_scope)
    return MPI_LIB.khorovod_allgather(
        tensor,
        ignore_name_scope=ignore_name_scope,
        process_set_id=set_id,
        tensor_name=tensor_name,
        name=node,
    )


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=global_process_set):
    """allgather of each tensor (one op each; the runtime negotiates them
    together when they are in flight at once, as in a tf.function)."""
    if not tensors:
        return []
    base = (
        name
        if name is not None
        else (
            None
            if _executing_eagerly()
            else f"KhorovodGroupedAllgather_{_normalize_name(tensors[0].name)}"
        )
    )
    return [
        allgather(
            t,
            name=None if base is None else f"{base}_{i}",
            ignore_name_scope=ignore_name_scope,
            process_set=process_set,
        )
        for i, t in enumerate(tensors)
    ]


def broadcast(
    tensor, root_rank, name=None, ignore_name_scope=False, process_set=global_process_set
):
    """``tensor`` from ``root_rank`` (a global rank) on every member."""
    set_id = _set_id(process_set)
    node, tensor_name = _names("Broadcast", name, tensor, set_id, ignore_name_scope)
    return MPI_LIB.khorovod_broadcast(
        tensor,
        root_rank=root_rank,
        ignore_name_scope=ignore_name_scope,
        process_set_id=set_id,
        tensor_name=tensor_name,
        name=node,
    )


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Assigns root_rank's values to ``variables`` in place; returns their new
    values, read after the assignment (in a graph, ops that run it).
    (Horovod has an in-place kernel; here a broadcast, then an assign.)"""
    results = []
    for i, var in enumerate(variables):
        var_name = None if name is None else f"{name}.{i}"
        if var_name is None and _executing_eagerly():
            var_name = f"broadcast_.{_normalize_name(var.name)}"
        value = broadcast(
            tf.convert_to_tensor(var), root_rank, name=var_name, process_set=process_set
        )
        assigned = var.assign(value)
        if _executing_eagerly():
            results.append(var.read_value())
        else:
            with tf.control_dependencies([assigned]):
                results.append(tf.identity(var.read_value()))
    return results


def alltoall(
    tensor, splits=None, name=None, ignore_name_scope=False, process_set=global_process_set
):
    """Sends rows of ``tensor`` to each rank (``splits[r]`` rows to rank r,
    an equal split when None) and returns what every rank sent here, plus
    the received splits when ``splits`` was given."""
    set_id = _set_id(process_set)
    splits_ = (
        tf.convert_to_tensor(splits, dtype=tf.int32)
        if splits is not None
        else tf.constant([], dtype=tf.int32)
    )
    node, tensor_name = _names("Alltoall", name, tensor, set_id, ignore_name_scope)
    output, received = MPI_LIB.khorovod_alltoall(
        tensor,
        splits_,
        ignore_name_scope=ignore_name_scope,
        process_set_id=set_id,
        tensor_name=tensor_name,
        name=node,
    )
    return (output, received) if splits is not None else output


def _reducescatter(
    tensor,
    name=None,
    op=Sum,
    ignore_name_scope=False,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    set_id = _set_id(process_set)
    node, tensor_name = _names("Reducescatter", name, tensor, set_id, ignore_name_scope)
    return MPI_LIB.khorovod_reducescatter(
        tensor,
        reduce_op=op,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        ignore_name_scope=ignore_name_scope,
        process_set_id=set_id,
        tensor_name=tensor_name,
        name=node,
    )


def _grouped_reducescatter(
    tensors,
    name=None,
    op=Sum,
    ignore_name_scope=False,
    process_set=global_process_set,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    base = (
        name
        if name is not None
        else (
            None
            if _executing_eagerly()
            else f"KhorovodGroupedReducescatter_{_normalize_name(tensors[0].name)}"
        )
    )
    return [
        _reducescatter(
            t,
            name=None if base is None else f"{base}_{i}",
            op=op,
            ignore_name_scope=ignore_name_scope,
            process_set=process_set,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
        )
        for i, t in enumerate(tensors)
    ]


def join():
    """This rank has no more data: until every rank joined, the others'
    allreduces proceed with zeros from it. Returns the last rank to join."""
    return MPI_LIB.khorovod_join()


def barrier(process_set=global_process_set):
    """Blocks until every member of the set reached the barrier."""
    return MPI_LIB.khorovod_barrier(process_set_id=_set_id(process_set))


def size_op(process_set_id=0, name=None):
    """The set's size, read when the op runs (not when the graph is built)."""
    return MPI_LIB.khorovod_topology(query="size", process_set_id=process_set_id, name=name)


def rank_op(name=None):
    return MPI_LIB.khorovod_topology(query="rank", name=name)


def local_size_op(name=None):
    return MPI_LIB.khorovod_topology(query="local_size", name=name)


def local_rank_op(name=None):
    return MPI_LIB.khorovod_topology(query="local_rank", name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank is in the set, 0 when not; an error for an unknown set."""
    return MPI_LIB.khorovod_topology(
        query="process_set_included", process_set_id=process_set_id, name=name
    )


for _op in ("KhorovodJoin", "KhorovodBarrier", "KhorovodTopology"):
    tf_ops.NotDifferentiable(_op)


def _attrs(op):
    return op.get_attr("ignore_name_scope"), op.get_attr("process_set_id")


@tf_ops.RegisterGradient("KhorovodAllreduce")
def _allreduce_grad(op, grad):
    ignore, set_id = _attrs(op)
    return _allreduce(
        grad,
        op=op.get_attr("reduce_op"),
        prescale_factor=op.get_attr("prescale_factor"),
        postscale_factor=op.get_attr("postscale_factor"),
        ignore_name_scope=ignore,
        process_set=set_id,
    )


@tf_ops.RegisterGradient("KhorovodGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    ignore, set_id = _attrs(op)
    return _grouped_allreduce(
        list(grads),
        op=op.get_attr("reduce_op"),
        prescale_factor=op.get_attr("prescale_factor"),
        postscale_factor=op.get_attr("postscale_factor"),
        ignore_name_scope=ignore,
        process_set=set_id,
    )


@tf_ops.RegisterGradient("KhorovodAllgather")
def _allgather_grad(op, grad):
    """The average of the gradients, this rank's rows of it."""
    ignore, set_id = _attrs(op)
    grad = _allreduce(grad, op=Average, ignore_name_scope=ignore, process_set=set_id)
    with tf.device("/cpu:0"):
        rows = tf.reshape(tf.shape(op.inputs[0])[0], [1])
        all_rows = tf.reshape(
            allgather(rows, ignore_name_scope=ignore, process_set=set_id), [set_size(set_id)]
        )
    return tf.split(grad, num_or_size_splits=all_rows, axis=0)[set_rank(set_id)]


@tf_ops.RegisterGradient("KhorovodBroadcast")
def _broadcast_grad(op, grad):
    """The average of the gradients on the root, zeros elsewhere."""
    ignore, set_id = _attrs(op)
    reduced = _allreduce(grad, op=Average, ignore_name_scope=ignore, process_set=set_id)
    if CONTEXT.runtime().rank() != op.get_attr("root_rank"):
        return reduced * 0
    return reduced


@tf_ops.RegisterGradient("KhorovodAlltoall")
def _alltoall_grad(op, grad_wrt_output, grad_wrt_received_splits):
    """The gradient rows sent back where they came from."""
    del grad_wrt_received_splits  # integer output
    ignore, set_id = _attrs(op)
    grad, _ = alltoall(
        grad_wrt_output, splits=op.outputs[1], ignore_name_scope=ignore, process_set=set_id
    )
    return [grad, None]


@tf_ops.RegisterGradient("KhorovodReducescatter")
def _reducescatter_grad(op, grad):
    """The scattered gradient gathered back, scaled as the reduction was."""
    ignore, set_id = _attrs(op)
    if op.get_attr("reduce_op") == Sum:
        grad *= set_size(set_id)
    for attr in ("prescale_factor", "postscale_factor"):
        factor = op.get_attr(attr)
        if factor != 1.0:
            grad *= factor
    return allgather(grad, ignore_name_scope=ignore, process_set=set_id)
