# hvd.SyncBatchNormalization against a plain BatchNormalization over the
# whole global batch (Horovod's test_horovod_syncbn_cpu, one sample per
# rank): outputs and moving statistics agree on every rank, eagerly and in
# a tf.function; fused=True is refused. Prints "rank R: OK".
import khorovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

hvd.init()
r, n = hvd.rank(), hvd.size()
inputs = [
    np.stack(
        [
            np.array(
                [[k, k + 1], [k * 2, k * 2 + 1], [k * 3, k * 3 + 1], [k * 4, k * 4 + 1]],
                dtype=np.float32,
            )
            for k in range(n)
        ]
    ),
    np.stack(
        [
            np.array([[k + 1], [k * 2 + 1], [k * 3 + 1], [k * 4 + 1]], dtype=np.float32)
            for k in range(n)
        ]
    ),
]
for x in inputs:
    x = tf.convert_to_tensor(x)
    bn = tf.keras.layers.BatchNormalization(axis=1)
    sync_bn = hvd.SyncBatchNormalization(axis=1)
    expected = bn(x, training=True).numpy()[r : r + 1]
    got = sync_bn(x[r : r + 1], training=True).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    for ours, theirs in (
        (sync_bn.moving_mean, bn.moving_mean),
        (sync_bn.moving_variance, bn.moving_variance),
    ):
        np.testing.assert_allclose(
            tf.convert_to_tensor(ours).numpy(),
            tf.convert_to_tensor(theirs).numpy(),
            rtol=1e-5,
            atol=1e-6,
        )
    graph_bn = hvd.SyncBatchNormalization(axis=1)
    step = tf.function(lambda t, layer=graph_bn: layer(t, training=True))
    np.testing.assert_allclose(step(x[r : r + 1]).numpy(), expected, rtol=1e-5, atol=1e-5)
try:
    hvd.SyncBatchNormalization(fused=True)
    raise SystemExit("fused=True was accepted")
except ValueError:
    pass
print(f"rank {r}: OK", flush=True)
