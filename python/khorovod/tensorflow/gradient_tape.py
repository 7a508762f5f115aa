"""DistributedGradientTape: a tf.GradientTape whose gradient() averages the
gradients across ranks (horovod.tensorflow.DistributedGradientTape).

Contract: as Horovod's. Sources registered with register_local_source keep
their local gradient (divided by the set's size when
scale_local_gradients, as Horovod does); the others are reduced with
gradients.reduce_gradients. Works eagerly and inside tf.function.
Thread-safety: a tape belongs to one thread, as TensorFlow's.
"""

import tensorflow as tf

from ..process_sets import global_process_set
from . import mpi_ops
from .compression import Compression
from .gradients import check_predivide, reduce_gradients
from .mpi_ops import Average
from .util import _var_key


class _DistributedGradientTape(tf.GradientTape):
    def __init__(
        self,
        tape,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        process_set,
        scale_local_gradients,
        persistent=False,
        watch_accessed_variables=True,
    ):
        super().__init__(persistent, watch_accessed_variables)
        self._tape = tape
        self._compression = compression
        self._sparse_as_dense = sparse_as_dense
        self._op = op
        self._predivide = gradient_predivide_factor
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_sources = set()

    def register_local_source(self, source):
        """``source``'s gradient stays local to this rank (never reduced)."""
        self._local_sources.add(_var_key(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False):
        del use_generic_names
        flat_sources = tf.nest.flatten(sources)
        grads = super().gradient(target, flat_sources, output_gradients)
        is_local = [_var_key(s) in self._local_sources for s in flat_sources]
        global_idx = [i for i, local in enumerate(is_local) if not local]
        reduced = reduce_gradients(
            [grads[i] for i in global_idx],
            self._compression,
            self._sparse_as_dense,
            self._op,
            self._predivide,
            self.process_set,
        )
        out = list(grads)
        for i, g in zip(global_idx, reduced):
            out[i] = g
        if self.scale_local_gradients and self._local_sources:
            size = tf.cast(
                mpi_ops.size_op(process_set_id=mpi_ops._set_id(self.process_set)), tf.float32
            )
            for i, local in enumerate(is_local):
                if local and out[i] is not None:
                    g = out[i]
                    if isinstance(g, tf.IndexedSlices):
                        out[i] = tf.IndexedSlices(
                            g.values / tf.cast(size, g.values.dtype), g.indices, g.dense_shape
                        )
                    else:
                        out[i] = g / tf.cast(size, g.dtype)
        return tf.nest.pack_sequence_as(sources, out)

    def get_local_and_global_gradients(
        self, target, sources, output_gradients=None, use_generic_names=False
    ):
        grads = self.gradient(target, sources, output_gradients, use_generic_names)
        local, global_ = [], []
        for s, g in zip(sources, grads):
            (local if _var_key(s) in self._local_sources else global_).append((s, g))
        return local, global_


def DistributedGradientTape(
    gradtape,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    op=Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    process_set=global_process_set,
    scale_local_gradients=True,
):
    """Wraps ``gradtape`` (already recording): its gradient() returns the
    gradients reduced across the process set's ranks."""
    del device_dense, device_sparse, num_groups, groups
    check_predivide(op, gradient_predivide_factor)
    tape = _DistributedGradientTape(
        gradtape,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        process_set,
        scale_local_gradients,
        getattr(gradtape, "_persistent", False),
        getattr(gradtape, "_watch_accessed_variables", True),
    )
    # Take over what the wrapped tape recorded so far.
    tape._tape = gradtape._tape
    tape._recording = gradtape._recording
    return tape


def PartialDistributedGradientTape(
    gradtape,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    op=Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    process_set=global_process_set,
    local_layers=None,
    scale_local_gradients=True,
):
    """DistributedGradientTape with the variables of ``local_layers`` (Keras
    layers) registered as local sources."""
    tape = DistributedGradientTape(
        gradtape,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups,
        groups,
        process_set,
        scale_local_gradients,
    )
    layers = (
        []
        if local_layers is None
        else (local_layers if isinstance(local_layers, (list, tuple)) else [local_layers])
    )
    for layer in layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape
