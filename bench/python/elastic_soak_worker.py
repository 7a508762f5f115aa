"""The Python worker that bench/elastic_soak.py kills: the C++ soak worker's
model (bench/elastic_soak_worker.cc) written with khorovod.torch's elastic API
(TorchState, @hvd.elastic.run), so the same driver checks the Python path.

Every rank's gradient is an integer-valued tensor base(step) + (2*rank -
(size-1)); the sum across ranks is exact in float32 and divided by the world
size gives base(step) at any world size, so the parameters after N steps equal
a local replay of N updates, bit for bit. Events go to DIR/events.<pid> in the
C++ worker's format (one os.write per line).
"""

import argparse
import hashlib
import os
import sys
import time

import khorovod.torch as hvd
import torch

PARAMS = 4096
LR = 1.0 / 1024


class EventLog:
    def __init__(self, directory):
        self.fd = os.open(
            os.path.join(directory, f"events.{os.getpid()}"),
            os.O_WRONLY | os.O_CREAT | os.O_APPEND,
            0o644,
        )

    def write(self, kind, *fields):
        line = " ".join([kind, str(time.monotonic_ns()), *map(str, fields)]) + "\n"
        os.write(self.fd, line.encode())


def base_gradient(step):
    i = torch.arange(PARAMS, dtype=torch.int64)
    return ((step * 7 + i * 13) % 17 - 8).to(torch.float32)


def digest(t):
    return int.from_bytes(
        hashlib.sha1(t.detach().contiguous().numpy().tobytes()).digest()[:8], "little"
    )


def replay(steps):
    p = torch.zeros(PARAMS, dtype=torch.float32)
    for s in range(steps):
        p.sub_(LR * base_gradient(s))
    return p


def big_state_is_exact(big, steps):
    n = big.numel()
    if n == 0:
        return True
    k = torch.arange(n, dtype=torch.int64)
    expected = (steps // n + (k < steps % n).to(torch.int64)).to(torch.float32)
    return bool(torch.equal(big, expected))


class SoakModel(torch.nn.Module):
    def __init__(self, state_mb):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(PARAMS, dtype=torch.float32))
        self.register_buffer("big", torch.zeros(state_mb * (1 << 20) // 4, dtype=torch.float32))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--step-ms", type=int, default=4)
    p.add_argument("--state-mb", type=int, default=0)
    o = p.parse_args()

    log = EventLog(o.dir)
    log.write("start")
    try:
        hvd.init()
    except hvd.JobFinishedError as e:  # a late joiner: the job is done
        print(f"soak worker: {e}", file=sys.stderr)
        return 0
    model = SoakModel(o.state_mb)
    state = hvd.elastic.TorchState(model=model, step=0)
    state.register_reset_callbacks([lambda: log.write("reset", hvd.rank(), hvd.size(), state.step)])

    @hvd.elastic.run
    def train(state):
        log.write("gen", hvd.rank(), hvd.size(), state.step)
        while state.step < o.steps:
            if o.step_ms:
                time.sleep(o.step_ms / 1000)
            grad = base_gradient(state.step) + float(2 * hvd.rank() - (hvd.size() - 1))
            grad = hvd.allreduce(grad, op=hvd.Sum, name="grad") / hvd.size()
            with torch.no_grad():
                model.weight.sub_(LR * grad)
                if model.big.numel():
                    model.big[state.step % model.big.numel()] += 1.0
            state.step += 1
            try:
                state.commit()
            finally:
                log.write("commit", state.step)

    try:
        train(state)
    except hvd.JobFinishedError as e:
        # Left behind (e.g. stopped past the heartbeat timeout) while the
        # others finished the training: nothing is left to do, as for a late
        # joiner (the C++ worker returns 0 here too).
        print(f"soak worker: {e}", file=sys.stderr)
        hvd.shutdown()
        return 0
    checksum, expected = digest(model.weight), digest(replay(state.step))
    big_ok = big_state_is_exact(model.big, state.step)
    log.write("done", hvd.rank(), hvd.size(), state.step, checksum, expected, 1 if big_ok else 0)
    hvd.shutdown()
    return 0 if checksum == expected and big_ok else 3


if __name__ == "__main__":
    sys.exit(main())
