"""Training-step marks for a torch job, with no change to the script:
DistributedOptimizer.step() ends a step and reports the samples this rank
processed in it, which feed the worker's step, throughput and scaling
efficiency metrics (docs/observability.md).

Contract: the samples of a step are, in order of precedence, the
``batch_size`` given to DistributedOptimizer, ``KHOROVOD_BATCH_SIZE``, or
inferred: the first dimension of the first tensor argument of every
outermost module call made in training mode with autograd recording since
the previous step (so gradient accumulation over k forward passes counts k
batches). Inference uses torch's global module hooks, registered while the
StepMarks object lives.

Thread-safety: one training thread, as the optimizer.
"""

import weakref

import torch

from .._batch_size import fixed_batch_size
from .._context import CONTEXT


class StepMarks:
    def __init__(self, batch_size=None):
        self._fixed = fixed_batch_size(batch_size)
        self._samples = 0
        self._depth = 0
        self._hooks = []
        if self._fixed is None:
            me = weakref.ref(self)  # the global hooks must not keep the optimizer alive

            def pre(module, args):
                marks = me()
                if marks is not None:
                    marks._enter(module, args)

            def post(module, args, output):
                marks = me()
                if marks is not None:
                    marks._depth = max(0, marks._depth - 1)

            self._hooks = [
                torch.nn.modules.module.register_module_forward_pre_hook(pre),
                torch.nn.modules.module.register_module_forward_hook(post),
            ]
            weakref.finalize(self, StepMarks._remove, list(self._hooks))

    @staticmethod
    def _remove(hooks):
        for h in hooks:
            h.remove()

    def _enter(self, module, args):
        if self._depth == 0 and module.training and torch.is_grad_enabled() and args:
            first = args[0]
            if isinstance(first, torch.Tensor) and first.dim() > 0:
                self._samples += int(first.shape[0])
        self._depth += 1

    def end_step(self):
        samples = self._fixed if self._fixed is not None else self._samples
        self._samples = 0
        self._depth = 0
        CONTEXT.runtime().end_step(samples)
