"""khorovod.tensorflow's collectives at any rank count, eagerly and inside
tf.function, checked against values computed here: every reduce op with
scaling, grouped allreduce, allgather of uneven rows, broadcast of every
dtype, alltoall with uneven splits, reducescatter, process sets, barrier,
join, the gradients of each collective, a mismatch between ranks, and the
object helpers. Prints "rank R: OK" at the end."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import khorovod.tensorflow as hvd  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

try:
    hvd.allreduce(tf.constant([1.0]))
    raise AssertionError("allreduce before init must fail")
except (tf.errors.FailedPreconditionError, ValueError) as e:
    assert "init" in str(e), e

hvd.init(process_sets="dynamic")
r, n = hvd.rank(), hvd.size()
ranks = np.arange(n, dtype=np.float64)


def close(a, b, what):
    a = a.numpy() if hasattr(a, "numpy") else np.asarray(a)
    assert np.allclose(a, b, rtol=1e-3, atol=1e-3), f"rank {r}: {what}: {a} != {b}"


def check_reductions(run):
    for dtype in (tf.float32, tf.float64, tf.float16, tf.int32, tf.int64, tf.int8, tf.uint8):
        x = tf.cast(tf.fill([3, 2], r + 1), dtype)
        close(run(x, hvd.Sum, 1.0, 1.0), np.full([3, 2], (ranks + 1).sum()), f"sum {dtype.name}")
        close(run(x, hvd.Min, 1.0, 1.0), np.ones([3, 2]), f"min {dtype.name}")
        close(run(x, hvd.Max, 1.0, 1.0), np.full([3, 2], n), f"max {dtype.name}")
        close(
            run(x, hvd.Product, 1.0, 1.0),
            np.full([3, 2], np.prod(ranks + 1)),
            f"product {dtype.name}",
        )
    x = tf.fill([4], float(r + 1))
    close(run(x, hvd.Average, 1.0, 1.0), np.full([4], (ranks + 1).mean()), "average")
    close(run(x, hvd.Sum, 0.5, 3.0), np.full([4], (ranks + 1).sum() * 1.5), "pre/postscale")


check_reductions(
    lambda x, op, pre, post: hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post)
)


@tf.function
def graph_allreduce(x, op, pre, post):
    return hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post)


check_reductions(lambda x, op, pre, post: graph_allreduce(x, op, pre, post))
if n == 2:
    # Adasum of a = 1s and b = 2s: (1 - a.b/2|a|^2) a + (1 - a.b/2|b|^2) b = 0 + 0.75 b.
    close(hvd.allreduce(tf.fill([4], float(r + 1)), op=hvd.Adasum), np.full([4], 1.5), "adasum")
elif n & (n - 1):
    try:
        hvd.allreduce(tf.fill([4], 1.0), op=hvd.Adasum)
        raise AssertionError("Adasum at a size that is not a power of two must be refused")
    except NotImplementedError:
        pass

# Grouped allreduce, mixed dtypes, eagerly and in a graph.
grouped = [tf.fill([2], float(r)), tf.fill([3, 1], r), tf.fill([1], float(r) * 2)]
for result in (
    hvd.grouped_allreduce(grouped, op=hvd.Sum),
    tf.function(lambda g: hvd.grouped_allreduce(g, op=hvd.Sum))(grouped),
):
    close(result[0], np.full([2], ranks.sum()), "grouped 0")
    close(result[1], np.full([3, 1], ranks.sum()), "grouped 1")
    close(result[2], np.full([1], 2 * ranks.sum()), "grouped 2")

# Allgather with a different number of rows per rank, and its grouped form.
expected = np.concatenate([np.full([k + 1, 2], k) for k in range(n)])
close(hvd.allgather(tf.fill([r + 1, 2], r)), expected, "allgather")
close(tf.function(hvd.allgather)(tf.fill([r + 1, 2], r)), expected, "allgather in a graph")
for g in hvd.grouped_allgather([tf.fill([r + 1, 2], r), tf.fill([r + 1, 2], r)]):
    close(g, expected, "grouped allgather")

# Broadcast of every dtype from the last rank.
root = n - 1
for dtype in (
    tf.float32,
    tf.float64,
    tf.float16,
    tf.bfloat16,
    tf.int8,
    tf.uint8,
    tf.int16,
    tf.int32,
    tf.int64,
    tf.bool,
):
    x = tf.cast(tf.fill([2, 2], r % 2 if dtype == tf.bool else r), dtype)
    got = hvd.broadcast(x, root)
    close(
        tf.cast(got, tf.float64),
        np.full([2, 2], root % 2 if dtype == tf.bool else root),
        f"broadcast {dtype.name}",
    )
v = tf.Variable([float(r)] * 3)
hvd.broadcast_variables([v], root_rank=root)
close(v, np.full([3], root), "broadcast_variables")
v.assign([float(r)] * 3)
hvd.broadcast_([v], root_rank=0)
close(v, np.zeros(3), "broadcast_")

# Alltoall: rank r sends k+1 rows to rank k, each row holding r.
splits = [k + 1 for k in range(n)]
x = tf.fill([sum(splits), 2], r)
out, received = hvd.alltoall(x, splits=splits)
close(out, np.concatenate([np.full([r + 1, 2], k) for k in range(n)]), "alltoall")
close(received, np.full([n], r + 1), "alltoall received splits")
close(hvd.alltoall(tf.fill([2 * n], r)), np.repeat(np.arange(n), 2), "alltoall even")

# Reducescatter: rank r gets row block r of the sum.
rows = 2 * n
x = tf.reshape(tf.range(rows * 3, dtype=tf.float32), [rows, 3]) * (r + 1)
full = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) * (ranks + 1).sum()
close(hvd.reducescatter(x, op=hvd.Sum), full[2 * r : 2 * r + 2], "reducescatter")
close(hvd.reducescatter(x), full[2 * r : 2 * r + 2] / n, "reducescatter average")

# Gradients, eagerly and in a graph.
w = tf.Variable(tf.fill([2 * n, 2], float(r + 1)))


def grads(fn):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(fn(w) * 3.0)
    return tape.gradient(loss, w)


close(grads(lambda t: hvd.allreduce(t, op=hvd.Sum)), np.full([2 * n, 2], 3.0 * n), "allreduce grad")
close(grads(lambda t: hvd.allgather(t)), np.full([2 * n, 2], 3.0), "allgather grad")
close(
    grads(lambda t: hvd.broadcast(t, 0)),
    np.full([2 * n, 2], 3.0 if r == 0 else 0.0),
    "broadcast grad",
)
close(grads(lambda t: hvd.alltoall(t)), np.full([2 * n, 2], 3.0), "alltoall grad")
close(
    grads(lambda t: hvd.reducescatter(t, op=hvd.Sum)),
    np.full([2 * n, 2], 3.0 * n),
    "reducescatter grad",
)
close(
    grads(lambda t: hvd.grouped_allreduce([t], op=hvd.Sum)[0]),
    np.full([2 * n, 2], 3.0 * n),
    "grouped allreduce grad",
)
close(
    tf.function(lambda: grads(lambda t: hvd.allreduce(t, op=hvd.Average)))(),
    np.full([2 * n, 2], 3.0),
    "allreduce grad in a graph",
)

# DistributedGradientTape: the average of each rank's gradient.
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(w * float(r + 1))
tape = hvd.DistributedGradientTape(tape)
close(
    tape.gradient(loss, [w])[0], np.full([2 * n, 2], (ranks + 1).mean()), "DistributedGradientTape"
)

# Process sets: the even ranks.
evens = hvd.add_process_set(list(range(0, n, 2)))
if evens.included():
    close(
        hvd.allreduce(tf.constant([float(r)]), op=hvd.Sum, process_set=evens),
        [float(sum(range(0, n, 2)))],
        "allreduce in a process set",
    )
    close(hvd.size_op(process_set_id=evens.process_set_id), len(range(0, n, 2)), "size_op of a set")
close(hvd.process_set_included_op(evens.process_set_id), 1 if r % 2 == 0 else 0, "included op")
if evens.included():
    hvd.barrier(process_set=evens)
hvd.remove_process_set(evens)

# A mismatch between ranks is an error on every rank, and the job goes on.
try:
    hvd.allreduce(tf.zeros([r + 1]), name="mismatched")
    raise AssertionError("a shape mismatch must fail")
except tf.errors.FailedPreconditionError as e:
    assert "MISMATCH" in str(e), e

assert hvd.broadcast_object({"root": r}, root_rank=root) == {"root": root}
assert hvd.allgather_object(("rank", r)) == [("rank", k) for k in range(n)]
close(hvd.rank_op(), r, "rank_op")
close(hvd.size_op(), n, "size_op")
close(hvd.local_rank_op(), hvd.local_rank(), "local_rank_op")
hvd.barrier()
last = hvd.join()
assert 0 <= int(last) < n, last
print(f"rank {r}: OK", flush=True)
