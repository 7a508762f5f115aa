"""An elastic Keras classifier written for Horovod, on generated MNIST-like data.

The script is Horovod's elastic Keras pattern (its
tensorflow2_keras_mnist_elastic.py) with only the import line changed to
`import khorovod.tensorflow.keras as hvd`: DistributedOptimizer with the
learning rate scaled by the world size, BroadcastGlobalVariablesCallback(0),
MetricAverageCallback, KerasState with the commit / batch / epoch state
callbacks, @hvd.elastic.run around model.fit, and a checkpoint written by
rank 0 only. Ten 28x28 "digit" templates (random strokes, fixed by --seed)
are the classes; a sample is a template shifted by up to two pixels plus
noise, so nothing is downloaded.

    khorovodrun -np 2 python3 examples/python/keras_mnist_elastic.py
    khorovodrun -np 3 --min-np 2 --max-np 3 python3 examples/python/keras_mnist_elastic.py

The callbacks are made inside the elastic function, so each formation of
the job gets its own: every rank, a replacement too, broadcasts rank 0's
weights once after its first batch, and the checkpoint follows whichever
process is rank 0 now. Kill a worker mid-epoch and the others roll back to
the last commit, re-form, and go on; a replacement joins at a later commit.

Rank 0 prints one line per epoch (Keras, verbose=2), a line at each
re-formation ("re-formed: N ranks, resuming at epoch E batch B") and finally
"final accuracy A"; every rank prints "rank R parameters checksum C" (a
hash of its weights) and rank 0 "all N ranks agree on the parameters" or
"ERROR: ranks disagree on the parameters" (exit status 1).
"""

import argparse
import hashlib
import os
import sys

import khorovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf


def make_templates(rng):
    templates = np.zeros((10, 28, 28), np.float32)
    for c in range(10):
        for _ in range(4):  # four random strokes per class
            r, col = rng.integers(4, 24, size=2)
            if rng.random() < 0.5:
                templates[c, r, max(col - 6, 0) : col + 6] = 1.0
            else:
                templates[c, max(r - 6, 0) : r + 6, col] = 1.0
    return templates


def make_data(n, rng, templates):
    labels = rng.integers(0, 10, size=n)
    images = templates[labels].copy()
    shifts = rng.integers(-2, 3, size=(n, 2))
    for i in range(n):
        images[i] = np.roll(images[i], shift=tuple(shifts[i]), axis=(0, 1))
    images += 0.6 * rng.standard_normal(images.shape).astype(np.float32)
    return images.reshape(n, 28 * 28), labels.astype(np.int64)


def weights_checksum(model):
    digest = hashlib.sha256()
    for w in model.weights:
        digest.update(np.ascontiguousarray(w.numpy()).tobytes())
    return int.from_bytes(digest.digest()[:7], "big")  # fits a positive int64


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--steps-per-epoch", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--checkpoint-dir", default=".", help="where rank 0 writes checkpoint-{epoch}.keras"
    )
    args = p.parse_args()

    hvd.init()
    templates = make_templates(np.random.default_rng(args.seed))
    # Each rank draws its own samples: its shard of an endless stream.
    train_x, train_y = make_data(4096, np.random.default_rng([args.seed, 1, hvd.rank()]), templates)
    test_x, test_y = make_data(1024, np.random.default_rng([args.seed, 2]), templates)
    dataset = (
        tf.data.Dataset.from_tensor_slices((train_x, train_y))
        .repeat()
        .shuffle(4096, seed=args.seed)
        .batch(args.batch_size)
    )

    tf.random.set_seed(
        args.seed + hvd.rank()
    )  # different initial weights: the broadcast unifies them
    model = tf.keras.Sequential(
        [
            tf.keras.Input(shape=(28 * 28,)),
            tf.keras.layers.Dense(256, activation="relu"),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    # Horovod: scale the learning rate by the world size; average gradients.
    opt = hvd.DistributedOptimizer(
        tf.keras.optimizers.SGD(learning_rate=args.lr * hvd.size(), momentum=0.9)
    )
    model.compile(
        optimizer=opt,
        metrics=["accuracy"],
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )

    def on_state_reset():  # the world changed size: keep the learning rate proportional to it
        state.model.optimizer.learning_rate = args.lr * hvd.size()
        if hvd.rank() == 0:
            print(
                f"re-formed: {hvd.size()} ranks, resuming at epoch {state.epoch} batch {state.batch}",
                flush=True,
            )

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    state.register_reset_callbacks([on_state_reset])

    @hvd.elastic.run
    def train(state):
        callbacks = [
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            hvd.callbacks.MetricAverageCallback(),
            hvd.elastic.UpdateEpochStateCallback(state),
            hvd.elastic.UpdateBatchStateCallback(state),
            hvd.elastic.CommitStateCallback(state),
        ]
        # Horovod: only rank 0 writes checkpoints, so workers never overwrite each other's.
        if hvd.rank() == 0:
            callbacks.append(
                tf.keras.callbacks.ModelCheckpoint(
                    os.path.join(args.checkpoint_dir, "checkpoint-{epoch}.keras")
                )
            )
        model.fit(
            dataset,
            steps_per_epoch=args.steps_per_epoch,
            epochs=args.epochs - state.epoch,
            callbacks=callbacks,
            verbose=2 if hvd.rank() == 0 else 0,
        )

    train(state)

    checksum = weights_checksum(model)
    print(f"rank {hvd.rank()} parameters checksum {checksum:016x}", flush=True)
    everyone = hvd.allgather(tf.constant([checksum], dtype=tf.int64), name="checksums").numpy()
    agree = bool(np.all(everyone == checksum))
    if hvd.rank() == 0:
        accuracy = float(np.mean(np.argmax(model.predict(test_x, verbose=0), axis=1) == test_y))
        print(f"final accuracy {accuracy:.3f}", flush=True)
        print(
            f"all {hvd.size()} ranks agree on the parameters"
            if agree
            else f"ERROR: ranks disagree on the parameters ({hvd.size()} ranks)",
            flush=True,
        )
    hvd.shutdown()
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
