# An elastic Keras job in the pattern of Horovod's elastic Keras test
# script (test/integration/data/elastic_tensorflow_keras_main.py): fit()
# with steps_per_epoch inside hvd.elastic.run, with KerasState and the
# commit / batch / epoch state callbacks, refitting the epochs left after
# every reset. It checks what UpdateBatchStateCallback promises: an epoch
# resumed after a reset at state.batch B runs steps_per_epoch - B batches
# (Horovod's rule), not the whole epoch again.
#
# The original worker named KILL_WORKER SIGKILLs itself at batch KILL_BATCH
# of epoch KILL_EPOCH; the survivors roll back to their last commit and
# resume that epoch; khorovodrun starts a replacement, which joins at a
# later commit (a second reset, mid-epoch or at an epoch's end). Training
# runs EPOCHS epochs and then on, an epoch at a time, until the world is
# FULL_SIZE again (bounded), so both resets happen, and finishes the epoch
# a reset interrupted.
# Each completed epoch prints, on every rank,
#   "<worker>: epoch E from batch B ran N batches of S at size K"
# (B: state.batch when the epoch began, 0 unless resumed), and the end
#   "<worker>: done: rank R of N, epoch E, checksum C".
# Usage: keras_elastic_resume.py EPOCHS STEPS KILL_EPOCH KILL_BATCH FULL_SIZE
import os
import signal
import sys
import time

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

epochs, steps, kill_epoch, kill_batch, full_size = (int(a) for a in sys.argv[1:6])
me = os.environ.get("KHOROVOD_WORKER_NAME", os.environ.get("HOROVOD_HOSTNAME", "?"))
kill_worker = os.environ.get("KILL_WORKER", "worker-1")
max_epochs = epochs + 200  # bounds the wait for the replacement (~60 s)

hvd.init()
tf.random.set_seed(11)
rng = np.random.default_rng(3)
x = rng.normal(size=(256, 4)).astype(np.float32)
y = (x @ np.array([[0.5], [-1.0], [0.25], [2.0]], dtype=np.float32)).astype(np.float32)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)

model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1)])
model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01)))
state = hvd.elastic.KerasState(model, batch=0, epoch=0)


def on_state_reset():
    print(
        f"{me}: reset to epoch {state.epoch} batch {state.batch} at size {hvd.size()}", flush=True
    )


state.register_reset_callbacks([on_state_reset])


class CountBatches(tf.keras.callbacks.Callback):
    """Counts the batches each epoch runs; the chosen worker dies mid-epoch."""

    def on_epoch_begin(self, epoch, logs=None):
        self.first_batch, self.ran = state.batch, 0

    def on_batch_end(self, batch, logs=None):
        self.ran += 1
        if me == kill_worker and state.epoch == kill_epoch and batch == kill_batch:
            print(f"{me}: simulating a crash in epoch {state.epoch} batch {batch}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.03)  # some compute per batch, so the replacement joins mid-training

    def on_epoch_end(self, epoch, logs=None):
        print(
            f"{me}: epoch {state.epoch} from batch {self.first_batch} ran {self.ran} batches "
            f"of {steps} at size {hvd.size()}",
            flush=True,
        )


# Horovod's example order: commit, then the batch and epoch state.
callbacks = [
    CountBatches(),
    hvd.elastic.CommitStateCallback(state),
    hvd.elastic.UpdateBatchStateCallback(state),
    hvd.elastic.UpdateEpochStateCallback(state),
]


@hvd.elastic.run
def train(state):
    # A resumed epoch (state.batch > 0) is finished too, so the one the
    # replacement interrupted runs at full size.
    while (
        state.epoch < epochs
        or state.batch > 0
        or (hvd.size() < full_size and state.epoch < max_epochs)
    ):
        target = max(epochs, state.epoch + 1)
        model.fit(
            dataset,
            steps_per_epoch=steps,
            epochs=target - state.epoch,
            callbacks=callbacks,
            verbose=0,
        )


train(state)
checksum = sum(float(np.sum(w.numpy())) for w in model.weights)
done = f"rank {hvd.rank()} of {hvd.size()}, epoch {state.epoch}, checksum {checksum:.6f}"
print(f"{me}: done: {done}", flush=True)
