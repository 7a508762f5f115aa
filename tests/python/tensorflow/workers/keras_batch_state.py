# UpdateBatchStateCallback inside one process's model.fit, without a
# re-formation: a state whose batch is set as a reset leaves it, so the
# cases are exact. Run under Keras 3 and tf-keras (TF_USE_LEGACY_KERAS=1).
#   1. an epoch resumed at state.batch 5 of 12 runs 7 batches, numbered
#      5..11 in state.batch; the next epochs run 12 each (fit's epochs all run);
#   2. a resumed epoch interrupted again resumes where it was (state.batch
#      counts the epoch's batches, not Keras' numbering from 0);
#   3. a stop asked for by another callback is kept: in a batch of the
#      resumed epoch, and at a later epoch's end;
#   4. without a reset (state.batch 0) every epoch runs whole.
# Prints "rank 0: OK" when every case holds.
import sys
import types

import khorovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

STEPS = 12
hvd.init()
x = np.ones((64, 2), np.float32)
dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(4)
model = tf.keras.Sequential([tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(1)])
model.compile(loss="mse", optimizer="sgd")


class Interrupt(Exception):
    pass


class Record(tf.keras.callbacks.Callback):
    """Batches per epoch and the state.batch values seen; optional stops."""

    def __init__(self, state, interrupt_at=None, stop_in_batch=None, stop_at_epoch_end=None):
        super().__init__()
        self.state, self.runs, self.seen = state, [], []
        self.interrupt_at, self.stop_in_batch = interrupt_at, stop_in_batch
        self.stop_at_epoch_end = stop_at_epoch_end

    def on_epoch_begin(self, epoch, logs=None):
        self.runs.append(0)

    def on_batch_end(self, batch, logs=None):
        self.runs[-1] += 1
        self.seen.append(self.state.batch)
        if self.stop_in_batch == batch:
            self.model.stop_training = True
        if self.interrupt_at == batch:
            raise Interrupt()

    def on_epoch_end(self, epoch, logs=None):
        if self.stop_at_epoch_end == epoch:
            self.model.stop_training = True


def fit(state, epochs, record, record_first=False):
    update = hvd.elastic.UpdateBatchStateCallback(state)
    # The recorder reads state.batch after the update; a stop asked for in
    # a batch comes from a callback placed before the update.
    callbacks = [record, update] if record_first else [update, record]
    model.fit(dataset, steps_per_epoch=STEPS, epochs=epochs, callbacks=callbacks, verbose=0)
    return record


def check(name, got, want):
    assert got == want, f"{name}: got {got}, want {want}"


state = types.SimpleNamespace(batch=5)
rec = fit(state, 3, Record(state))
check("1. batches per epoch", rec.runs, [7, 12, 12])
check("1. state.batch in the resumed epoch", rec.seen[:7], list(range(5, 12)))
check("1. state.batch after fit", state.batch, 0)

state = types.SimpleNamespace(batch=5)
try:
    fit(state, 2, Record(state, interrupt_at=3))
    raise AssertionError("2. the interruption did not happen")
except Interrupt:
    pass
check("2. state.batch at the interruption", state.batch, 8)
rec = fit(state, 2, Record(state))
check("2. batches per epoch after the second reset", rec.runs, [4, 12])
check("2. state.batch", rec.seen[:4], [8, 9, 10, 11])

state = types.SimpleNamespace(batch=5)
rec = fit(state, 3, Record(state, stop_in_batch=2), record_first=True)
check("3. a stop in a batch of the resumed epoch", rec.runs, [3])
state = types.SimpleNamespace(batch=5)
rec = fit(state, 4, Record(state, stop_at_epoch_end=1))
check("3. a stop at a later epoch's end", rec.runs, [7, 12])

state = types.SimpleNamespace(batch=0)
rec = fit(state, 2, Record(state))
check("4. no reset", rec.runs, [12, 12])
check("4. state.batch", rec.seen[:12], list(range(12)))
keras_package = sys.modules[tf.keras.__name__.split(".")[0]]  # keras, or tf_keras under Keras 2
print(f"keras {keras_package.__version__}", flush=True)
print(f"rank {hvd.rank()}: OK", flush=True)
