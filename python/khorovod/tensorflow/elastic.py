"""Elastic training with TensorFlow (horovod.tensorflow.elastic): the
states that hold variables, and ``run``.

Contract: as khorovod.elastic (commit, restore, re-form, sync), plus:
- ``run`` turns the ops' tf.errors.UnknownError for a failed or re-forming
  peer (message "khorovod UNAVAILABLE:"/"khorovod ABORTED:") into
  HorovodInternalError, so the job rolls back and re-forms as Horovod's
  does for its own ops' errors.
- TensorFlowState(variables, **kwargs): save() copies the variables'
  values, restore() assigns them back, sync() broadcasts them (and the
  plain attributes) from rank 0.
- TensorFlowKerasState(model, optimizer, **kwargs): the same over the
  model's and the optimizer's variables. Keras creates an optimizer's
  variables (momentum and other slots) on its first step, so a process
  that has not trained yet (a replacement joining a running job) has fewer;
  sync() builds them first, so every rank broadcasts the same list.
Thread-safety: a State belongs to the training thread.
"""

import functools

import numpy as np
import tensorflow as tf

from .. import elastic as _elastic
from .._errors import HorovodInternalError
from ..elastic import ObjectState, State  # noqa: F401  (Horovod's names here)
from . import functions

_RECOVERABLE = ("khorovod UNAVAILABLE:", "khorovod ABORTED:")


def _internal_errors(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except tf.errors.UnknownError as e:
            if any(marker in (e.message or "") for marker in _RECOVERABLE):
                code = "UNAVAILABLE" if "UNAVAILABLE" in e.message else "ABORTED"
                raise HorovodInternalError(code, e.message) from e
            raise
    return wrapper


def run(func=None, *, reset_limit=100):
    """``@hvd.elastic.run def train(state, ...)`` for TensorFlow code."""
    if func is None:
        return functools.partial(run, reset_limit=reset_limit)
    return _elastic.run(_internal_errors(func), reset_limit=reset_limit)


class _VariablesState(ObjectState):
    """Variables plus plain attributes; subclasses say which variables."""

    def __init__(self, **kwargs):
        self._saved_values = None
        super().__init__(bcast_object=functions.broadcast_object, **kwargs)

    def _variables(self):
        raise NotImplementedError

    def save(self):
        self._saved_values = [v.numpy() for v in self._variables()]
        super().save()

    def restore(self):
        variables = self._variables()
        if self._saved_values is not None and len(self._saved_values) == len(variables):
            for var, value in zip(variables, self._saved_values):
                var.assign(value)
        super().restore()

    def sync(self):
        """Rank 0's variables and attributes everywhere; they become the
        saved state too (as Horovod's), so a restore before the next
        commit returns to them."""
        variables = self._variables()
        if variables:
            functions.broadcast_variables(variables, root_rank=0)
            self._saved_values = [v.numpy() for v in variables]
        super().sync()

    def synced_bytes(self):
        # tf.Variable and Keras 3 variables alike (the latter have a tuple
        # shape and a string dtype).
        return sum(int(np.prod(tuple(v.shape))) * tf.as_dtype(v.dtype).size for v in self._variables())


class TensorFlowState(_VariablesState):
    """``variables`` (a list of tf.Variable) and the keyword attributes."""

    def __init__(self, variables=None, session=None, **kwargs):
        if session is not None:
            raise ValueError("khorovod: TensorFlowState takes no TF1 session (eager TensorFlow 2 only)")
        self.variables = list(variables or [])
        super().__init__(**kwargs)

    def _variables(self):
        return self.variables


class TensorFlowKerasState(_VariablesState):
    """A Keras ``model`` and ``optimizer`` (default: the model's) and the
    keyword attributes."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        del backend
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        super().__init__(**kwargs)

    def sync(self):
        self._build_optimizer()
        super().sync()

    def _build_optimizer(self):
        opt, var_list = self.optimizer, self.model.trainable_variables
        if opt is None or not var_list:
            return
        if hasattr(opt, "built"):  # Keras 3
            if not opt.built:
                opt.build(var_list)
        elif hasattr(opt, "_create_all_weights"):  # Keras 2's legacy optimizers; idempotent
            opt._create_all_weights(var_list)
        elif hasattr(opt, "build"):  # Keras 2's optimizers; build() returns at once when built
            opt.build(var_list)

    def _variables(self):
        variables = list(self.model.variables)
        if self.optimizer is not None:
            opt_vars = self.optimizer.variables
            variables += list(opt_vars() if callable(opt_vars) else opt_vars)
        return variables
