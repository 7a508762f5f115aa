# A Keras training script written for Horovod, in the pattern of Horovod's
# Keras tutorial (tensorflow2_keras_mnist.py): DistributedOptimizer, the
# broadcast, metric-average and warmup callbacks, a checkpoint on rank 0,
# model.fit. The tests run it with only the import line changed. Data are
# made here (a fixed linear problem), so nothing is downloaded.
# Prints "final weights <checksum>" and "epoch N loss=<averaged loss>" per
# epoch on rank 0; argv[1]: the checkpoint directory.
import os
import sys

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

hvd.init()
tf.random.set_seed(1234 + hvd.rank())  # different init per rank: the broadcast must fix it
rng = np.random.default_rng(hvd.rank())
true_w = np.arange(1, 9, dtype=np.float32).reshape(8, 1) / 8.0
x = rng.normal(size=(256, 8)).astype(np.float32)
y = x @ true_w + 0.5
dataset = (
    tf.data.Dataset.from_tensor_slices((x, y)).repeat().shuffle(256, seed=hvd.rank()).batch(32)
)

model = tf.keras.Sequential(
    [
        tf.keras.Input(shape=(8,)),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(1),
    ]
)
scaled_lr = 0.01 * hvd.size()
opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(learning_rate=scaled_lr, momentum=0.5))
model.compile(loss="mse", optimizer=opt, metrics=["mae"])

callbacks = [
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    hvd.callbacks.MetricAverageCallback(),
    hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=2, verbose=1),
]
ckpt_dir = sys.argv[1]
if hvd.rank() == 0:
    callbacks.append(
        tf.keras.callbacks.ModelCheckpoint(os.path.join(ckpt_dir, "checkpoint-{epoch}.keras"))
    )

history = model.fit(
    dataset,
    steps_per_epoch=24 // hvd.size(),
    callbacks=callbacks,
    epochs=4,
    verbose=1 if hvd.rank() == 0 else 0,
)
weights = np.concatenate([w.numpy().ravel() for w in model.weights])
gathered = hvd.allgather(tf.constant(weights[None, :])).numpy()
assert np.allclose(gathered, gathered[0:1]), "ranks ended with different weights"
if hvd.rank() == 0:
    keras_package = sys.modules[tf.keras.__name__.split(".")[0]]  # keras, or tf_keras under Keras 2
    print(f"keras {keras_package.__version__}")
    for epoch, loss in enumerate(history.history["loss"]):
        print(f"epoch {epoch} loss={loss:.6f}")
    print(f"final weights {float(np.sum(weights)):.6f}")
    restored = hvd.load_model(os.path.join(ckpt_dir, "checkpoint-4.keras"))
    # The saved optimizer comes back wrapped (its class keeps SGD's name).
    assert type(restored.optimizer).__name__ == "SGD"
    assert hasattr(type(restored.optimizer), "_khorovod_settings"), "optimizer not distributed"
    assert np.allclose(np.concatenate([w.numpy().ravel() for w in restored.weights]), weights)
    print("checkpoint restored, optimizer distributed")
