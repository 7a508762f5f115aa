"""The blocking, out-of-place collectives of horovod.torch, differentiable.

Contract: each function returns what ``synchronize(X_async(...))`` returns
and, when autograd records (an input requires grad), its backward is the
collective Horovod defines as the gradient, run on every rank in the same
order as the forward (so unnamed backward collectives pair up):
- allreduce(op): allreduce of the gradient with the same op and scale
  factors (Average for Average, Sum for Sum).
- allgather: the gradient summed over ranks, then this rank's rows of it.
- broadcast: the gradient summed over ranks on the root; zeros elsewhere.
- alltoall: the gradient sent back with the splits each rank received.
- reducescatter(op): the gradients of every rank's slice gathered back
  (divided by the size for Average), times the scale factors.
- grouped_*: the same, per tensor.
In-place forms (allreduce_, broadcast_) are not differentiable, as in Horovod.

Thread-safety: as mpi_ops.
"""

import torch

from . import mpi_ops
from .compression import Compression


def _zeros_for_none(grads, like):
    return [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, like)]


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale):
        ctx.args = (op, prescale, postscale)
        return mpi_ops.synchronize(mpi_ops.allreduce_async(
            tensor, name=name, op=op, prescale_factor=prescale, postscale_factor=postscale))

    @staticmethod
    def backward(ctx, grad):
        op, prescale, postscale = ctx.args
        return allreduce(grad, op=op, prescale_factor=prescale,
                         postscale_factor=postscale), None, None, None, None


def _compressed(function, tensor, name, compression, op, prescale_factor, postscale_factor):
    """Runs a reducing autograd function on the compressed tensor, then decompresses."""
    compressed, ctx = compression.compress(tensor)
    out = function.apply(compressed, name, op, float(prescale_factor), float(postscale_factor))
    return compression.decompress(out, ctx)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Reduces ``tensor`` over all ranks (default: average) and returns the result."""
    mpi_ops.process_sets.check(process_set)
    return _compressed(_Allreduce, tensor, name, compression, mpi_ops._op_code(op, average),
                       prescale_factor, postscale_factor)


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, *tensors):
        ctx.args = (op, prescale, postscale)
        return tuple(mpi_ops.synchronize(mpi_ops.grouped_allreduce_async(
            list(tensors), name=name, op=op, prescale_factor=prescale,
            postscale_factor=postscale)))

    @staticmethod
    def backward(ctx, *grads):
        op, prescale, postscale = ctx.args
        reduced = grouped_allreduce(list(grads), op=op, prescale_factor=prescale,
                                    postscale_factor=postscale)
        return (None, None, None, None, *reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Reduces a list of tensors together (one fused step); returns a list."""
    mpi_ops.process_sets.check(process_set)
    op = mpi_ops._op_code(op, average)
    pairs = [compression.compress(t) for t in tensors]
    reduced = _GroupedAllreduce.apply(name, op, float(prescale_factor), float(postscale_factor),
                                      *[p[0] for p in pairs])
    return [compression.decompress(r, p[1]) for r, p in zip(reduced, pairs)]


def _own_rows(grad, rows):
    """This rank's rows of a gradient over the concatenation of every rank's
    ``rows`` rows (the gather of row counts runs on every rank)."""
    counts = mpi_ops.synchronize(mpi_ops.allgather_async(torch.tensor([rows], dtype=torch.int64)))
    offset = int(counts[:mpi_ops.CONTEXT.runtime().rank()].sum())
    return grad.narrow(0, offset, rows)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = tensor.shape[0] if tensor.dim() else 0
        return mpi_ops.synchronize(mpi_ops.allgather_async(tensor, name=name))

    @staticmethod
    def backward(ctx, grad):
        summed = allreduce(grad, op=mpi_ops.Sum)
        return _own_rows(summed, ctx.rows), None


def allgather(tensor, name=None, process_set=None):
    """Concatenates every rank's tensor along dimension 0 (sizes may differ)."""
    mpi_ops.process_sets.check(process_set)
    return _Allgather.apply(tensor, name)


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, *tensors):
        ctx.rows = [t.shape[0] if t.dim() else 0 for t in tensors]
        return tuple(mpi_ops.synchronize(mpi_ops.grouped_allgather_async(list(tensors), name)))

    @staticmethod
    def backward(ctx, *grads):
        summed = grouped_allreduce(list(grads), op=mpi_ops.Sum)
        return (None, *[_own_rows(g, rows) for g, rows in zip(summed, ctx.rows)])


def grouped_allgather(tensors, name=None, process_set=None):
    """allgather of each tensor of a list; returns the list of results."""
    mpi_ops.process_sets.check(process_set)
    return list(_GroupedAllgather.apply(name, *tensors))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return mpi_ops.synchronize(mpi_ops.broadcast_async(tensor, root_rank, name=name))

    @staticmethod
    def backward(ctx, grad):
        summed = allreduce(grad, op=mpi_ops.Sum)
        if mpi_ops.CONTEXT.runtime().rank() != ctx.root_rank:
            summed = torch.zeros_like(summed)
        return summed, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Out of place: returns a new tensor holding root's values."""
    mpi_ops.process_sets.check(process_set)
    return _Broadcast.apply(tensor, int(root_rank), name)


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name):
        out, received = mpi_ops.synchronize(mpi_ops.alltoall_async(
            tensor, splits if splits is not None else _equal_splits(tensor), name=name))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _grad_splits):
        back, _ = alltoall(grad.contiguous(), splits=ctx.received)
        return back, None, None


def _equal_splits(tensor):
    size = mpi_ops.CONTEXT.runtime().size()
    rows = tensor.shape[0] if tensor.dim() else 0
    if rows % size:
        raise ValueError(f"khorovod: alltoall without splits needs a first dimension "
                         f"divisible by the number of ranks ({rows} rows, {size} ranks)")
    return [rows // size] * size


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Sends ``splits[r]`` rows to rank r (equal split when None). Returns
    (output, received_splits) when splits are given, else output."""
    mpi_ops.process_sets.check(process_set)
    out, received = _Alltoall.apply(tensor, splits, name)
    return out if splits is None else (out, received)


def _gather_back(grad, op, prescale, postscale):
    gathered = allgather(grad)
    scale = prescale * postscale
    if op == mpi_ops.Average:
        scale /= mpi_ops.CONTEXT.runtime().size()
    return gathered * scale if scale != 1.0 else gathered


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale):
        ctx.args = (op, prescale, postscale)
        return mpi_ops.synchronize(mpi_ops.reducescatter_async(
            tensor, name=name, op=op, prescale_factor=prescale, postscale_factor=postscale))

    @staticmethod
    def backward(ctx, grad):
        return _gather_back(grad, *ctx.args), None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=None,
                  prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Reduces, then returns this rank's slice along dimension 0."""
    mpi_ops.process_sets.check(process_set)
    return _compressed(_Reducescatter, tensor, name, compression, mpi_ops._op_code(op, None),
                       prescale_factor, postscale_factor)


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, *tensors):
        ctx.args = (op, prescale, postscale)
        return tuple(mpi_ops.synchronize(mpi_ops.grouped_reducescatter_async(
            list(tensors), name, op, prescale, postscale)))

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, None, None, *[_gather_back(g, *ctx.args) for g in grads])


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=None,
                          prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """reducescatter of each tensor of a list; returns the list of slices."""
    mpi_ops.process_sets.check(process_set)
    op = mpi_ops._op_code(op, None)
    pairs = [compression.compress(t) for t in tensors]
    outs = _GroupedReducescatter.apply(name, op, float(prescale_factor), float(postscale_factor),
                                       *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]
