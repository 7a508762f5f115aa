"""The collectives of khorovod.torch other than allreduce: allgather,
broadcast, alltoall, reducescatter (each with its grouped form where Horovod
has one), barrier and join, asynchronous and in-place.

Contract and thread-safety: as _async_ops, whose handles, op codes, names
and tensor views these build on; mpi_ops puts both under Horovod's name.
"""

import torch
import torch.utils.dlpack

from .._context import CONTEXT
from .._errors import raise_for_status
from . import process_sets
from ._async_ops import (
    _TORCH_DTYPES,
    Adasum,
    GroupHandle,
    Handle,
    _check_reduce_dtype,
    _group_names,
    _name,
    _op_code,
    _view,
    synchronize,
)

# --- allgather, broadcast, alltoall, reducescatter ---------------------------


def _output_tensor(h, like):
    """The result of ``h`` on ``like``'s device: device results are taken
    over through DLPack (no copy), host results are copied from bytes."""
    if like.is_cuda:
        capsule, dtype, shape, _kind, _index = h.take_output_dlpack()
        if capsule is None:
            return torch.empty(shape, dtype=_TORCH_DTYPES[dtype], device=like.device)
        return torch.utils.dlpack.from_dlpack(capsule)
    data, dtype, shape = h.take_output()
    torch_dtype = _TORCH_DTYPES[dtype]
    if len(data) == 0:
        return torch.empty(shape, dtype=torch_dtype)
    return torch.frombuffer(bytearray(data), dtype=torch_dtype).reshape(shape)


def _allgather_one(tensor, name, ps=0):
    src = tensor.detach().contiguous()
    if ps:
        h = CONTEXT.runtime().allgather_async_in_set(name, _view(src), ps)
    else:
        h = CONTEXT.runtime().allgather_async(name, _view(src))
    return Handle(h, (src,), lambda hh: _output_tensor(hh, tensor))


def allgather_async(tensor, name=None, process_set=None):
    """Concatenates every rank's tensor along dimension 0 (sizes may differ)."""
    ps = process_sets.resolve(process_set)
    return _allgather_one(tensor, _name(name, "allgather", ps), ps)


def grouped_allgather_async(tensors, name=None, process_set=None):
    """allgather of each tensor of a list; synchronize() returns the list."""
    ps = process_sets.resolve(process_set)
    names = _group_names(name, "grouped_allgather", len(tensors), ps)
    return GroupHandle([_allgather_one(t, n, ps) for t, n in zip(tensors, names)])


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """In place: root's tensor is copied into every other rank's tensor."""
    ps = process_sets.resolve(process_set)
    in_place = tensor.is_contiguous()
    buf = tensor.detach() if in_place else tensor.detach().contiguous()
    if ps:
        h = CONTEXT.runtime().broadcast_async_in_set(
            _name(name, "broadcast", ps), _view(buf), int(root_rank), ps
        )
    else:
        h = CONTEXT.runtime().broadcast_async(
            _name(name, "broadcast", ps), _view(buf), int(root_rank)
        )

    def finish(_h):
        if not in_place:
            tensor.data.copy_(buf)
        return tensor

    return Handle(h, (tensor, buf), finish)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Out of place: returns a new tensor holding root's values."""
    return broadcast_async_(
        tensor.detach().clone(memory_format=torch.contiguous_format), root_rank, name, process_set
    )


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """Sends ``splits[r]`` rows to rank r (equal split when None). The
    result is (output, received_splits) when splits are given, else output."""
    ps = process_sets.resolve(process_set)
    if isinstance(splits, torch.Tensor) and splits.dtype != torch.int32:
        # Horovod's check: split counts travel as int32.
        raise ValueError(
            f"khorovod: alltoall splits must be a tensor of type int32 or a "
            f"list of ints, got a {splits.dtype} tensor"
        )
    src = tensor.detach().contiguous()
    split_list = (
        []
        if splits is None
        else [int(s) for s in (splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
    )
    if ps:
        h = CONTEXT.runtime().alltoall_async_in_set(
            _name(name, "alltoall", ps), _view(src), split_list, ps
        )
    else:
        h = CONTEXT.runtime().alltoall_async(_name(name, "alltoall", ps), _view(src), split_list)

    def finish(hh):
        out = _output_tensor(hh, tensor)
        if splits is None:
            return out
        return out, torch.tensor(hh.received_splits(), dtype=torch.int32)  # as Horovod

    return Handle(h, (src,), finish)


def _reducescatter_one(tensor, name, op, prescale_factor, postscale_factor, ps=0):
    if op == Adasum:  # as Horovod, whose reducescatter has no Adasum either
        raise NotImplementedError("khorovod: reducescatter does not support op=Adasum")
    _check_reduce_dtype(tensor, op)
    src = tensor.detach().contiguous()
    args = (name, _view(src), op, float(prescale_factor), float(postscale_factor))
    if ps:
        h = CONTEXT.runtime().reducescatter_async_in_set(*args, ps)
    else:
        h = CONTEXT.runtime().reducescatter_async(*args)
    return Handle(h, (src,), lambda hh: _output_tensor(hh, tensor))


def reducescatter_async(
    tensor, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None
):
    """Reduces, then gives rank r the r-th slice along dimension 0."""
    ps = process_sets.resolve(process_set)
    return _reducescatter_one(
        tensor,
        _name(name, "reducescatter", ps),
        _op_code(op, None),
        prescale_factor,
        postscale_factor,
        ps,
    )


def grouped_reducescatter_async(
    tensors, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None
):
    """reducescatter of each tensor of a list; synchronize() returns the list."""
    ps = process_sets.resolve(process_set)
    op = _op_code(op, None)
    names = _group_names(name, "grouped_reducescatter", len(tensors), ps)
    return GroupHandle(
        [
            _reducescatter_one(t, n, op, prescale_factor, postscale_factor, ps)
            for t, n in zip(tensors, names)
        ]
    )


# --- barrier, join ------------------------------------------------------------


def barrier(process_set=None):
    """Blocks until every rank (of the process set) reached the barrier."""
    ps = process_sets.resolve(process_set)
    raise_for_status(CONTEXT.runtime().barrier_in_set(ps) if ps else CONTEXT.runtime().barrier())


def join(device=-1):
    """Declares that this rank ran out of data; until every rank has joined
    its allreduces contribute zeros. Returns the last rank to join.
    ``device`` is accepted for horovod compatibility and ignored."""
    del device
    code, message, last = CONTEXT.runtime().join()
    raise_for_status((code, message))
    return last
