"""How khorovod.tensorflow reduces a model's gradients, shared by
DistributedGradientTape, the TF1 DistributedOptimizer and the Keras one.

Contract (as Horovod's allreduce_grads): None gradients stay None;
IndexedSlices are gathered unless ``sparse_as_dense`` (then densified);
every dense gradient of one wire dtype goes in one grouped allreduce
(``groups`` only changes Horovod's fusion, which the runtime does by
itself here, so it is accepted and ignored). ``gradient_predivide_factor``
f splits the average: gradients are scaled by 1/f before the sum and by
f/size after it. Thread-safety: pure functions over tensors.
"""

import tensorflow as tf

from . import collectives
from .mpi_ops import Adasum, Average


def check_predivide(op, gradient_predivide_factor):
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")


def reduce_gradients(
    grads, compression, sparse_as_dense, op, gradient_predivide_factor, process_set, name=None
):
    """The reduced gradients, in the order given."""
    check_predivide(op, gradient_predivide_factor)
    present = []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if sparse_as_dense and isinstance(g, tf.IndexedSlices):
            g = tf.convert_to_tensor(g)
        present.append((i, g))
    if not present:
        return list(grads)
    prescale, postscale = 1.0, 1.0
    if gradient_predivide_factor != 1.0:
        prescale, postscale = 1.0 / gradient_predivide_factor, gradient_predivide_factor
    if op == Adasum:
        reduced = [
            collectives.allreduce(g, compression=compression, op=op, process_set=process_set)
            for _, g in present
        ]
    else:
        reduced = collectives.grouped_allreduce(
            [g for _, g in present],
            compression=compression,
            op=op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            process_set=process_set,
            name=name,
        )
    out = list(grads)
    for (i, _), r in zip(present, reduced):
        out[i] = r
    return out
