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
  through an allgather of indices and values (sparse.py); with
  ``sparse_as_dense=True`` densified for the allreduce and made sparse again
  before the update (so SparseAdam still gets a sparse gradient), as Horovod.
- ``step()`` marks the end of a training step for the worker's metrics
  (step_marks.py: samples from ``batch_size``, KHOROVOD_BATCH_SIZE, or
  inferred from the model's inputs).
- ``groups`` (an int n, or a list of lists of parameters; ``num_groups`` is
  its deprecated alias, as in Horovod): the parameters of one group are
  reduced together in one grouped allreduce once all of their gradients
  are ready (n: the trainable parameters in param_group order split into n
  contiguous groups; a list: each inner list a group, every other
  parameter a group of its own).
- ``process_set``: gradients are averaged among that set's members only
  (every member wraps its optimizer with the same set); on a rank outside
  the set no hook is registered and ``synchronize()`` reduces nothing, so
  ``step()`` applies the local gradients, as Horovod does.
- Names are Horovod's (``_parameter_names``: the names from
  ``named_parameters``, which must name every optimized parameter uniquely,
  else ``allreduce.noname.<group>.<index>``); the collectives are named
  ``allreduce.<name>`` (the noname ones as they are).
- ``set_backward_passes_per_step(n)`` changes the accumulation count and
  restarts the count; ``load_state_dict`` drops pending handles (Horovod).
- Misuse raises: zero_grad() between backward() and step(), or more
  backward passes than ``backward_passes_per_step`` before step().

