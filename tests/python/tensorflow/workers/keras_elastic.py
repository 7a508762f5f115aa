# An elastic Keras script in the pattern of Horovod's
# tensorflow2_keras_mnist_elastic.py: KerasState, the commit / batch /
# epoch state callbacks, hvd.elastic.run around model.fit, a checkpoint on
# rank 0. The tests run it with only the import line changed. Data are
# made here. One change from Horovod's example: its reset callback sets
# the learning rate with tf.keras.backend.set_value(optimizer.lr, ...),
# which Keras 3 removed; here it assigns optimizer.learning_rate.
#
# The original worker named by KILL_WORKER SIGKILLs itself in the middle of
# epoch KILL_EPOCH (after a commit, inside model.fit); khorovodrun starts a
# replacement, which joins at a later commit. Training runs EPOCHS epochs
# and then on, one epoch at a time, until the world is FULL_SIZE again
# (bounded), so the replacement takes part. Each rank prints
# "<worker>: done: rank R of N, epoch E, checksum C".
# Usage: keras_elastic.py EPOCHS KILL_EPOCH FULL_SIZE CHECKPOINT_DIR
import os
import signal
import sys
import time

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

epochs, kill_epoch, full_size, ckpt_dir = (
    int(sys.argv[1]),
    int(sys.argv[2]),
    int(sys.argv[3]),
    sys.argv[4],
)
me = os.environ.get("KHOROVOD_WORKER_NAME", os.environ.get("HOROVOD_HOSTNAME", "?"))
kill_worker = os.environ.get("KILL_WORKER", "worker-1")
max_epochs = epochs + 400  # about 80 s of waiting for the replacement at most

hvd.init()
tf.random.set_seed(42)
rng = np.random.default_rng(7)
x = rng.normal(size=(512, 8)).astype(np.float32)
y = (x @ (np.arange(8, dtype=np.float32).reshape(8, 1) / 8.0)).astype(np.float32)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)

lr = 0.01
model = tf.keras.Sequential(
    [
        tf.keras.Input(shape=(8,)),
        tf.keras.layers.Dense(8, activation="relu"),
        tf.keras.layers.Dense(1),
    ]
)
opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(learning_rate=lr * hvd.size(), momentum=0.5))
model.compile(loss="mse", optimizer=opt)


def on_state_reset():
    state.model.optimizer.learning_rate = lr * hvd.size()
    print(
        f"{me}: re-formed as rank {hvd.rank()} of {hvd.size()} at epoch {state.epoch} batch "
        f"{state.batch}",
        flush=True,
    )


state = hvd.elastic.KerasState(model, batch=0, epoch=0)
state.register_reset_callbacks([on_state_reset])


class KillMidEpoch(tf.keras.callbacks.Callback):
    """The chosen original worker dies after committing batch 3 of KILL_EPOCH."""

    def on_batch_end(self, batch, logs=None):
        if me == kill_worker and state.epoch == kill_epoch and batch == 3:
            print(f"{me}: simulating a crash in epoch {state.epoch} batch {batch}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.02)  # a little compute per batch, so a replacement can join in time


callbacks = [
    hvd.elastic.CommitStateCallback(state),
    hvd.elastic.UpdateBatchStateCallback(state),
    hvd.elastic.UpdateEpochStateCallback(state),
    KillMidEpoch(),
]
if hvd.rank() == 0:
    callbacks.append(tf.keras.callbacks.ModelCheckpoint(os.path.join(ckpt_dir, "checkpoint.keras")))


@hvd.elastic.run
def train(state):
    while state.epoch < epochs or (hvd.size() < full_size and state.epoch < max_epochs):
        model.fit(dataset, steps_per_epoch=8, epochs=1, callbacks=callbacks, verbose=0)


train(state)
weights = np.concatenate([w.numpy().ravel() for w in model.weights])
print(
    f"{me}: done: rank {hvd.rank()} of {hvd.size()}, epoch {state.epoch}, "
    f"checksum {float(np.sum(weights)):.6f}",
    flush=True,
)
