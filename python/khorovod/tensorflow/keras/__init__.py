"""khorovod.tensorflow.keras: horovod.tensorflow.keras's API on the khorovod
runtime, for TensorFlow's tf.keras (Keras 3; Keras 2 through tf-keras with
TF_USE_LEGACY_KERAS=1). Replace ``import horovod.tensorflow.keras as hvd``
with ``import khorovod.tensorflow.keras as hvd``.

Contract: as Horovod's module; the collectives here take and return
tensors (Horovod's Keras helpers return values through the backend; in TF2
eager code they are tensors too). Differences: docs/python.md.
"""

import tensorflow as tf

from ...basics import (
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from ...process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from .. import _keras as _impl
from .. import collectives as _collectives
from .. import mpi_ops as _mpi_ops
from ..compression import Compression
from ..functions import allgather_object, broadcast_global_variables, broadcast_object  # noqa: F401
from ..mpi_ops import Average, Sum
from . import callbacks, elastic  # noqa: F401

keras = tf.keras


def DistributedOptimizer(
    optimizer,
    name=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    op=Average,
    backward_passes_per_step=1,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=global_process_set,
    scale_local_gradients=True,
    batch_size=None,
):
    """``optimizer`` (a Keras optimizer) with gradients averaged across ranks.
    ``batch_size`` (khorovod's): the samples of a step for the worker's
    metrics, when they are not the train step's batch."""
    del device_dense, device_sparse, num_groups, groups
    return _impl.create_distributed_optimizer(
        keras,
        optimizer,
        name,
        compression,
        sparse_as_dense,
        gradient_predivide_factor,
        op,
        backward_passes_per_step,
        average_aggregated_gradients,
        process_set,
        scale_local_gradients,
        batch_size,
    )


def PartialDistributedOptimizer(
    optimizer,
    name=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    op=Average,
    backward_passes_per_step=1,
    average_aggregated_gradients=False,
    groups=None,
    process_set=global_process_set,
    local_layers=None,
    scale_local_gradients=True,
):
    """DistributedOptimizer whose ``local_layers``' trainable weights keep
    their local gradients (Horovod's)."""
    if op not in (Average, Sum):
        raise ValueError("op currently only supports Average and Sum")
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    opt = DistributedOptimizer(
        optimizer,
        name=name,
        compression=compression,
        sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor,
        op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        groups=groups,
        process_set=process_set,
        scale_local_gradients=scale_local_gradients,
    )
    for layer in local_layers:
        for var in layer.trainable_weights:
            opt.register_local_var(var)
    return opt


def allreduce(
    value,
    name=None,
    average=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    op=None,
    compression=Compression.none,
):
    """The value reduced across ranks (Average by default), as a tensor."""
    return _collectives.allreduce(
        tf.convert_to_tensor(value),
        name=name,
        average=average,
        op=op,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        compression=compression,
    )


def allgather(value, name=None):
    return _mpi_ops.allgather(tf.convert_to_tensor(value), name=name)


def broadcast(value, root_rank, name=None):
    return _mpi_ops.broadcast(tf.convert_to_tensor(value), root_rank, name=name)


def reducescatter(value, name=None, op=Average):
    return _collectives.reducescatter(tf.convert_to_tensor(value), name=name, op=op)


def load_model(
    filepath,
    custom_optimizers=None,
    custom_objects=None,
    compression=Compression.none,
    legacy_opts=False,
):
    """keras.models.load_model, with the saved optimizer wrapped in a
    DistributedOptimizer (so its state is picked up for more training)."""
    del legacy_opts

    def wrap(cls):
        return _impl.OptimizerLoader(
            cls, lambda opt: DistributedOptimizer(opt, compression=compression)
        )

    return _impl.load_model(keras, wrap, filepath, custom_optimizers, custom_objects)
