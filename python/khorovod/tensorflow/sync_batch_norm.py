"""SyncBatchNormalization (horovod.tensorflow's hvd.SyncBatchNormalization):
a Keras BatchNormalization whose training-time batch statistics cover every
rank's batch.

Contract (as Horovod's): in training, each rank computes its batch's mean
and variance, then one allreduce (Sum, divided by the world size) of the
stacked [mean, mean of squares] gives the global mean and the variance
E[X^2] - E[X]^2, with every rank's batch weighted equally; the moving
statistics are updated from them, so they agree on every rank. Inference
uses the moving statistics; at one rank the allreduce returns the local
ones. ``fused=True`` (or None) is refused
with ValueError. Works with tf-keras (Keras 2: ``_moments(inputs,
reduction_axes, keep_dims)``) and Keras 3 (``_moments(inputs, mask)``, which
has no ``fused`` argument: only False is accepted and not passed on).
Thread-safety: a Keras layer; call it from one thread at a time.
"""

import tensorflow as tf

from .mpi_ops import Average, _allreduce


def _is_keras3():
    major = str(getattr(tf.keras, "__version__", "2")).split(".")[0]
    return major.isdigit() and int(major) >= 3


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """Synchronous batch normalization: statistics over all ranks' batches."""

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        if not kwargs.get("name", None):
            kwargs["name"] = "sync_batch_normalization"
        if not _is_keras3():
            kwargs["fused"] = fused
        super().__init__(**kwargs)

    def _moments(self, inputs, *args, **kwargs):
        worker_mean, worker_variance = super()._moments(inputs, *args, **kwargs)
        # Var[X] = E[X^2] - E[X]^2, from the averages of both over the ranks.
        # Always one allreduce, averaged over the size when it runs: a
        # tf.function traced at one rank stays right after an elastic job
        # grows (Horovod tests size() > 1 when it traces).
        worker_mean_of_square = worker_variance + tf.math.square(worker_mean)
        stacked = tf.stack([worker_mean, worker_mean_of_square])
        group = _allreduce(stacked, op=Average)
        group_mean, group_mean_of_square = tf.unstack(group)
        return group_mean, group_mean_of_square - tf.math.square(group_mean)
