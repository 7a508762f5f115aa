"""hvd.elastic.run recovering from a stall shutdown, run by
tests/python/test_elastic_sampler.py at 2 ranks (elastic, --min-np 2).

Each step allreduces [1.0] (op=Sum) into state.value and commits. On the
first pass through step 3 (state.resets == 0), rank 1 is busy for longer
than HOROVOD_STALL_SHUTDOWN_TIME_SECONDS before its allreduce: the job shuts
down, the pending and later collectives raise HorovodInternalError (ABORTED)
on both ranks, and hvd.elastic.run restores the last commit, re-forms and
goes on. After 6 steps value must be 2 * 6 = 12 on both ranks: the aborted
step is neither lost nor counted twice.
"""

import os
import time

import khorovod.torch as hvd
import torch

STEPS, STALL_AT, BUSY_SECONDS = 6, 3, 8


def main():
    me = os.environ.get("KHOROVOD_WORKER_NAME", "?")
    hvd.init()
    state = hvd.elastic.TorchState(step=0, value=0.0, resets=0)

    def on_reset():
        state.resets += 1
        print(
            f"{me}: caught by elastic.run: reset {state.resets} after HorovodInternalError, "
            f"back at step {state.step}",
            flush=True,
        )

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.step < STEPS:
            if state.step == STALL_AT and state.resets == 0 and hvd.rank() == 1:
                time.sleep(BUSY_SECONDS)
            total = hvd.allreduce(torch.ones(1), op=hvd.Sum, name=f"step.{state.step}")
            state.value += float(total.item())
            state.step += 1
            state.commit()

    train(state)
    print(f"{me}: finished step {state.step} with value {state.value}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
