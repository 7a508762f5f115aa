"""A peer dies during a TensorFlow allreduce in an elastic job: the
original worker named by KILL_WORKER stops before its allreduce of step
FAIL_AT, while the others are already blocked in theirs, and SIGKILLs
itself. The survivors' allreduce fails (HorovodInternalError through
hvd.elastic.run), they roll back to the last commit and re-form; the
replacement joins at a later commit. The state is a probe variable whose
averaged gradient is 1 on every rank, so after S steps it must be exactly
-LR * S: a step lost or applied twice changes it. Steps run in a
tf.function. Each rank prints "<worker>: done: rank R of N, step S, probe P".
Usage: tf_peer_dies.py STEPS FAIL_AT FULL_SIZE"""

import os
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import khorovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

LR = 0.125  # exact in binary
steps, fail_at, full_size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
me = os.environ.get("KHOROVOD_WORKER_NAME", "?")
kill_worker = os.environ.get("KILL_WORKER", "worker-1")

hvd.init()
probe = tf.Variable(tf.zeros([4]))
state = hvd.elastic.TensorFlowState([probe], step=0)
state.register_reset_callbacks(
    [
        lambda: print(
            f"{me}: re-formed as rank {hvd.rank()} of {hvd.size()} at step {state.step}", flush=True
        )
    ]
)


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(probe)
    tape = hvd.DistributedGradientTape(tape)
    (grad,) = tape.gradient(loss, [probe])
    probe.assign_sub(LR * grad)


@hvd.elastic.run
def train(state):
    while state.step < steps or (hvd.size() < full_size and state.step < steps + 2000):
        if me == kill_worker and state.step == fail_at:
            time.sleep(1.0)  # the others are inside their allreduce by now
            print(f"{me}: dying before its allreduce of step {state.step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            train_step()
        except tf.errors.UnknownError as e:  # hvd.elastic.run turns it into HorovodInternalError
            cause = next(
                (
                    l
                    for l in e.message.splitlines()
                    if "khorovod " in l and ":" in l and "File" not in l
                ),
                e.message,
            )
            print(f"{me}: allreduce of step {state.step} failed: {cause.strip()[:160]}", flush=True)
            raise
        state.step += 1
        state.commit()
        time.sleep(0.01)


train(state)
expected = -LR * state.step
assert all(float(v) == expected for v in probe.numpy()), (probe.numpy(), expected)
print(
    f"{me}: done: rank {hvd.rank()} of {hvd.size()}, step {state.step}, probe {float(probe[0])}",
    flush=True,
)
