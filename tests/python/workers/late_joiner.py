"""An unmodified-Horovod-style elastic script (no JobFinishedError handling)
whose original worker-1 SIGKILLs itself right after committing the last
step: khorovodrun starts a replacement while the survivors finish, so the
replacement comes to join a job that has finished training. It must end
with exit status 0 by itself, and khorovodrun's status must be the job's.
Usage: late_joiner.py STEPS."""

import os
import signal
import sys
import time

import khorovod.torch as hvd
import torch


def main():
    steps = int(sys.argv[1])
    me = os.environ.get("KHOROVOD_WORKER_NAME", "?")
    hvd.init()
    print(f"{me}: joined as rank {hvd.rank()} of {hvd.size()}", flush=True)
    model = torch.nn.Linear(4, 1)
    state = hvd.elastic.TorchState(model=model, step=0)

    @hvd.elastic.run
    def train(state):
        while state.step < steps:
            hvd.allreduce(torch.ones(4), name="grad")
            time.sleep(0.01)
            state.step += 1
            state.commit()
            if state.step == steps and me == "worker-1":
                print(f"{me}: simulating a crash after committing step {state.step}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)

    train(state)
    print(f"{me}: finished training at step {state.step}", flush=True)


if __name__ == "__main__":
    main()
