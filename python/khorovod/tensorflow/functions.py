"""Broadcast and gather helpers of khorovod.tensorflow (as
horovod.tensorflow.functions): broadcast_variables, broadcast_object,
allgather_object, and the TF1-only broadcast_global_variables.

Contract: broadcast_variables assigns root_rank's values to every
variable, eagerly or inside a graph (``inplace`` is accepted: the runtime
broadcasts into a new buffer that is then assigned either way).
Objects travel pickled through khorovod/_objects.py (bytes straight to the
runtime, as for every framework). Every rank must call these collectively, in the
same order. Thread-safety: as the ops.
"""

import tensorflow as tf

from .. import _objects
from ..process_sets import global_process_set
from . import mpi_ops
from .util import _executing_eagerly


def _assign_all(variables, root_rank, process_set):
    return [
        var.assign(
            mpi_ops.broadcast(
                tf.convert_to_tensor(var),
                root_rank,
                name=None if not _executing_eagerly() else f"broadcast_variables.{i}",
                process_set=process_set,
            )
        )
        for i, var in enumerate(variables)
    ]


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
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution. "
            "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead."
        )
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """``obj`` as root_rank has it, on every rank of the set (khorovod/_objects.py:
    pickled bytes through the runtime, the same path as khorovod.torch's)."""
    del session
    return _objects.broadcast_object(
        obj, root_rank=root_rank, name=name or type(obj).__name__, process_set=process_set
    )


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function broadcasting objects (Horovod's TF1 helper, eager here)."""
    name = name or "broadcast_object_fn"

    def _bcast(obj):
        return broadcast_object(obj, root_rank, session=session, name=name, process_set=process_set)

    return _bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """The list of every rank's ``obj``, in rank order."""
    del session
    return _objects.allgather_object(obj, name=name or type(obj).__name__, process_set=process_set)
