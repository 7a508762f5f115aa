"""What khorovod.tensorflow.keras and khorovod.keras share (Horovod's
horovod._keras): the distributed Keras optimizer and model loading.

Contract:
- create_distributed_optimizer(optimizer, ...) returns an optimizer of a
  new subclass of ``optimizer``'s class (same name, same config, so it
  saves and loads as the original class) whose gradients are averaged
  across ranks (khorovod.tensorflow.gradients.reduce_gradients) before the
  update. Keras 3 (TensorFlow's current tf.keras): the hook is
  ``apply(grads, variables)``, which ``apply_gradients`` and model.fit's
  train step call. Keras 2 (tf-keras, TF_USE_LEGACY_KERAS=1): Horovod's
  hooks, where Keras 2 computes gradients (keras2.py), with its local
  gradient aggregation for backward_passes_per_step > 1.
- backward_passes_per_step > 1 is refused under Keras 3 (Horovod's
  accumulation works on Keras 2's optimizers; Keras 3 has its own
  ``gradient_accumulation_steps``, which the wrapped optimizer keeps).
- Variables registered with ``register_local_var`` keep their local
  gradient (divided by the set's size when scale_local_gradients).
- Each update ends a training step for the worker's metrics
  (step_marks.py; samples from ``batch_size``, KHOROVOD_BATCH_SIZE or the
  train step's batch).
- load_model wraps every optimizer class found while loading.
Thread-safety: an optimizer belongs to one training loop.
"""

import tensorflow as tf

from .. import mpi_ops
from ..gradients import check_predivide, reduce_gradients
from ..util import _var_key
from . import keras2, step_marks


def keras_major(keras):
    version = getattr(keras, "__version__", "2")
    return int(version.split(".")[0])


def _reduce(self, grads, variables):
    grads = list(grads)
    variables = list(variables) if variables is not None else [None] * len(grads)
    local_vars = getattr(self, "_khorovod_local_vars", set())
    local = [v is not None and _var_key(v) in local_vars for v in variables]
    global_idx = [i for i, is_local in enumerate(local) if not is_local]
    settings = self._khorovod_settings
    reduced = reduce_gradients(
        [grads[i] for i in global_idx],
        settings["compression"],
        settings["sparse_as_dense"],
        settings["op"],
        settings["gradient_predivide_factor"],
        settings["process_set"],
    )
    for i, g in zip(global_idx, reduced):
        grads[i] = g
    if settings["scale_local_gradients"] and any(local):
        size = mpi_ops.size_op(process_set_id=mpi_ops._set_id(settings["process_set"]))
        for i, is_local in enumerate(local):
            if is_local and grads[i] is not None:
                grads[i] = grads[i] / tf.cast(size, grads[i].dtype)
    return grads


def _register_local_var(self, var):
    """``var``'s gradient stays local to this rank."""
    if not hasattr(self, "_khorovod_local_vars"):
        self._khorovod_local_vars = set()
    self._khorovod_local_vars.add(_var_key(var))


def _apply_keras3(self, grads, trainable_variables=None):
    variables = (
        trainable_variables if trainable_variables is not None else self._trainable_variables
    )
    result = super(self._khorovod_class, self).apply(
        _reduce(self, grads, variables), trainable_variables
    )
    step_marks.end_step(self._khorovod_batch_size)
    return result


def create_distributed_optimizer(
    keras,
    optimizer,
    name,
    compression,
    sparse_as_dense,
    gradient_predivide_factor,
    op,
    backward_passes_per_step,
    average_aggregated_gradients,
    process_set,
    scale_local_gradients,
    batch_size=None,
):
    check_predivide(op, gradient_predivide_factor)
    major = keras_major(keras)
    if backward_passes_per_step != 1 and major >= 3:
        raise NotImplementedError(
            "khorovod: backward_passes_per_step > 1 needs Keras 2 (tf-keras); with Keras 3 pass "
            "gradient_accumulation_steps to the optimizer itself"
        )
    base = optimizer.__class__
    attrs = {
        "_khorovod_settings": dict(
            compression=compression,
            sparse_as_dense=sparse_as_dense,
            op=op,
            gradient_predivide_factor=gradient_predivide_factor,
            process_set=process_set,
            scale_local_gradients=scale_local_gradients,
        ),
        "_khorovod_batch_size": batch_size,
        "register_local_var": _register_local_var,
        "__module__": base.__module__,
    }
    if major >= 3:
        attrs["apply"] = _apply_keras3
    else:
        attrs.update(
            keras2.optimizer_attrs(
                _reduce, backward_passes_per_step, sparse_as_dense, average_aggregated_gradients
            )
        )
    cls = type(base.__name__, (base,), attrs)
    cls._khorovod_class = cls
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    return cls.from_config(config)


class OptimizerLoader:
    """Stands for an optimizer class while a model loads: what Keras builds
    from it (``from_config`` or a call) comes back distributed."""

    def __init__(self, cls, wrap):
        self.cls = cls
        self._wrap = wrap
        self.__name__ = cls.__name__

    def from_config(self, config, custom_objects=None):
        del custom_objects
        return self._wrap(self.cls.from_config(config))

    def __call__(self, *args, **kwargs):
        return self._wrap(self.cls(*args, **kwargs))


def load_model(keras, wrap_optimizer, filepath, custom_optimizers, custom_objects):
    """keras.models.load_model with every Keras optimizer class (and
    ``custom_optimizers``) wrapped by ``wrap_optimizer``."""
    optimizer_classes = [
        getattr(keras.optimizers, n)
        for n in dir(keras.optimizers)
        if isinstance(getattr(keras.optimizers, n), type)
        and issubclass(getattr(keras.optimizers, n), keras.optimizers.Optimizer)
        and getattr(keras.optimizers, n) is not keras.optimizers.Optimizer
    ]
    optimizer_classes += list(custom_optimizers or [])
    objects = {cls.__name__: wrap_optimizer(cls) for cls in optimizer_classes}
    if custom_objects is not None:
        objects.update(custom_objects)
    return keras.models.load_model(filepath, custom_objects=objects)
