"""Training-step marks for Keras jobs, with no change to the script: the
distributed Keras optimizer ends a step after each update, which feeds the
worker's step, throughput and scaling-efficiency metrics
(docs/observability.md), as khorovod.torch's optimizer does.

Contract: ``end_step(batch_size)`` adds a KhorovodEndStep op (stateful, so
inside a tf.function it runs after the update ops traced before it; eagerly
it runs at once) whose sample count is, in order of precedence, the
``batch_size`` given to DistributedOptimizer, KHOROVOD_BATCH_SIZE, or
inferred: the first dimension of the first tensor of the ``data`` argument
of the Keras ``train_step`` that called the optimizer (Keras 2 and 3 both
name it so; found on the Python stack while the step is traced, so the
count is a tensor of the traced step and follows every batch, the last
short one included). With none of those (a custom loop calling
apply_gradients itself, without KHOROVOD_BATCH_SIZE) the step counts 0
samples: steps and step time are exported, throughput is not.
Thread-safety: called on the training thread while it traces or runs.
"""

import sys

import tensorflow as tf

from ..._batch_size import fixed_batch_size
from .. import mpi_ops

# How many frames up from the optimizer the train step may be: Keras 3's
# apply_gradients -> apply, Keras 2's minimize -> compute -> apply, plus
# khorovod's own frames and the aggregation helper's tf.cond.
_MAX_DEPTH = 40


def _train_step_batch(frame):
    for _ in range(_MAX_DEPTH):
        if frame is None:
            return None
        if frame.f_code.co_name == "train_step" and "data" in frame.f_locals:
            first = next(iter(tf.nest.flatten(frame.f_locals["data"])), None)
            return first if isinstance(first, tf.Tensor) else None
        frame = frame.f_back
    return None


def _samples(fixed):
    if fixed is not None:
        return tf.constant(fixed, dtype=tf.int64)
    batch = _train_step_batch(sys._getframe(2))
    if batch is None or batch.shape.rank == 0:
        return tf.constant(0, dtype=tf.int64)
    return tf.cast(tf.shape(batch)[0], tf.int64)


def end_step(batch_size):
    """Marks the end of a training step (see the module's contract)."""
    return mpi_ops.MPI_LIB.khorovod_end_step(_samples(fixed_batch_size(batch_size)))
