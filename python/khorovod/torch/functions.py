"""Helpers over the collectives: broadcast_parameters,
broadcast_optimizer_state, broadcast_object, allgather_object
(horovod.torch.functions).

Contract:
- broadcast_parameters(params, root_rank): ``params`` is a state_dict (its
  items are taken in sorted key order) or a list (or any iterable) of
  (name, tensor) pairs or of tensors (``list(model.parameters())``), as
  Horovod accepts; every tensor is overwritten in place with root's values. All
  broadcasts are submitted before any is awaited, so the runtime fuses them.
- broadcast_optimizer_state(optimizer, root_rank): after the call every
  rank's optimizer holds root's state_dict (per-parameter slots and
  param_group options such as lr), including state root created lazily in
  step() that other ranks do not have yet. Unlike horovod, which broadcasts
  tensor by tensor after forcing state into existence with a zero-gradient
  step, this sends root's serialized state_dict in one broadcast: no step is
  taken, and optimizers whose state shapes are not known in advance work.
- broadcast_object / allgather_object: any object cloudpickle can
  serialize (lambdas, local classes), as Horovod; with plain pickle when
  cloudpickle is not installed.
All are collective: every rank calls them in the same order (with
``process_set``: every member of the set; ``root_rank`` is a global rank).

Thread-safety: as mpi_ops.
"""

import io

import torch

from .. import _objects
from . import mpi_ops


def broadcast_parameters(params, root_rank=0, process_set=None):
    """Overwrites every tensor in ``params`` with root's values, in place."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = [item if isinstance(item, tuple) else (None, item) for item in params]
        for i, item in enumerate(items):
            if len(item) != 2:
                raise ValueError(
                    "khorovod: broadcast_parameters expects a state_dict, "
                    "(name, tensor) pairs such as model.named_parameters(), "
                    "or tensors such as list(model.parameters())"
                )
            if item[0] is None:
                items[i] = (f"unnamed.{i}", item[1])
    handles = []
    with torch.no_grad():
        for name, p in items:
            if p is None:
                continue
            tensor = p.data if isinstance(p, torch.nn.Parameter) else p
            if not isinstance(tensor, torch.Tensor):
                raise ValueError(
                    f"khorovod: parameter '{name}' is a {type(p).__name__}, not a tensor"
                )
            handles.append(
                mpi_ops.broadcast_async_(
                    tensor, root_rank, name=f"broadcast.param.{name}", process_set=process_set
                )
            )
        first_error = None
        for h in handles:
            try:
                mpi_ops.synchronize(h)
            except Exception as e:  # wait for all buffers before raising
                first_error = first_error or e
    if first_error is not None:
        raise first_error


def broadcast_optimizer_state(optimizer, root_rank=0, model=None, process_set=None):
    """Makes every rank's optimizer state equal to root's."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(
            "khorovod: broadcast_optimizer_state expects a torch.optim.Optimizer, "
            f"got {type(optimizer).__name__}"
        )
    del model  # horovod uses it for parameter names only; the state_dict needs none
    if not optimizer.state_dict()["state"]:
        # Horovod forces state into existence with a step on zero gradients
        # and leaves those zeros in p.grad; we take no step, but leave the
        # same zero gradients, which code written for Horovod may read.
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
                    if isinstance(optimizer, torch.optim.SparseAdam):
                        p.grad = p.grad.to_sparse()
    payload = None
    if mpi_ops.CONTEXT.runtime().rank() == root_rank:
        buf = io.BytesIO()
        torch.save(optimizer.state_dict(), buf)
        payload = buf.getvalue()
    payload = broadcast_object(
        payload, root_rank, name="broadcast.optimizer_state", process_set=process_set
    )
    state = torch.load(io.BytesIO(payload), weights_only=False)  # root's own state_dict
    # Local tensors (parameters) keep their device; the state follows it.
    optimizer.load_state_dict(state)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Returns root's ``obj`` on every rank (pickled over the wire)."""
    return _objects.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=None):
    """Returns the list of every rank's (member's) ``obj``, in rank order."""
    return _objects.allgather_object(obj, name, process_set)
