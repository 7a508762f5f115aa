# A Keras training script with no metrics code (Horovod's tutorial pattern,
# khorovod import): the DistributedOptimizer's updates inside model.fit
# must show up as the worker's step series. Trains one short epoch after
# another until the file argv[1] exists (every rank stops at the same epoch:
# rank 0's view, broadcast), at most argv[2] seconds; prints 'rank R: OK'.
# Batches of 32 from a repeating dataset, so every step has 32 samples.
import os
import sys
import time

import khorovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

stop_file, limit_s = sys.argv[1], float(sys.argv[2])
hvd.init()
rng = np.random.default_rng(hvd.rank())
x = rng.normal(size=(256, 16)).astype(np.float32)
y = (x @ rng.normal(size=(16, 1))).astype(np.float32)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)
model = tf.keras.Sequential(
    [
        tf.keras.Input(shape=(16,)),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(1),
    ]
)
model.compile(
    loss="mse", optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(learning_rate=0.01))
)
deadline = time.monotonic() + limit_s


class StopWhenTold(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        stop = 1 if os.path.exists(stop_file) or time.monotonic() > deadline else 0
        if int(hvd.broadcast(tf.constant(stop), 0, name=f"stop.{epoch}").numpy()):
            self.model.stop_training = True


class Pace(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.01)


model.fit(
    dataset,
    steps_per_epoch=20,
    epochs=100000,
    verbose=0,
    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), StopWhenTold(), Pace()],
)
rank = hvd.rank()
hvd.shutdown()
print(f"rank {rank}: OK", flush=True)
