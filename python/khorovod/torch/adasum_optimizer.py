"""DistributedOptimizer(op=Adasum): Horovod's delta optimizer
(horovod/torch/optimizer.py, _DistributedAdasumOptimizer).

Contract: ``step()`` first applies the wrapped optimizer to this rank's own
gradients, then combines every parameter's change (new - old) across ranks
with Adasum (runtime core/adasum.h, host tensors, power-of-two world size)
and sets each parameter to old + the combined change, so every rank ends
the step with the same parameters. Horovod submits each parameter's
allreduce from a backward hook as soon as its gradient is ready; this
wrapper does it all in step(), which gives the same result (the standard
optimizers update each parameter from its own gradient and state). Names
are Horovod's (``allreduce.noname.<i>`` without ``named_parameters``).
``synchronize()`` does nothing and ``skip_synchronize()`` raises, as in
Horovod. Gradients of several backward passes accumulate in ``p.grad``
until step(), as with torch.

Thread-safety: as a torch optimizer, one training thread.
"""

import contextlib

import torch

from . import mpi_ops
from .compression import Compression


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    # Mixed into a subclass of the user's optimizer class (see optimizer.py).

    def __init__(self, params, named_parameters, compression, backward_passes_per_step):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self.backward_passes_per_step = int(backward_passes_per_step)
        if named_parameters is not None:
            names = {p: n for n, p in named_parameters}
        else:
            names = {
                p: f"allreduce.noname.{i}"
                for group in self.param_groups
                for i, p in enumerate(group["params"])
            }
        self._parameter_names = names
        self._names = {
            p: n if n.startswith("allreduce.") else f"allreduce.{n}" for p, n in names.items()
        }
        mpi_ops.CONTEXT.runtime()  # NotInitializedError before init()

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = int(passes)

    def synchronize(self):
        pass

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise AssertionError(
            "Skipping synchronization is not supported when using Adasum optimizer."
        )
        yield  # pragma: no cover - a generator, as contextmanager requires

    def step(self, closure=None):
        params = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        starts = [p.detach().clone() for p in params]
        loss = super(self.__class__, self).step(closure)
        handles = []
        with torch.no_grad():
            for p, start in zip(params, starts):
                delta, ctx = self._compression.compress(p.detach() - start)
                handles.append(
                    (mpi_ops.allreduce_async_(delta, name=self._names[p], op=mpi_ops.Adasum), ctx)
                )
            for p, start, (handle, ctx) in zip(params, starts, handles):
                delta = self._compression.decompress(mpi_ops.synchronize(handle), ctx)
                p.copy_(start + delta)
        return loss


def make(optimizer, named_parameters, compression=Compression.none, backward_passes_per_step=1):
    cls = type(
        optimizer.__class__.__name__,
        (optimizer.__class__,),
        dict(_DistributedAdasumOptimizer.__dict__),
    )
    wrapped = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)
    wrapped.state = optimizer.state
    return wrapped
