"""The Keras 2 (tf-keras, TF_USE_LEGACY_KERAS=1) half of the distributed
Keras optimizer: where Horovod's horovod._keras hooks its reduction into
Keras 2's optimizers, so scripts and tests written against it (which call
``_compute_gradients``, read ``_agg_helper``) behave the same.

Contract (Horovod's):
- gradients are reduced where Keras 2 computes them: ``compute_gradients``
  (tf-keras' current optimizers; ``minimize`` and model.fit call it),
  ``_compute_gradients`` (the legacy OptimizerV2's) and ``get_gradients``
  (graph-mode Keras); ``apply_gradients`` applies what it is given.
- with backward_passes_per_step > 1 the reduction goes through
  gradient_aggregation.LocalGradientAggregationHelper (``_agg_helper``):
  gradients are accumulated and reduced every backward_passes_per_step
  passes, and ``apply_gradients`` applies only on those passes.
- ``register_local_var`` keeps a variable's gradient local (divided by the
  set's size when scale_local_gradients), with or without aggregation.
- every ``apply_gradients`` call (each backward pass) ends a training step
  for the worker's metrics (step_marks.py).
``optimizer_attrs`` returns the methods for the subclass that
khorovod.tensorflow._keras builds; ``reduce_fn`` is its cross-rank
reduction of (grads, variables).
Thread-safety: an optimizer belongs to one training loop.
"""

import tensorflow as tf

from . import step_marks
from .gradient_aggregation import LocalGradientAggregationHelper


def _reduced_pairs(self, pairs):
    pairs = list(pairs)
    grads = [g for g, _ in pairs]
    variables = [v for _, v in pairs]
    return list(zip(self._khorovod_reduce_grads(grads, variables), variables))


def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
    base = super(self._khorovod_class, self)
    tape = tf.GradientTape() if tape is None else tape
    if hasattr(base, "_compute_gradients"):  # the legacy OptimizerV2
        pairs = base._compute_gradients(loss, var_list, grad_loss, tape=tape)
    else:
        pairs = base.compute_gradients(loss, var_list, tape=tape)
    return _reduced_pairs(self, pairs)


def _compute_gradients_public(self, loss, var_list, tape=None):
    return self._compute_gradients(loss, var_list, None, tape)


def _get_gradients(self, loss, params):
    grads = super(self._khorovod_class, self).get_gradients(loss, params)
    return self._khorovod_reduce_grads(grads, params)


def _apply_gradients(self, grads_and_vars, *args, **kwargs):
    base_apply = super(self._khorovod_class, self).apply_gradients
    helper = self._agg_helper
    if helper is None:
        result = base_apply(grads_and_vars, *args, **kwargs)
    else:
        pairs = list(grads_and_vars)  # a zip is read by both branches
        result = helper.apply_gradients(lambda: base_apply(pairs, *args, **kwargs), self)
    step_marks.end_step(self._khorovod_batch_size)
    return result


def _reduce_grads(self, grads, variables):
    if self._agg_helper is not None:
        return self._agg_helper.compute_gradients(tuple(grads), tuple(variables))
    return self._khorovod_reduce(grads, variables)


def optimizer_attrs(
    reduce_fn, backward_passes_per_step, sparse_as_dense, average_aggregated_gradients
):
    """The Keras 2 methods and fields of a distributed optimizer class;
    ``reduce_fn(optimizer, grads, variables)`` is the cross-rank reduction."""

    def agg_helper(self):
        # Made on first use, per instance (from_config builds new ones), and
        # kept out of Keras' attribute tracking.
        if backward_passes_per_step <= 1:
            return None
        helper = self.__dict__.get("_khorovod_agg_helper")
        if helper is None:
            helper = LocalGradientAggregationHelper(
                backward_passes_per_step,
                lambda g, v: reduce_fn(self, g, v),
                sparse_as_dense,
                average_aggregated_gradients,
            )
            object.__setattr__(self, "_khorovod_agg_helper", helper)
        return helper

    return {
        "_agg_helper": property(agg_helper),
        "_khorovod_reduce": reduce_fn,
        "_khorovod_reduce_grads": _reduce_grads,
        "compute_gradients": _compute_gradients_public,
        "_compute_gradients": _compute_gradients,
        "get_gradients": _get_gradients,
        "apply_gradients": _apply_gradients,
    }
