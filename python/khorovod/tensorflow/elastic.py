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
  model's and the optimizer's variables. Keras creates an optimizer's slots
  (momentum and the like) on its first step, so sync() first builds the
  optimizer of a rank that has fewer variables than rank 0 (a replacement
  joining trained survivors); counts that still differ raise ValueError on
  that rank.
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
        return sum(
            int(np.prod(tuple(v.shape))) * tf.as_dtype(v.dtype).size for v in self._variables()
        )


class TensorFlowState(_VariablesState):
    """``variables`` (a list of tf.Variable) and the keyword attributes."""

    def __init__(self, variables=None, session=None, **kwargs):
        if session is not None:
            raise ValueError(
                "khorovod: TensorFlowState takes no TF1 session (eager TensorFlow 2 only)"
            )
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

    def _optimizer_variables(self):
        if self.optimizer is None:
            return []
        opt_vars = self.optimizer.variables
        return list(opt_vars() if callable(opt_vars) else opt_vars)

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
        return list(self.model.variables) + self._optimizer_variables()

    def sync(self):
        """As _VariablesState's, after building this rank's optimizer (a Keras
        optimizer creates its slots on its first step, so a newcomer has fewer
        variables than trained survivors and the broadcasts would not pair
        up; building is idempotent on ranks that trained)."""
        self._build_optimizer()
        local = len(self._optimizer_variables())
        root = functions.broadcast_object(local, root_rank=0, name="elastic.optimizer_variables")
        if local != root:
            raise ValueError(
                f"khorovod: this rank's optimizer has {local} variables and rank 0's has {root}; "
                "the elastic state cannot be synchronized (build the optimizer the same way on "
                "every rank, e.g. optimizer.build(model.trainable_variables) before training)"
            )
        super().sync()
