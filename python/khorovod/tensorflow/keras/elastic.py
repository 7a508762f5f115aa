"""horovod.tensorflow.keras.elastic: KerasState, the elastic callbacks and
``run`` (khorovod.tensorflow.elastic.run)."""

import tensorflow as tf

from .._keras import elastic as _impl
from ..elastic import TensorFlowKerasState, run  # noqa: F401  (hvd.elastic.run)

_Callback = tf.keras.callbacks.Callback


class KerasState(TensorFlowKerasState):
    """A Keras model, its optimizer (default: the compiled one) and the
    keyword attributes (e.g. batch=0, epoch=0) as elastic state."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, backend=tf.keras.backend, **kwargs)


class CommitStateCallback(_impl.CommitStateCallbackImpl, _Callback):
    """Commits ``state`` every batches_per_commit batches and at epoch ends."""

    def __init__(self, state, batches_per_commit=1):
        _Callback.__init__(self)
        _impl.CommitStateCallbackImpl.__init__(self, state, batches_per_commit)


class UpdateBatchStateCallback(_impl.UpdateBatchStateCallbackImpl, _Callback):
    """Keeps state.batch current (resumed epochs skip the batches done)."""

    def __init__(self, state):
        _Callback.__init__(self)
        _impl.UpdateBatchStateCallbackImpl.__init__(self, state)


class UpdateEpochStateCallback(_impl.UpdateEpochStateCallbackImpl, _Callback):
    """Keeps state.epoch at the next epoch to run."""

    def __init__(self, state):
        _Callback.__init__(self)
        _impl.UpdateEpochStateCallbackImpl.__init__(self, state)
