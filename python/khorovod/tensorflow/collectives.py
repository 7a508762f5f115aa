"""horovod.tensorflow's public collectives over mpi_ops.py: allreduce with
its op, scaling and compression, tf.IndexedSlices (reduced by gathering
values and indices, as Horovod does), grouped allreduce, reducescatter.

Contract (as horovod.tensorflow): ``op`` defaults to Average; the
deprecated ``average`` flag is accepted; IndexedSlices support Sum and
Average only, without scaling; Adasum needs a power-of-two number of ranks
in the global set. ``device_dense``/``device_sparse`` are accepted and
ignored: every op runs on the CPU host path. Thread-safety: as mpi_ops.
"""

import tensorflow as tf

from ..process_sets import global_process_set
from . import mpi_ops
from .compression import Compression
from .mpi_ops import Adasum, Average, Sum


def _op(op, average):
    if average is not None:
        if op is not None:
            raise ValueError("khorovod: pass either op or the deprecated average, not both")
        return Average if average else Sum
    return Average if op is None else op


def _check_adasum(op, process_set):
    if op != Adasum:
        return
    if process_set is not global_process_set and process_set is not None:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    n = mpi_ops.CONTEXT.runtime().size()
    if n & (n - 1):
        raise NotImplementedError("Running Adasum with non-power of 2 ranks is not supported yet.")


def _sparse_allreduce(
    tensor, op, prescale_factor, postscale_factor, process_set, ignore_name_scope, name=None
):
    if op == Adasum:
        raise NotImplementedError(
            "The Adasum reduction does not currently support sparse tensors. As a "
            "workaround please pass sparse_as_dense=True to DistributedOptimizer"
        )
    if op not in (Sum, Average):
        raise NotImplementedError("Only Sum and Average ops are supported with tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with tf.IndexedSlices")
    values = mpi_ops.allgather(
        tensor.values,
        name=None if name is None else f"{name}.values",
        process_set=process_set,
        ignore_name_scope=ignore_name_scope,
    )
    indices = mpi_ops.allgather(
        tensor.indices,
        name=None if name is None else f"{name}.indices",
        process_set=process_set,
        ignore_name_scope=ignore_name_scope,
    )
    if op == Average:
        set_id = mpi_ops._set_id(process_set)
        values = values / tf.cast(mpi_ops.size_op(process_set_id=set_id), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)


def allreduce(
    tensor,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
    process_set=global_process_set,
    ignore_name_scope=False,
):
    """Reduces ``tensor`` (a tf.Tensor, tf.Variable or tf.IndexedSlices)
    across the set's ranks; Average by default."""
    del device_dense, device_sparse
    op = _op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        return _sparse_allreduce(
            tensor, op, prescale_factor, postscale_factor, process_set, ignore_name_scope, name
        )
    _check_adasum(op, process_set)
    tensor = tf.convert_to_tensor(tensor)
    compressed, ctx = compression.compress(tensor)
    reduced = mpi_ops._allreduce(
        compressed,
        name=name,
        op=op,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        ignore_name_scope=ignore_name_scope,
        process_set=process_set,
    )
    return compression.decompress(reduced, ctx)


def grouped_allreduce(
    tensors,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    ignore_name_scope=False,
    name=None,
):
    """Reduces every tensor of ``tensors`` in one fused step per dtype;
    IndexedSlices are gathered. Returns the results in order."""
    del device_dense, device_sparse
    if not tensors:
        return tensors
    op = _op(op, average)
    _check_adasum(op, process_set)
    results = [None] * len(tensors)
    dense = {}  # wire dtype -> [(index, compressed, ctx)]
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            results[i] = _sparse_allreduce(
                t,
                op,
                prescale_factor,
                postscale_factor,
                process_set,
                ignore_name_scope,
                None if name is None else f"{name}.{i}",
            )
            continue
        compressed, ctx = compression.compress(tf.convert_to_tensor(t))
        dense.setdefault(compressed.dtype, []).append((i, compressed, ctx))
    for group_index, group in enumerate(dense.values()):
        group_name = (
            None if name is None else (name if len(dense) == 1 else f"{name}.{group_index}")
        )
        if group_name is None and tf.executing_eagerly() and len(dense) > 1:
            group_name = f"GroupedAllreduce.eager.{group[0][1].dtype.name}"
        reduced = mpi_ops._grouped_allreduce(
            [c for _, c, _ in group],
            name=group_name,
            op=op,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
            ignore_name_scope=ignore_name_scope,
            process_set=process_set,
        )
        for (i, _, ctx), r in zip(group, reduced):
            results[i] = compression.decompress(r, ctx)
    return results


def reducescatter(
    tensor,
    device_dense="",
    compression=Compression.none,
    op=Average,
    name=None,
    process_set=global_process_set,
    ignore_name_scope=False,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Reduces ``tensor`` and gives each rank its block of rows."""
    del device_dense
    if op not in (Sum, Average):
        raise NotImplementedError("khorovod: reducescatter supports Sum and Average")
    compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
    reduced = mpi_ops._reducescatter(
        compressed,
        name=name,
        op=op,
        ignore_name_scope=ignore_name_scope,
        process_set=process_set,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
    )
    return compression.decompress(reduced, ctx)


def grouped_reducescatter(
    tensors,
    device_dense="",
    compression=Compression.none,
    op=Average,
    process_set=global_process_set,
    ignore_name_scope=False,
    name=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """reducescatter of each tensor; results in order."""
    del device_dense
    if op not in (Sum, Average):
        raise NotImplementedError("khorovod: reducescatter supports Sum and Average")
    pairs = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]
    reduced = mpi_ops._grouped_reducescatter(
        [c for c, _ in pairs],
        name=name,
        op=op,
        ignore_name_scope=ignore_name_scope,
        process_set=process_set,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
    )
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]