Thread-safety: as a torch optimizer, one training thread. Hooks run on the
autograd thread of that backward pass.
"""

import contextlib
import warnings

import torch

from . import adasum_optimizer, mpi_ops, process_sets, sparse, step_marks
from .compression import Compression


def _parameter_names(param_groups, named_parameters):
    """Horovod's names: the user's (unique, covering every parameter) or
    ``allreduce.noname.<group>.<index>``."""
    if named_parameters is None:
        return {
            p: f"allreduce.noname.{i}.{j}"
            for i, group in enumerate(param_groups)
            for j, p in enumerate(group["params"])
        }
    named = list(named_parameters)
    if any(not isinstance(item, tuple) for item in named):
        raise ValueError(
            "khorovod: named_parameters should be a sequence of tuples "
            "(name, parameter), usually produced by model.named_parameters()"
        )
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        dups = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(
            f"khorovod: parameter names in named_parameters must be unique; "
            f"found duplicates: {', '.join(dups)}"
        )
    by_param = {p: n for n, p in named}
    all_params = [p for group in param_groups for p in group["params"]]
    unnamed = [i for i, p in enumerate(all_params) if p not in by_param]
    if unnamed:
        raise ValueError(
            "khorovod: named_parameters was specified, but one or more model "
            f"parameters were not named (param_group positions {unnamed})"
        )
    return {p: by_param[p] for p in all_params}


def _form_groups(trainable, groups):
    """Parameter -> its group (a tuple), or {} without groups."""
    if groups is None:
        return {}
    if isinstance(groups, list):
        seen, formed = set(), []
        for inner in groups:
            members = tuple(p for p in inner if p in trainable)
            seen.update(members)
            if members:
                formed.append(members)
        formed += [(p,) for p in trainable if p not in seen]
    else:
        n = min(int(groups), len(trainable)) or 1
        d, r = divmod(len(trainable), n)  # Horovod's split_list
        formed = [
            tuple(trainable[i * d + min(i, r) : (i + 1) * d + min(i + 1, r)]) for i in range(n)
        ]
    return {p: g for g in formed if g for p in g}


def _check_groups(groups):
    if groups is None:
        return
    if not (isinstance(groups, list) or (isinstance(groups, int) and groups > 0)):
        raise ValueError(
            "khorovod: groups should be a non-negative integer or a list of list of torch.Tensor"
        )
    if isinstance(groups, list):
        seen = set()
        for inner in groups:
            for p in inner:
                if not isinstance(p, torch.Tensor):
                    raise ValueError("khorovod: groups must consist of torch.Tensor")
                if p in seen:
                    raise ValueError("khorovod: a parameter can only appear once in groups")
                seen.add(p)


class _DistributedOptimizer(torch.optim.Optimizer):
    # Mixed into a subclass of the user's optimizer class; see DistributedOptimizer.

    def __init__(
        self,
        params,
        named_parameters,
        compression,
        backward_passes_per_step,
        op,
        gradient_predivide_factor,
        groups,
        sparse_as_dense,
        batch_size,
        process_set,
    ):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._op = op
        self.op = op
        self._predivide = float(gradient_predivide_factor)
        self._sparse_as_dense = bool(sparse_as_dense)
        self._process_set = process_set
        self._step_marks = step_marks.StepMarks(batch_size)
        self.backward_passes_per_step = int(backward_passes_per_step)

        self._parameter_names = _parameter_names(self.param_groups, named_parameters)
        self._names = {
            p: n if n.startswith("allreduce.") else f"allreduce.{n}"
            for p, n in self._parameter_names.items()
        }
        self._trainable = [
            p for group in self.param_groups for p in group["params"] if p.requires_grad
        ]
        self._p_to_group = _form_groups(self._trainable, groups)
        self._group_ready = {g: 0 for g in set(self._p_to_group.values())}

        # param (or group tuple) -> (Handle or None, compression ctxs, sent tensors)
        self._handles = {}
        self._delay = {p: self.backward_passes_per_step for p in self._parameter_names}
        self._grad_accs = []  # keeps the accumulator nodes (and their hooks) alive
        self._synchronized = False
        self._should_synchronize = True
        mpi_ops.CONTEXT.runtime()  # NotInitializedError before init()
        ps = process_set if process_set is not None else process_sets.global_process_set
        self._included = ps.included()
        if self._included:
            self._register_hooks()

    # --- hooks ------------------------------------------------------------
    def _register_hooks(self):
        for p in self._trainable:
            # The AccumulateGrad node of p: its hook runs once p.grad holds
            # this pass's gradient.
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._grad_accs.append(acc)

    def _make_hook(self, p):
        def hook(*_unused):
            if p in self._handles and self._handles[p][0] is not None and self._delay[p] <= 0:
                raise AssertionError(
                    "khorovod: gradients were computed more than backward_passes_per_step "
                    f"({self.backward_passes_per_step}) times before step(); raise "
                    "backward_passes_per_step to accumulate gradients locally"
                )
            self._delay[p] -= 1
            entry = (None, None, None)
            if self._delay[p] == 0:
                group = self._p_to_group.get(p)
                if group is not None:
                    self._group_ready[group] += 1
                    if self._group_ready[group] == len(group):
                        self._submit_group(group)
                        return
                else:
                    entry = self._allreduce_grad_async(p)
            self._handles[p] = entry

        return hook

    def _scales(self):
        if self._op == mpi_ops.Average and self._predivide != 1.0:
            return 1.0 / self._predivide, self._predivide
        return 1.0, 1.0

    def _dense_grad(self, p):
        if p.grad is None:
            # Another rank may have a gradient for p (dynamic graphs): every
            # rank submits the same names, zeros where none was computed.
            p.grad = torch.zeros_like(p)
        return p.grad.to_dense() if p.grad.is_sparse else p.grad

    def _allreduce_grad_async(self, p):
        if p.grad is not None and p.grad.is_sparse and not self._sparse_as_dense:
            handle = sparse.sparse_allreduce_async(
                p.grad, name=self._names[p], op=self._op, process_set=self._process_set
            )
            return handle, None, None
        prescale, postscale = self._scales()
        sent, ctx = self._compression.compress(self._dense_grad(p))
        # In place on the gradient itself, or on its compressed/dense copy.
        handle = mpi_ops.allreduce_async_(
            sent,
            name=self._names[p],
            op=self._op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            process_set=self._process_set,
        )
        return handle, ctx, sent

    def _submit_group(self, group):
        prescale, postscale = self._scales()
        pairs = [self._compression.compress(self._dense_grad(p)) for p in group]
        sent = [s for s, _ in pairs]
        handle = mpi_ops.grouped_allreduce_async_(
            sent,
            name=self._names[group[0]],
            op=self._op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            process_set=self._process_set,
        )
        for p in group:
            self._handles.pop(p, None)
        self._handles[group] = (handle, [c for _, c in pairs], sent)
        self._group_ready[group] = 0

    def _store(self, p, reduced, ctx, sent):
        """Writes one reduced gradient into p.grad (sparse again if it was)."""
        if sent is None:  # a sparse allreduce: the result replaces the gradient
            p.grad = reduced
            return
        if sent is p.grad:
            return  # reduced in place
        value = self._compression.decompress(reduced, ctx)
        if p.grad.is_sparse:
            p.grad = value.to_sparse()
        else:
            p.grad.copy_(value)

    # --- the public surface --------------------------------------------------
    def synchronize(self):
        """Finishes every gradient allreduce of this step into p.grad."""
        if not self._included:
            self._synchronized = True
            return
        submitted = set()
        for key, (handle, _, _) in self._handles.items():
            if handle is not None:
                submitted.update(key if isinstance(key, tuple) else (key,))
        for p in self._trainable:
            if p in submitted:
                continue
            group = self._p_to_group.get(p)
            if group is not None:
                self._submit_group(group)
                submitted.update(group)
            else:
                self._handles[p] = self._allreduce_grad_async(p)
        first_error = None
        for key, (handle, ctx, sent) in list(self._handles.items()):
            if handle is None:
                continue
            try:
                reduced = mpi_ops.synchronize(handle)
                if isinstance(key, tuple):
                    for p, r, c, s in zip(key, reduced, ctx, sent):
                        self._store(p, r, c, s)
                else:
                    self._store(key, reduced, ctx, sent)
            except Exception as e:  # let every buffer settle before raising
                first_error = first_error or e
        self._reset_counts()
        if first_error is not None:
            raise first_error
        self._synchronized = True

    def _reset_counts(self):
        self._handles.clear()
        for p in self._delay:
            self._delay[p] = self.backward_passes_per_step
        for g in self._group_ready:
            self._group_ready[g] = 0

    def set_backward_passes_per_step(self, passes):
        """Changes how many backward passes are accumulated before reducing."""
        if int(passes) < 1:
            raise ValueError("khorovod: backward_passes_per_step must be > 0")
        self.backward_passes_per_step = int(passes)
        for p in self._delay:
            self._delay[p] = self.backward_passes_per_step

    def load_state_dict(self, *args, **kwargs):
        self._reset_counts()
        self._synchronized = False
        self._should_synchronize = True
        super(self.__class__, self).load_state_dict(*args, **kwargs)

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
                # Horovod's warning. Reducing the reduced gradients again
                # would be wrong for op=Sum; use what synchronize() produced.
                warnings.warn(
                    "optimizer.step() called without optimizer.skip_synchronize() "
                    "context after optimizer.synchronize(). This can cause training "
                    "slowdown. You may want to consider using "
                    "optimizer.skip_synchronize() context if you use "
                    "optimizer.synchronize() in your code.",
                    stacklevel=2,
                )
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
                "optimizer.step() or optimizer.synchronize(); call zero_grad() before backward"
            )
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(
    optimizer,
    named_parameters=None,
    compression=Compression.none,
    backward_passes_per_step=1,
    op=mpi_ops.Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    sparse_as_dense=False,
    process_set=None,
    batch_size=None,
):
    """Wraps ``optimizer`` so that step() applies gradients averaged over all ranks."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(
            "khorovod: DistributedOptimizer expects a torch.optim.Optimizer, "
            f"got {type(optimizer).__name__}"
        )
    if op not in (mpi_ops.Average, mpi_ops.Sum, mpi_ops.Adasum):
        raise ValueError("khorovod: DistributedOptimizer supports op=Average, Sum or Adasum")
    if gradient_predivide_factor != 1.0 and op != mpi_ops.Average:
        raise ValueError("khorovod: gradient_predivide_factor not supported with op != Average")
    if gradient_predivide_factor <= 0:
        raise ValueError("khorovod: gradient_predivide_factor must be positive")
    if int(backward_passes_per_step) < 1:
        raise ValueError("khorovod: backward_passes_per_step must be > 0")
    if num_groups != 0:
        warnings.warn(
            "Parameter `num_groups` has been replaced by `groups` and will be removed in v0.23.0.",
            DeprecationWarning,
            stacklevel=2,
        )
        if groups is None:
            groups = num_groups
    _check_groups(groups)
    ps = process_sets.resolve(process_set)
    if op == mpi_ops.Adasum and mpi_ops.CONTEXT.runtime().size() > 1:
        # Horovod's delta optimizer (adasum_optimizer.py); at size 1 Horovod
        # uses the plain wrapper, and so does this.
        if ps:
            raise NotImplementedError("Adasum does not support non-global process sets yet.")
        return adasum_optimizer.make(
            optimizer, named_parameters, compression, backward_passes_per_step
        )
    cls = type(
        optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__)
    )
    wrapped = cls(
        optimizer.param_groups,
        named_parameters,
        compression,
        backward_passes_per_step,
        op,
        gradient_predivide_factor,
        groups,
        sparse_as_dense,
        batch_size,
        process_set,
    )
    # Keep what opt accumulated so far (horovod starts from empty state).
    wrapped.state = optimizer.state
    return wrapped
