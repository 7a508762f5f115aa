"""Broadcast and gather helpers of khorovod.tensorflow (as
horovod.tensorflow.functions): broadcast_variables, broadcast_object,
allgather_object, and the TF1-only broadcast_global_variables.

Contract: broadcast_variables assigns root_rank's values to every
variable, eagerly or inside a graph (``inplace`` is accepted: the runtime
broadcasts into a new buffer that is then assigned either way).
Objects travel as uint8 tensors of their cloudpickle serialization (plain
pickle when cloudpickle is missing) through the TensorFlow ops; the data
path is the runtime's. Every rank must call these collectively, in the
same order. Thread-safety: as the ops.
"""

import io
import pickle

import tensorflow as tf

from .._context import CONTEXT
from ..process_sets import global_process_set
from . import mpi_ops
from .util import _executing_eagerly

try:  # Horovod serializes objects with cloudpickle.
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the environment
    _pickler = pickle


def _assign_all(variables, root_rank, process_set):
    return [var.assign(mpi_ops.broadcast(tf.convert_to_tensor(var), root_rank,
                                         name=None if not _executing_eagerly() else
                                         f"broadcast_variables.{i}", process_set=process_set))
            for i, var in enumerate(variables)]


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns ``root_rank``'s value to each of ``variables`` on every rank."""
    del inplace
    variables = list(variables)
    if _executing_eagerly():
        _assign_all(variables, root_rank, process_set)
        return None
    return tf.group(*_assign_all(variables, root_rank, process_set))


def broadcast_global_variables(root_rank):
    """TF1 graphs only: broadcasts every global variable of the default graph."""
    if _executing_eagerly():
        raise RuntimeError("hvd.broadcast_global_variables() does not support eager execution. "
                           "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def _to_numpy(value, session):
    if _executing_eagerly():
        return value.numpy()
    return (session or tf.compat.v1.get_default_session()).run(value)


def _serialize(obj):
    buffer = io.BytesIO()
    _pickler.dump(obj, buffer)
    return tf.convert_to_tensor(bytearray(buffer.getvalue()), dtype=tf.uint8)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """``obj`` as root_rank has it, on every rank of the set."""
    name = name or type(obj).__name__
    root = CONTEXT.runtime().rank() == root_rank
    data = _serialize(obj) if root else None
    size = tf.constant([int(data.shape[0]) if root else 0], dtype=tf.int32)
    size = _to_numpy(mpi_ops.broadcast(size, root_rank, name=f"{name}.sz", process_set=process_set), session)
    if not root:
        data = tf.zeros([int(size[0])], dtype=tf.uint8)
    data = _to_numpy(mpi_ops.broadcast(data, root_rank, name=f"{name}.t", process_set=process_set), session)
    if root:
        return obj
    return _pickler.load(io.BytesIO(data.tobytes()))


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function broadcasting objects (Horovod's TF1 helper, eager here)."""
    name = name or "broadcast_object_fn"

    def _bcast(obj):
        return broadcast_object(obj, root_rank, session=session, name=name, process_set=process_set)

    return _bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """The list of every rank's ``obj``, in rank order."""
    name = name or type(obj).__name__
    data = _serialize(obj)
    sizes = _to_numpy(mpi_ops.allgather(tf.constant([int(data.shape[0])], dtype=tf.int32),
                                        name=f"{name}.sz", process_set=process_set), session)
    gathered = _to_numpy(mpi_ops.allgather(data, name=f"{name}.t", process_set=process_set), session)
    out, start = [], 0
    for n in sizes:
        out.append(_pickler.load(io.BytesIO(gathered[start:start + int(n)].tobytes())))
        start += int(n)
    return out
