"""horovod.tensorflow.DistributedOptimizer: wraps a TF1
tf.compat.v1.train.Optimizer so that compute_gradients returns gradients
averaged across ranks; a Keras optimizer goes to
khorovod.tensorflow.keras.DistributedOptimizer (as Horovod does).

Contract: as Horovod's for backward_passes_per_step=1; TF1 graph gradient
accumulation (backward_passes_per_step > 1) and the TF1 Adasum optimizer
raise NotImplementedError, since TF1 sessions are legacy. Thread-safety:
an optimizer belongs to one training loop.
"""

import tensorflow as tf

from ..process_sets import global_process_set
from .compression import Compression
from .gradients import check_predivide, reduce_gradients
from .mpi_ops import Adasum, Average

_LegacyOptimizer = tf.compat.v1.train.Optimizer


class _DistributedOptimizer(_LegacyOptimizer):
    def __init__(
        self,
        optimizer,
        name,
        use_locking,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        process_set,
    ):
        self._optimizer = optimizer
        self._reduce = dict(
            compression=compression,
            sparse_as_dense=sparse_as_dense,
            op=op,
            gradient_predivide_factor=gradient_predivide_factor,
            process_set=process_set,
        )
        super().__init__(
            name=name or f"Distributed{type(optimizer).__name__}", use_locking=use_locking
        )

    def compute_gradients(self, *args, **kwargs):
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        grads = reduce_gradients([g for g, _ in pairs], **self._reduce)
        return list(zip(grads, [v for _, v in pairs]))

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(
    optimizer,
    name=None,
    use_locking=False,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    backward_passes_per_step=1,
    op=Average,
    gradient_predivide_factor=1.0,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=global_process_set,
    scale_local_gradients=True,
):
    """An optimizer that averages gradients across ranks before applying them."""
    del device_dense, device_sparse, num_groups, groups
    check_predivide(op, gradient_predivide_factor)
    if op == Adasum and average_aggregated_gradients:
        raise ValueError("Adasum does not support average_aggregated_gradients == True")
    if isinstance(optimizer, _LegacyOptimizer):
        if backward_passes_per_step != 1:
            raise NotImplementedError(
                "khorovod: backward_passes_per_step > 1 is not supported for TF1 "
                "optimizers (use a Keras optimizer)"
            )
        return _DistributedOptimizer(
            optimizer,
            name,
            use_locking,
            compression,
            sparse_as_dense,
            op,
            gradient_predivide_factor,
            process_set,
        )
    if op == Adasum:
        raise ValueError("op == Adasum is not supported yet with Keras")
    from . import keras as hvd_keras  # noqa: PLC0415 - imports Keras only when asked for

    return hvd_keras.DistributedOptimizer(
        optimizer,
        name=name,
        compression=compression,
        sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        process_set=process_set,
        scale_local_gradients=scale_local_gradients,
    )
