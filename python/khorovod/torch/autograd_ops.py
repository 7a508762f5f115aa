"""The blocking, out-of-place collectives of horovod.torch, differentiable.

Contract: each function returns what ``synchronize(X_async(...))`` returns
and, when autograd records (an input requires grad), its backward is the
collective Horovod defines as the gradient, run on every rank in the same
order as the forward (so unnamed backward collectives pair up):
- allreduce(op): allreduce of the gradient with the same op and scale
  factors (Average for Average, Sum for Sum).
- allgather: the gradient averaged over ranks, then this rank's rows of it.
- broadcast: the gradient averaged over ranks on the root; zeros elsewhere.
- alltoall: the gradient sent back with the splits each rank received.
- reducescatter(op): the gradients of every rank's slice gathered back,
  times the set's size for Sum (as is for Average), times the scale factors.
These are Horovod's definitions (horovod/torch/mpi_ops.py), kept exactly so
that Horovod's own gradient tests (test_torch.py) hold.
- grouped_*: the same, per tensor.
With a ``process_set``, forward and backward both run in that set.
In-place forms (allreduce_, broadcast_) are not differentiable, as in Horovod.

Thread-safety: as _async_ops (mpi_ops).
"""

import torch

from . import _async_data_ops as data_ops
from . import _async_ops as ops
from .compression import Compression


def _zeros_for_none(grads, like):
    return [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, like)]


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (op, prescale, postscale, process_set)
        return ops.synchronize(
            ops.allreduce_async(
                tensor,
                name=name,
                op=op,
                prescale_factor=prescale,
                postscale_factor=postscale,
                process_set=process_set,
            )
        )

    @staticmethod
    def backward(ctx, grad):
        op, prescale, postscale, process_set = ctx.args
        return (
            allreduce(
                grad,
                op=op,
                prescale_factor=prescale,
                postscale_factor=postscale,
                process_set=process_set,
            ),
            None,
            None,
            None,
            None,
            None,
        )


def _compressed(
    function, tensor, name, compression, op, prescale_factor, postscale_factor, process_set
):
    """Runs a reducing autograd function on the compressed tensor, then decompresses."""
    compressed, ctx = compression.compress(tensor)
    out = function.apply(
        compressed, name, op, float(prescale_factor), float(postscale_factor), process_set
    )
    return compression.decompress(out, ctx)


def allreduce(
    tensor,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    """Reduces ``tensor`` over all ranks (default: average) and returns the result."""
    ops.process_sets.resolve(process_set)
    return _compressed(
        _Allreduce,
        tensor,
        name,
        compression,
        ops._op_code(op, average),
        prescale_factor,
        postscale_factor,
        process_set,
    )


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(
            ops.synchronize(
                ops.grouped_allreduce_async(
                    list(tensors),
                    name=name,
                    op=op,
                    prescale_factor=prescale,
                    postscale_factor=postscale,
                    process_set=process_set,
                )
            )
        )

    @staticmethod
    def backward(ctx, *grads):
        op, prescale, postscale, process_set = ctx.args
        reduced = grouped_allreduce(
            list(grads),
            op=op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            process_set=process_set,
        )
        return (None, None, None, None, None, *reduced)


def grouped_allreduce(
    tensors,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    """Reduces a list of tensors together (one fused step); returns a list."""
    ops.process_sets.resolve(process_set)
    op = ops._op_code(op, average)
    pairs = [compression.compress(t) for t in tensors]
    reduced = _GroupedAllreduce.apply(
        name,
        op,
        float(prescale_factor),
        float(postscale_factor),
        process_set,
        *[p[0] for p in pairs],
    )
    return [compression.decompress(r, p[1]) for r, p in zip(reduced, pairs)]


def _own_rows(grad, rows, process_set):
    """This rank's rows of a gradient over the concatenation of every member's
    ``rows`` rows (the gather of row counts runs on every member)."""
    counts = ops.synchronize(
        data_ops.allgather_async(torch.tensor([rows], dtype=torch.int64), process_set=process_set)
    )
    offset = int(counts[: ops.process_sets.set_rank(ops.process_sets.resolve(process_set))].sum())
    return grad.narrow(0, offset, rows)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() else 0
        ctx.process_set = process_set
        return ops.synchronize(data_ops.allgather_async(tensor, name=name, process_set=process_set))

    @staticmethod
    def backward(ctx, grad):
        averaged = allreduce(grad, op=ops.Average, process_set=ctx.process_set)
        return _own_rows(averaged, ctx.rows, ctx.process_set), None, None


def allgather(tensor, name=None, process_set=None):
    """Concatenates every rank's tensor along dimension 0 (sizes may differ)."""
    ops.process_sets.resolve(process_set)
    return _Allgather.apply(tensor, name, process_set)


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() else 0 for t in tensors]
        ctx.process_set = process_set
        return tuple(
            ops.synchronize(
                data_ops.grouped_allgather_async(list(tensors), name, process_set=process_set)
            )
        )

    @staticmethod
    def backward(ctx, *grads):
        averaged = grouped_allreduce(list(grads), op=ops.Average, process_set=ctx.process_set)
        return (
            None,
            None,
            *[_own_rows(g, rows, ctx.process_set) for g, rows in zip(averaged, ctx.rows)],
        )


def grouped_allgather(tensors, name=None, process_set=None):
    """allgather of each tensor of a list; returns the list of results."""
    ops.process_sets.resolve(process_set)
    return list(_GroupedAllgather.apply(name, process_set, *tensors))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return ops.synchronize(
            data_ops.broadcast_async(tensor, root_rank, name=name, process_set=process_set)
        )

    @staticmethod
    def backward(ctx, grad):
        averaged = allreduce(grad, op=ops.Average, process_set=ctx.process_set)
        if ops.CONTEXT.runtime().rank() != ctx.root_rank:
            averaged = torch.zeros_like(averaged)
        return averaged, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Out of place: returns a new tensor holding root's values."""
    ops.process_sets.resolve(process_set)
    return _Broadcast.apply(tensor, int(root_rank), name, process_set)


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = ops.synchronize(
            data_ops.alltoall_async(
                tensor,
                splits if splits is not None else _equal_splits(tensor, process_set),
                name=name,
                process_set=process_set,
            )
        )
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _grad_splits):
        back, _ = alltoall(grad.contiguous(), splits=ctx.received, process_set=ctx.process_set)
        return back, None, None, None


