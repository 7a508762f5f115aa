"""The asynchronous collectives on torch tensors over the C++ runtime, and
the in-place blocking ones: horovod.torch.mpi_ops without the
differentiable blocking forms (autograd_ops.py builds those on this module;
mpi_ops.py puts the two together under Horovod's module name).

Contract (as horovod.torch, differences in docs/python.md):

- ``X_async`` submits and returns a Handle at once; ``synchronize(handle)``
  waits and returns the result; ``poll(handle)`` says whether it finished.
  The blocking form ``X`` is ``synchronize(X_async(...))``. A trailing
  underscore (``allreduce_``) works in place on the given tensor.
- Tensors are identified by ``name``. Unnamed tensors get a name from the
  call order, so unnamed calls must happen in the same order on all ranks.
- The Handle keeps every tensor it touches alive until it completes: the
  runtime reads and writes their memory from its background thread. A
  Handle dropped (garbage collected) before its operation finished hands
  those tensors to CONTEXT.adopt_orphan, which keeps them until the runtime
  is done with them (at the latest until shutdown), as Horovod keeps its
  tensor table entry alive; the result is then discarded.
- Failures raise khorovod.KhorovodError subclasses carrying the runtime's
  message: collective failures are RuntimeErrors (MISMATCH;
  HorovodInternalError for a dead peer or a stall shutdown); arguments refused at submission
  are ValueErrors (InvalidArgumentError), among them a name that is still
  in flight on this rank, raised by the submitting call as in Horovod.
- The blocking out-of-place forms (allreduce, allgather, broadcast,
  alltoall, reducescatter and the grouped ones) are differentiable; they
  live in autograd_ops.py, over this module.
- ``process_set``: a registered ProcessSet (khorovod/process_sets.py); the
  collective then runs among its members only, with the set's ranks and
  size (a broadcast's ``root_rank`` stays a global rank, as in Horovod).
- CPU tensors go to the runtime's host path (Gloo). CUDA tensors go to its
  device backend (NCCL, or host staging) with their device, which must be
  the one the runtime is pinned to (KHOROVOD_GPU_DEVICE, else the local
  rank modulo the visible GPUs); otherwise, or without a usable GPU or
  device backend, the runtime refuses them with INVALID_ARGUMENT.
- Stream order: the runtime works on its own CUDA stream, so before a CUDA
  tensor is submitted the submitting thread waits for torch's current
  stream on that device (``synchronize()``): whatever produced the tensor
  has finished. This blocks the caller until the GPU catches up; recording
  an event for the runtime to wait on would not, but needs the runtime to
  accept one (not done). Results are complete when the handle is.
- Results of allgather, alltoall and reducescatter on CUDA tensors stay on
  the device: the runtime allocates them and hands them over through DLPack
  without a copy.

Thread-safety: submissions and waits may come from any thread (the
DistributedOptimizer submits from autograd hooks).
"""

import torch
import torch.utils.dlpack

from .. import _khorovod
from .._context import CONTEXT
from .._errors import raise_for_status
from . import process_sets
from .compression import Compression  # noqa: F401  (mpi_ops re-exports it, as Horovod's does)

# Reduce ops, with the runtime's wire values (ops.h).
Sum = 0
Average = 1
Min = 2
Max = 3
Product = 4
Adasum = 5  # core/adasum.h: host tensors, global set, power-of-two size

_DTYPES = {
    torch.float32: 0,
    torch.float64: 1,
    torch.float16: 2,
    torch.bfloat16: 3,
    torch.int8: 4,
    torch.uint8: 5,
    torch.int32: 6,
    torch.int64: 7,
    torch.int16: 8,
    torch.bool: 9,
}
_TORCH_DTYPES = {code: dtype for dtype, code in _DTYPES.items()}


def _dtype_code(tensor):
    try:
        return _DTYPES[tensor.dtype]
    except KeyError:
        supported = ", ".join(str(d) for d in _DTYPES)
        raise ValueError(
            f"khorovod: tensors of dtype {tensor.dtype} are not supported (supported: {supported})"
        ) from None


