"""A static (non-elastic) job in which rank 1 dies mid-training: rank 0's
pending allreduce must raise HorovodInternalError carrying the runtime's
message, not hang, and a recovery attempt must be refused clearly."""

import os
import signal

import khorovod
import khorovod.torch as hvd
import torch


def main():
    # khorovodrun tears a static job down (SIGTERM) as soon as a worker dies;
    # rank 0 stays to report what its own collectives saw.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    hvd.init()
    hvd.barrier()
    if hvd.rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for i in range(1000):  # bounded: the failure shows up within a few
            hvd.allreduce(torch.ones(1000), name=f"t{i % 4}")
        raise AssertionError("the dead peer was never noticed")
    except hvd.HorovodInternalError as e:
        print(f"rank 0: caught {type(e).__name__}: {e}", flush=True)
        assert e.code in ("UNAVAILABLE", "ABORTED"), e.code

    @khorovod.elastic.run
    def train(state):
        raise AssertionError("must not get here")

    class Dummy(khorovod.elastic.State):
        def save(self):
            pass

        def restore(self):
            pass

        def sync(self):
            hvd.allreduce(torch.ones(1), name="sync")

    try:
        train(Dummy())
        raise AssertionError("elastic.run recovered in a static job")
    except hvd.KhorovodError as e:
        print(f"rank 0: reset refused: {e}", flush=True)
        assert e.code == "FAILED_PRECONDITION", e.code
    print("rank 0: OK", flush=True)
    os._exit(0)  # the runtime is unusable; skip the collective shutdown


if __name__ == "__main__":
    main()