def _equal_splits(tensor, process_set):
    size = ops.process_sets.set_size(ops.process_sets.resolve(process_set))
    rows = tensor.shape[0] if tensor.dim() else 0
    if rows % size:
        raise ValueError(
            f"khorovod: alltoall without splits needs a first dimension "
            f"divisible by the number of ranks ({rows} rows, {size} ranks)"
        )
    return [rows // size] * size


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Sends ``splits[r]`` rows to rank r (equal split when None). Returns
    (output, received_splits) when splits are given, else output."""
    ops.process_sets.resolve(process_set)
    out, received = _Alltoall.apply(tensor, splits, name, process_set)
    return out if splits is None else (out, received)


def _gather_back(grad, op, prescale, postscale, process_set):
    # Horovod scales by the size for Sum and leaves Average's gradient as is.
    scale = prescale * postscale
    if op == ops.Sum:
        scale *= ops.process_sets.set_size(ops.process_sets.resolve(process_set))
    gathered = allgather(grad, process_set=process_set)
    return gathered * scale if scale != 1.0 else gathered


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (op, prescale, postscale, process_set)
        return ops.synchronize(
            data_ops.reducescatter_async(
                tensor,
                name=name,
                op=op,
                prescale_factor=prescale,
                postscale_factor=postscale,
                process_set=process_set,
            )
        )

    @staticmethod
    def backward(ctx, grad):
        return _gather_back(grad, *ctx.args), None, None, None, None, None


def reducescatter(
    tensor,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    """Reduces, then returns this rank's slice along dimension 0."""
    ops.process_sets.resolve(process_set)
    return _compressed(
        _Reducescatter,
        tensor,
        name,
        compression,
        ops._op_code(op, None),
        prescale_factor,
        postscale_factor,
        process_set,
    )


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(
            ops.synchronize(
                data_ops.grouped_reducescatter_async(
                    list(tensors), name, op, prescale, postscale, process_set=process_set
                )
            )
        )

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, None, None, None, *[_gather_back(g, *ctx.args) for g in grads])


def grouped_reducescatter(
    tensors,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    """reducescatter of each tensor of a list; returns the list of slices."""
    ops.process_sets.resolve(process_set)
    op = ops._op_code(op, None)
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedReducescatter.apply(
        name,
        op,
        float(prescale_factor),
        float(postscale_factor),
        process_set,
        *[p[0] for p in pairs],
    )
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]