def _view(tensor):
    """A TensorView of a contiguous tensor (the caller keeps it alive)."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"khorovod: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.is_sparse:
        raise ValueError(
            "khorovod: sparse tensors are reduced with sparse_allreduce_async "
            "(or DistributedOptimizer(sparse_as_dense=True)), not here"
        )
    if not tensor.is_contiguous():
        raise ValueError("khorovod: internal error: tensor must be contiguous here")
    if tensor.is_cuda:
        kind, index = 1, tensor.device.index if tensor.device.index is not None else 0
        # The runtime's stream is not ordered after torch's (see the module
        # docstring): wait here for the work that produces the tensor.
        torch.cuda.current_stream(tensor.device).synchronize()
    elif tensor.device.type == "cpu":
        kind, index = 0, 0
    else:
        raise ValueError(f"khorovod: tensors on device {tensor.device} are not supported")
    return _khorovod.TensorView(
        tensor.data_ptr(), _dtype_code(tensor), list(tensor.shape), kind, index
    )


def _op_code(op, average):
    if average is not None:
        if op is not None:
            raise ValueError("khorovod: pass either op or the deprecated average, not both")
        return Average if average else Sum
    if op is None:
        return Average
    if op not in (Sum, Average, Min, Max, Product, Adasum):
        raise ValueError(f"khorovod: unknown reduce op {op!r}")
    return op


def _check_adasum(tensors, op, ps):
    """Horovod's refusals for op=Adasum (horovod/torch/mpi_ops.py), raised
    before anything is submitted; the runtime checks the same again."""
    if op != Adasum:
        return
    if ps:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    runtime = CONTEXT.runtime()
    for t in tensors:
        # CUDA tensors: Horovod's NCCL semantics, Adasum across hosts of the
        # hosts' sums (runtime core/device_adasum.h); hosts with different
        # rank counts are refused by the runtime, which sees every host.
        hosts = runtime.cross_size() if t.is_cuda else runtime.size()
        if hosts & (hosts - 1):
            raise NotImplementedError(
                "Running GPU Adasum with non-power of 2 nodes is not supported yet."
                if t.is_cuda
                else "Running Adasum with non-power of 2 ranks is not supported yet."
            )
        if t.dtype not in (torch.float16, torch.float32, torch.float64):
            raise ValueError(
                f"khorovod: Adasum supports float16, float32 and float64 tensors, not {t.dtype}"
            )


def _check_reduce_dtype(tensor, op):
    if tensor.dtype == torch.bool and op == Average:
        raise ValueError(
            "khorovod: op=Average is undefined for bool tensors; use Sum "
            "(logical or), Min, Max or Product (logical and)"
        )


def _submitted(handle):
    """Raises at once what the runtime refused at submission (a name still
    in flight, a bad argument), as Horovod raises from the submitting call;
    otherwise returns ``handle``."""
    if handle.ready():
        status = handle.wait()
        if _NAMES_AT_SUBMIT.get(status[0]):
            raise_for_status(status)
    return handle


_NAMES_AT_SUBMIT = {
    code: True
    for name, code in _khorovod.STATUS_CODES.items()
    if name in ("INVALID_ARGUMENT", "ALREADY_EXISTS")
}


class Handle:
    """An operation in flight. Keeps its tensors alive; ``finish`` turns the
    runtime's completion into the Python result."""

    __slots__ = ("_handle", "_keep", "_finish", "_done", "_result", "_error")

    def __init__(self, handle, keep, finish):
        self._handle = _submitted(handle)
        self._keep = keep
        self._finish = finish
        self._done = False
        self._result = None
        self._error = None

    def __del__(self):
        # Dropped while in flight: the runtime may still write into these
        # tensors, so they outlive this Handle (see the module docstring).
        try:
            if self._keep is not None and not self._handle.ready():
                CONTEXT.adopt_orphan(self._handle, self._keep)
        except Exception:  # noqa: BLE001 - interpreter teardown; nothing to do
            pass

    def ready(self):
        return self._done or self._handle.ready()

    def wait(self):
        """The result; raises the operation's error (again on every call)."""
        if not self._done:
            status = self._handle.wait()
            self._done = True
            try:
                raise_for_status(status)
                self._result = self._finish(self._handle)
            except Exception as e:
                self._error = e
            finally:
                self._keep = None
                self._finish = None
        if self._error is not None:
            raise self._error
        return self._result


class GroupHandle:
    """Several operations submitted together; the result is their list."""

    __slots__ = ("_handles",)

    def __init__(self, handles):
        self._handles = list(handles)

    def ready(self):
        return all(h.ready() for h in self._handles)

    def wait(self):
        results, first_error = [], None
        for h in self._handles:  # every buffer settles before anything is raised
            try:
                results.append(h.wait())
            except Exception as e:  # noqa: BLE001
                first_error = first_error or e
        if first_error is not None:
            raise first_error
        return results


def poll(handle):
    """True once the operation behind ``handle`` finished (never blocks)."""
    return handle.ready()


def synchronize(handle):
    """Waits for ``handle`` and returns its result; raises on failure."""
    return handle.wait()


def _name(name, prefix, ps=0):
    # Horovod names an empty name like a missing one (GetOpName's "noname").
    return name if name else CONTEXT.auto_name(prefix, ps)


