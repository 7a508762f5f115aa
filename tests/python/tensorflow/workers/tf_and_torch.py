# khorovod.tensorflow and khorovod.torch in one process: one runtime, one
# init, collectives from both frameworks (in flight at the same time too),
# a Keras model and a torch model trained side by side with their
# DistributedOptimizers, the object helpers of both. Prints 'rank R: OK'.
# The test appends torch's site-packages directory (KHOROVOD_TEST_TORCH_SITE,
# a venv with PyPI's torch) to sys.path, so this venv's own packages
# (khorovod, numpy) come first.
import os
import sys

sys.path.append(os.environ["KHOROVOD_TEST_TORCH_SITE"])

import khorovod.tensorflow as hvd_tf  # noqa: E402
import khorovod.tensorflow.keras as hvd_keras  # noqa: E402
import khorovod.torch as hvd_torch  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

hvd_torch.init()  # one init, through torch: TensorFlow's ops see the same runtime
rank, size = hvd_tf.rank(), hvd_tf.size()
assert (rank, size) == (hvd_torch.rank(), hvd_torch.size()) and hvd_tf.is_initialized()
expected = float(sum(range(1, size + 1)))

# Both frameworks' allreduces, one after the other and both in flight.
t = hvd_tf.allreduce(tf.constant([rank + 1.0] * 4), op=hvd_tf.Sum, name="tf.sum")
p = hvd_torch.allreduce(torch.full((4,), rank + 1.0), op=hvd_torch.Sum, name="torch.sum")
assert np.allclose(t.numpy(), expected) and torch.allclose(p, torch.full((4,), expected))
handle = hvd_torch.allreduce_async(
    torch.full((3,), rank + 1.0), op=hvd_torch.Sum, name="torch.inflight"
)


@tf.function
def tf_allgather(x):
    return hvd_tf.allgather(x, name="tf.inflight")


gathered = tf_allgather(tf.fill([rank + 1, 2], float(rank)))
summed = hvd_torch.synchronize(handle)
assert gathered.shape[0] == size * (size + 1) // 2 and torch.allclose(
    summed, torch.full((3,), expected)
)
assert hvd_tf.broadcast_object({"from": rank}, root_rank=0) == {"from": 0}
assert hvd_torch.allgather_object(rank) == list(range(size))

# A Keras model and a torch model, trained side by side.
tf.random.set_seed(rank)
torch.manual_seed(rank)
rng = np.random.default_rng(rank)
x = rng.normal(size=(64, 8)).astype(np.float32)
y = x.sum(axis=1, keepdims=True)
keras_model = tf.keras.Sequential([tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(1)])
keras_model.compile(
    loss="mse", optimizer=hvd_keras.DistributedOptimizer(tf.keras.optimizers.SGD(0.05))
)
torch_model = torch.nn.Linear(8, 1)
torch_opt = hvd_torch.DistributedOptimizer(
    torch.optim.SGD(torch_model.parameters(), lr=0.05),
    named_parameters=torch_model.named_parameters(),
)
hvd_torch.broadcast_parameters(torch_model.state_dict(), root_rank=0)
keras_model.fit(
    x,
    y,
    batch_size=16,
    epochs=2,
    verbose=0,
    callbacks=[hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0)],
)
for i in range(8):
    torch_opt.zero_grad()
    xb, yb = torch.from_numpy(x[i * 8 : (i + 1) * 8]), torch.from_numpy(y[i * 8 : (i + 1) * 8])
    torch.nn.functional.mse_loss(torch_model(xb), yb).backward()
    torch_opt.step()
keras_w = np.concatenate([w.numpy().ravel() for w in keras_model.weights])
torch_w = torch.cat([p.detach().ravel() for p in torch_model.parameters()])
all_keras = hvd_tf.allgather(tf.constant(keras_w[None, :])).numpy()
all_torch = hvd_torch.allgather(torch_w[None, :])
assert np.allclose(all_keras, all_keras[0:1]), "Keras weights differ across ranks"
assert torch.allclose(all_torch, all_torch[0:1].expand_as(all_torch)), (
    "torch weights differ across ranks"
)
hvd_tf.shutdown()
assert not hvd_torch.is_initialized()
print(f"rank {rank}: OK", flush=True)
