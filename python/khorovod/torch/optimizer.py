"""DistributedOptimizer: averages gradients across ranks, overlapping the
allreduces with the backward pass (horovod.torch.DistributedOptimizer).

Contract:
- ``DistributedOptimizer(opt, ...)`` returns an optimizer of a subclass of
  ``type(opt)`` over the same param_groups (so isinstance checks,
  state_dict and LR schedulers keep working) and the same per-parameter
  state (horovod's wrapper starts with empty state instead).
- A hook on each parameter's gradient accumulator counts backward passes and,
  on the ``backward_passes_per_step``-th, submits that gradient's allreduce
  at once, while backward continues on the remaining layers.
- ``synchronize()`` submits what the hooks did not (parameters without a
  gradient this step are reduced as zeros, so every rank submits the same
  names), waits for all, and writes the results into ``p.grad``. ``step()``
  calls it unless inside ``with opt.skip_synchronize():`` (the pattern for
  clipping or AMP: ``synchronize(); clip; with skip_synchronize(): step()``).
- op=Average (default) or Sum; ``gradient_predivide_factor`` f splits the
  average into a 1/f scale before the sum and f/size after it.
  compression=Compression.fp16 sends floating-point gradients as float16.
- Sparse gradients (nn.Embedding(sparse=True)): reduced as Horovod does,
  through an allgather of indices and values (sparse.py), or densified
  first with ``sparse_as_dense=True``.
- ``step()`` marks the end of a training step for the worker's metrics
  (step_marks.py: samples from ``batch_size``, KHOROVOD_BATCH_SIZE, or
  inferred from the model's inputs).
- ``num_groups``/``groups`` are accepted and have no effect (the runtime
  fuses whatever is in flight). With ``process_set``, gradients are
  averaged among that set's members only (every member must wrap its
  optimizer with the same set).
- Names are ``allreduce.<name>`` with the names from ``named_parameters``
  (which must name every optimized parameter, uniquely) or
  ``allreduce.noname.<i>`` in param_group order.
- Misuse raises: zero_grad() between backward() and step(), or more
  backward passes than ``backward_passes_per_step`` before step().

Thread-safety: as a torch optimizer, one training thread. Hooks run on the
autograd thread of that backward pass.
"""

import contextlib
import warnings

import torch

from . import mpi_ops, process_sets, sparse, step_marks
from .compression import Compression