# --- allreduce ---------------------------------------------------------------


def _allreduce_into(tensor, output, name, op, prescale_factor, postscale_factor, ps=0):
    """Reduces contiguous ``tensor`` into contiguous ``output`` (in set ``ps``)."""
    _check_reduce_dtype(tensor, op)
    _check_adasum([tensor], op, ps)
    if ps:
        return CONTEXT.runtime().allreduce_async_in_set(
            name,
            _view(tensor),
            _view(output),
            op,
            float(prescale_factor),
            float(postscale_factor),
            ps,
        )
    return CONTEXT.runtime().allreduce_async(
        name, _view(tensor), _view(output), op, float(prescale_factor), float(postscale_factor)
    )


def allreduce_async(
    tensor,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    """Out-of-place allreduce; synchronize() returns the reduced tensor."""
    ps = process_sets.resolve(process_set)
    op = _op_code(op, average)
    src = tensor.detach().contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    h = _allreduce_into(
        src, out, _name(name, "allreduce", ps), op, prescale_factor, postscale_factor, ps
    )
    return Handle(h, (src, out), lambda _h: out)


def allreduce_async_(
    tensor,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    """In-place allreduce; synchronize() returns ``tensor`` holding the result."""
    ps = process_sets.resolve(process_set)
    op = _op_code(op, average)
    in_place = tensor.is_contiguous()
    buf = tensor.detach() if in_place else tensor.detach().contiguous()
    h = _allreduce_into(
        buf, buf, _name(name, "allreduce", ps), op, prescale_factor, postscale_factor, ps
    )

    def finish(_h):
        if not in_place:
            tensor.data.copy_(buf)
        return tensor

    return Handle(h, (tensor, buf), finish)


def allreduce_(
    tensor,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    if isinstance(tensor, torch.Tensor) and not tensor.is_sparse and tensor.is_contiguous():
        # One runtime call that submits and waits with the GIL released: no
        # Handle, and the runtime counts this thread as blocked before it
        # queues the request, so the background thread starts at once.
        ps = process_sets.resolve(process_set)
        op = _op_code(op, average)
        _check_reduce_dtype(tensor, op)
        buf = tensor.detach()
        view = _view(buf)
        raise_for_status(
            CONTEXT.runtime().allreduce(
                _name(name, "allreduce", ps),
                view,
                view,
                op,
                float(prescale_factor),
                float(postscale_factor),
                ps,
            )
        )
        return tensor
    return synchronize(
        allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set)
    )


def _group_names(name, prefix, count, ps=0):
    if count == 0:
        raise ValueError(f"khorovod: {prefix} needs at least one tensor")
    base = _name(name, prefix, ps)
    return [f"{base}.{i}" for i in range(count)]


def _grouped(tensors, outputs, name, op, prescale_factor, postscale_factor, ps=0):
    names = _group_names(name, "grouped_allreduce", len(tensors), ps)
    _check_adasum(tensors, op, ps)
    for t in tensors:
        _check_reduce_dtype(t, op)
    args = (
        names,
        [_view(t) for t in tensors],
        [_view(o) for o in outputs],
        op,
        float(prescale_factor),
        float(postscale_factor),
    )
    if ps:
        return CONTEXT.runtime().grouped_allreduce_async_in_set(*args, ps)
    return CONTEXT.runtime().grouped_allreduce_async(*args)


def grouped_allreduce_async(
    tensors,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    """Reduces a list of tensors together (one fused step); returns a list."""
    ps = process_sets.resolve(process_set)
    op = _op_code(op, average)
    srcs = [t.detach().contiguous() for t in tensors]
    outs = [torch.empty_like(s, memory_format=torch.contiguous_format) for s in srcs]
    h = _grouped(srcs, outs, name, op, prescale_factor, postscale_factor, ps)
    return Handle(h, (srcs, outs), lambda _h: outs)


def grouped_allreduce_async_(
    tensors,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    ps = process_sets.resolve(process_set)
    op = _op_code(op, average)
    in_place = [t.is_contiguous() for t in tensors]
    bufs = [t.detach() if c else t.detach().contiguous() for t, c in zip(tensors, in_place)]
    h = _grouped(bufs, bufs, name, op, prescale_factor, postscale_factor, ps)

    def finish(_h):
        for t, b, c in zip(tensors, bufs, in_place):
            if not c:
                t.data.copy_(b)
        return list(tensors)

    return Handle(h, (list(tensors), bufs), finish)


def grouped_allreduce_(
    tensors,
    average=None,
    name=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
):
    return synchronize(
        grouped_allreduce_async_(
            tensors, average, name, op, prescale_factor, postscale_factor, process_set
        )
    )
