"""The Keras callbacks of khorovod.tensorflow.keras and khorovod.keras
(Horovod's horovod._keras.callbacks), for Keras 3 and Keras 2.

Contract (as Horovod's):
- BroadcastGlobalVariablesCallback(root_rank): after the first batch,
  root_rank's model and optimizer variables on every rank (minus those
  registered with register_local_var).
- MetricAverageCallback(): at each epoch end, every metric in ``logs``
  becomes its average over the ranks (before the callbacks after it, such
  as ModelCheckpoint, read it).
- LearningRateScheduleCallback(initial_lr, multiplier, ...): the learning
  rate is initial_lr * multiplier(epoch) for epochs in [start_epoch,
  end_epoch), per epoch (staircase) or per batch; momentum correction
  scales momentum by new_lr/old_lr for the batch when the optimizer's
  momentum is a variable (Keras 3 keeps it as a Python float compiled into
  the train step, so there it is left alone).
- LearningRateWarmupCallback(initial_lr, warmup_epochs, ...): Goyal et
  al.'s warmup from initial_lr/size to initial_lr over warmup_epochs.
Thread-safety: callbacks run on the training thread.
"""

import numpy as np
import tensorflow as tf

from .. import collectives, functions, mpi_ops
from ..util import _var_key


def _get(value):
    return float(np.asarray(value.numpy() if hasattr(value, "numpy") else value))


def get_lr(optimizer):
    return _get(optimizer.learning_rate)


def set_lr(optimizer, value):
    lr = optimizer.learning_rate
    if isinstance(lr, tf.Variable) or hasattr(lr, "assign"):
        lr.assign(value)
    else:
        optimizer.learning_rate = value


def optimizer_variables(optimizer):
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


class BroadcastGlobalVariablesCallbackImpl:
    def __init__(self, root_rank, device="", local_variables=None):
        del device
        self.root_rank = root_rank
        self.broadcast_done = False
        self._local_vars = set()
        for var in local_variables or []:
            self.register_local_var(var)

    def register_local_var(self, var):
        self._local_vars.add(_var_key(var))

    def on_batch_end(self, batch, logs=None):
        del batch, logs
        if self.broadcast_done:
            return
        model_vars = [v for v in self.model.variables if _var_key(v) not in self._local_vars]
        functions.broadcast_variables(model_vars, root_rank=self.root_rank)
        if self.model.optimizer is not None:
            functions.broadcast_variables(
                optimizer_variables(self.model.optimizer), root_rank=self.root_rank
            )
        self.broadcast_done = True


class MetricAverageCallbackImpl:
    def __init__(self, device=""):
        del device

    def on_epoch_end(self, epoch, logs=None):
        del epoch
        if not logs:
            return
        for metric in sorted(logs):
            value = logs[metric]
            if isinstance(value, (int, float, np.floating, np.integer)) or hasattr(value, "numpy"):
                averaged = collectives.allreduce(
                    tf.constant(_get(value), dtype=tf.float64),
                    name=f"MetricAverageCallback.{metric}",
                    op=mpi_ops.Average,
                )
                logs[metric] = float(averaged.numpy())


class LearningRateScheduleCallbackImpl:
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
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.restore_momentum = None
        self.multiplier = (
            multiplier
            if callable(multiplier)
            else (lambda epoch: multiplier ** (epoch - start_epoch))
        )

    def _autodetect_steps_per_epoch(self):
        if self.params.get("steps"):
            return self.params["steps"]
        if self.params.get("samples") and self.params.get("batch_size"):
            return self.params["samples"] // self.params["batch_size"]
        raise ValueError(
            f"Could not autodetect the number of steps per epoch. Please specify the "
            f"steps_per_epoch parameter to the {type(self).__name__}()."
        )

    def _adjust_learning_rate(self, epoch):
        optimizer = self.model.optimizer
        old_lr = get_lr(optimizer)
        new_lr = self.initial_lr * self.multiplier(epoch)
        set_lr(optimizer, new_lr)
        momentum = getattr(optimizer, "momentum", None)
        if self.momentum_correction and isinstance(momentum, tf.Variable) and old_lr:
            self.restore_momentum = _get(momentum)
            momentum.assign(self.restore_momentum * new_lr / old_lr)

    def on_train_begin(self, logs=None):
        del logs
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        del logs
        self.current_epoch = epoch

    def on_batch_begin(self, batch, logs=None):
        del logs
        if self.current_epoch < self.start_epoch or (
            self.end_epoch is not None and self.current_epoch >= self.end_epoch
        ):
            return
        if self.staircase and batch == 0:
            self._adjust_learning_rate(self.current_epoch)
        elif not self.staircase:
            self._adjust_learning_rate(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_batch_end(self, batch, logs=None):
        del batch, logs
        if self.restore_momentum is not None:
            self.model.optimizer.momentum.assign(self.restore_momentum)
            self.restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        del epoch
        if logs is not None:
            logs["lr"] = get_lr(self.model.optimizer)


class LearningRateWarmupCallbackImpl(LearningRateScheduleCallbackImpl):
    def __init__(
        self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0
    ):
        def multiplier(epoch):
            size = mpi_ops.CONTEXT.runtime().size()
            epoch += 1.0 / self.steps_per_epoch
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)

        super().__init__(
            initial_lr,
            multiplier,
            start_epoch=0,
            end_epoch=warmup_epochs,
            staircase=False,
            momentum_correction=momentum_correction,
            steps_per_epoch=steps_per_epoch,
        )
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if (
            epoch == self.end_epoch - 1
            and self.verbose > 0
            and mpi_ops.CONTEXT.runtime().rank() == 0
        ):
            print(
                f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to "
                f"{get_lr(self.model.optimizer):g}."
            )