class _DistributedOptimizer(torch.optim.Optimizer):
    # Mixed into a subclass of the user's optimizer class; see DistributedOptimizer.

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, sparse_as_dense, batch_size, process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._op = op
        self._predivide = float(gradient_predivide_factor)
        self._sparse_as_dense = bool(sparse_as_dense)
        self._process_set = process_set
        self._step_marks = step_marks.StepMarks(batch_size)
        self.backward_passes_per_step = int(backward_passes_per_step)

        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                dups = sorted({n for n in names if names.count(n) > 1})
                raise ValueError(f"khorovod: parameter names must be unique; repeated: {dups}")
            by_param = {p: n for n, p in named}
            unnamed = [i for i, p in enumerate(all_params) if p not in by_param]
            if unnamed:
                raise ValueError("khorovod: named_parameters does not name every parameter "
                                 f"the optimizer updates (param_group positions {unnamed})")
            self._names = {p: f"allreduce.{by_param[p]}" for p in all_params}
        else:
            self._names = {p: f"allreduce.noname.{i}" for i, p in enumerate(all_params)}

        self._handles = {}       # param -> (Handle or None, compression ctx, sent tensor)
        self._delay = {p: self.backward_passes_per_step for p in all_params}
        self._grad_accs = []     # keeps the accumulator nodes (and their hooks) alive
        self._synchronized = False
        self._should_synchronize = True
        mpi_ops.CONTEXT.runtime()  # NotInitializedError before init()
        self._register_hooks()

    # --- hooks ------------------------------------------------------------
    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    # The AccumulateGrad node of p: its hook runs once p.grad
                    # holds this pass's gradient.
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(acc)

    def _make_hook(self, p):
        def hook(*_unused):
            if p in self._handles and self._handles[p][0] is not None and self._delay[p] <= 0:
                raise AssertionError(
                    "khorovod: gradients were computed more than backward_passes_per_step "
                    f"({self.backward_passes_per_step}) times before step(); raise "
                    "backward_passes_per_step to accumulate gradients locally")
            self._delay[p] -= 1
            entry = (None, None, None)
            if self._delay[p] == 0:
                entry = self._allreduce_grad_async(p)
            self._handles[p] = entry
        return hook

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        if p.grad.is_sparse:
            if not self._sparse_as_dense:
                handle = sparse.sparse_allreduce_async(p.grad, name=self._names[p], op=self._op,
                                                       process_set=self._process_set)
                return handle, None, None
            p.grad = p.grad.to_dense()
        prescale, postscale = 1.0, 1.0
        if self._op == mpi_ops.Average and self._predivide != 1.0:
            prescale, postscale = 1.0 / self._predivide, self._predivide
        sent, ctx = self._compression.compress(p.grad)
        # In place on the gradient itself, or on its compressed copy.
        handle = mpi_ops.allreduce_async_(sent, name=self._names[p], op=self._op,
                                          prescale_factor=prescale, postscale_factor=postscale,
                                          process_set=self._process_set)
        return handle, ctx, sent

    # --- the public surface --------------------------------------------------
    def synchronize(self):
        """Finishes every gradient allreduce of this step into p.grad."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad and (p not in self._handles or self._handles[p][0] is None):
                    self._handles[p] = self._allreduce_grad_async(p)
        first_error = None
        for p, (handle, ctx, sent) in self._handles.items():
            try:
                reduced = mpi_ops.synchronize(handle)
                if sent is None:  # a sparse gradient: the result replaces it
                    p.grad = reduced
                elif sent is not p.grad:
                    p.grad.copy_(self._compression.decompress(reduced, ctx))
            except Exception as e:  # let every buffer settle before raising
                first_error = first_error or e
        self._handles.clear()
        for p in self._delay:
            self._delay[p] = self.backward_passes_per_step
        if first_error is not None:
            raise first_error
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (call synchronize() first)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized and not self._handles:
                # Reducing the reduced gradients again would be wrong for
                # op=Sum; use what synchronize() produced.
                warnings.warn("khorovod: optimizer.step() called after optimizer.synchronize() "
                              "without skip_synchronize(); using the synchronized gradients",
                              stacklevel=2)
            else:
                self.synchronize()
        self._synchronized = False
        result = super(self.__class__, self).step(closure)
        self._step_marks.end_step()
        return result

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(
                "khorovod: optimizer.zero_grad() was called after loss.backward() but before "
                "optimizer.step() or optimizer.synchronize(); call zero_grad() before backward")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=mpi_ops.Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=None, batch_size=None):
    """Wraps ``optimizer`` so that step() applies gradients averaged over all ranks."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError("khorovod: DistributedOptimizer expects a torch.optim.Optimizer, "
                         f"got {type(optimizer).__name__}")
    if op == mpi_ops.Adasum:
        raise NotImplementedError("khorovod: op=Adasum is not implemented; use op=Average "
                                  "or op=Sum (see docs/python.md)")
    if op not in (mpi_ops.Average, mpi_ops.Sum):
        raise ValueError("khorovod: DistributedOptimizer supports op=Average or op=Sum")
    if gradient_predivide_factor != 1.0 and op != mpi_ops.Average:
        raise ValueError("khorovod: gradient_predivide_factor needs op=Average")
    if gradient_predivide_factor <= 0:
        raise ValueError("khorovod: gradient_predivide_factor must be positive")
    if int(backward_passes_per_step) < 1:
        raise ValueError("khorovod: backward_passes_per_step must be at least 1")
    process_sets.resolve(process_set)
    del num_groups, groups  # grouping only steers fusion, which the runtime does itself
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    wrapped = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
                  op, gradient_predivide_factor, sparse_as_dense, batch_size, process_set)
    # Keep what opt accumulated so far (horovod starts from empty state).
    wrapped.state = optimizer.state
    return wrapped
