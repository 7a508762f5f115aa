"""Horovod's stall semantics (test/integration/test_stall.py): rank 0 is busy
for argv[1] seconds before an allreduce that rank 1 submitted at once. With
a stall check time below that, rank 0 logs a warning and the job goes on;
past a stall shutdown time the job shuts down and the allreduce raises
HorovodInternalError on every rank (so hvd.elastic.run would recover)."""

import sys
import time

import khorovod.torch as hvd
import torch


def main():
    busy_seconds = float(sys.argv[1])
    hvd.init()
    rank = hvd.rank()
    if rank == 0:
        time.sleep(busy_seconds)
    tensor = torch.IntTensor([[1, 2], [3, 4]])
    try:
        summed = hvd.allreduce(tensor, average=False, name="stall.tensor")
        assert torch.equal(summed, tensor * hvd.size()), summed
        print(f"rank {rank}: allreduce completed", flush=True)
    except hvd.HorovodInternalError as e:
        print(f"rank {rank}: HorovodInternalError: {e}", flush=True)
    finally:
        hvd.shutdown()


if __name__ == "__main__":
    main()
