"""horovod.tensorflow.keras.callbacks: the callbacks of khorovod.tensorflow._keras as
tf.keras Callbacks (Keras 3, or Keras 2 under TF_USE_LEGACY_KERAS=1)."""

import tensorflow as tf

from .._keras import callbacks as _impl

_Callback = tf.keras.callbacks.Callback


class BroadcastGlobalVariablesCallback(_impl.BroadcastGlobalVariablesCallbackImpl, _Callback):
    """Broadcasts root_rank's model and optimizer variables after the first batch."""

    def __init__(self, root_rank, device="", local_variables=None):
        _Callback.__init__(self)
        _impl.BroadcastGlobalVariablesCallbackImpl.__init__(
            self, root_rank, device, local_variables
        )


class MetricAverageCallback(_impl.MetricAverageCallbackImpl, _Callback):
    """Averages the epoch's metrics over the ranks."""

    def __init__(self, device=""):
        _Callback.__init__(self)
        _impl.MetricAverageCallbackImpl.__init__(self, device)


class LearningRateScheduleCallback(_impl.LearningRateScheduleCallbackImpl, _Callback):
    """initial_lr * multiplier(epoch) in [start_epoch, end_epoch)."""

    def __init__(
        self,
        initial_lr,
        multiplier,
        start_epoch=0,
        end_epoch=None,
        staircase=True,
        momentum_correction=True,
        steps_per_epoch=None,
    ):
        _Callback.__init__(self)
        _impl.LearningRateScheduleCallbackImpl.__init__(
            self,
            initial_lr,
            multiplier,
            start_epoch,
            end_epoch,
            staircase,
            momentum_correction,
            steps_per_epoch,
        )


class LearningRateWarmupCallback(_impl.LearningRateWarmupCallbackImpl, _Callback):
    """Warms the learning rate up from initial_lr/size over warmup_epochs."""

    def __init__(
        self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0
    ):
        _Callback.__init__(self)
        _impl.LearningRateWarmupCallbackImpl.__init__(
            self, initial_lr, warmup_epochs, momentum_correction, steps_per_epoch, verbose
        )


class BestModelCheckpoint(tf.keras.callbacks.ModelCheckpoint):
    """ModelCheckpoint that keeps only the best model (Horovod's helper)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch"):
        super().__init__(
            filepath=filepath,
            monitor=monitor,
            verbose=verbose,
            save_best_only=True,
            save_weights_only=False,
            mode=mode,
            save_freq=save_freq,
        )
