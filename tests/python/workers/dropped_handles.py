"""Misuse that must never crash the process (issue 28): async handles dropped
while their tensors are in flight, duplicate in-flight names (Horovod's
test_torch.py *_duplicate_name_error tests, verbatim in shape), tensors
deleted right after submission, and shutdown with work in flight.

Every case ends with each rank printing "<case>: OK"; the job as a whole must
exit 0 (a heap corruption shows as a signal at exit or in a later case).
"""

import gc

import khorovod.torch as hvd
import torch
from khorovod._context import CONTEXT

DIMS = [17] * 3


def horovod_duplicate_name(submit):
    """Horovod's shape: rank 0 submits and drops the handle, a second
    submission under the same name raises ValueError; then rank 1 does the
    same after a barrier (which pairs with rank 0's first submission)."""
    tensor = torch.FloatTensor(*DIMS).uniform_()
    rank = hvd.rank()
    if rank == 0:
        submit(tensor, "duplicate_name")
        try:
            submit(tensor, "duplicate_name")
            raise AssertionError("the second submission did not raise")
        except (torch.FatalError, ValueError):
            pass
    hvd.barrier()
    if rank > 0:
        submit(tensor, "duplicate_name")
        try:
            submit(tensor, "duplicate_name")
            raise AssertionError("the second submission did not raise")
        except (torch.FatalError, ValueError):
            pass
    hvd.barrier()


def dropped_output_is_not_written_into_reused_memory():
    """Rank 0 drops an out-of-place allreduce's handle and its input; memory
    the allocator hands out next must not receive the result afterwards."""
    n = 1 << 16
    probes = []
    if hvd.rank() == 0:
        hvd.allreduce_async(torch.ones(n), name="dropped.out")
        gc.collect()
        probes = [torch.zeros(n) for _ in range(4)]  # likely reuse the freed blocks
    hvd.barrier()
    if hvd.rank() > 0:
        hvd.allreduce(torch.ones(n), name="dropped.out")
    hvd.barrier()
    hvd.allreduce(torch.ones(1), name="dropped.flush")  # rank 0's op has completed
    for p in probes:
        assert torch.count_nonzero(p).item() == 0, "a dropped op wrote into freed memory"


def many_dropped_handles():
    """Hundreds of dropped handles of every kind, then collectives go on."""
    for i in range(200):
        t = torch.full((64,), float(hvd.rank()))
        hvd.allreduce_async(t, name=f"many.ar.{i}")
        hvd.allreduce_async_(t.clone(), name=f"many.ari.{i}")
        hvd.allgather_async(t, name=f"many.ag.{i}")
        hvd.broadcast_async(t, 0, name=f"many.bc.{i}")
        hvd.grouped_allreduce_async([t, t * 2], name=f"many.gar.{i}")
        del t
    gc.collect()
    hvd.barrier()
    got = hvd.allreduce(torch.ones(3), name="many.after", op=hvd.Sum)
    assert torch.equal(got, torch.full((3,), float(hvd.size()))), got
    # Every orphan finished, so the tensors kept for them are let go.
    CONTEXT.reap_orphans()
    assert CONTEXT.orphan_count() == 0, CONTEXT.orphan_count()


def shutdown_with_work_in_flight(rank):
    """Rank 0 submits an allreduce no other rank submits and drops it, keeps
    another one; shutdown must end both (the kept one raises) without a crash."""
    if rank == 0:
        hvd.allreduce_async(torch.ones(1000), name="lonely.dropped")
        kept = hvd.allreduce_async(torch.ones(1000), name="lonely.kept")
    hvd.shutdown()
    if rank == 0:
        try:
            hvd.synchronize(kept)
            raise AssertionError("an op that never ran completed")
        except RuntimeError as e:
            print(f"rank 0: in-flight op after shutdown raised {type(e).__name__}: {e}", flush=True)


CASES = {
    "allreduce_duplicate": lambda: horovod_duplicate_name(
        lambda t, n: hvd.allreduce_async(t, name=n)
    ),
    "allreduce_inplace_duplicate": lambda: horovod_duplicate_name(
        lambda t, n: hvd.allreduce_async_(t, name=n)
    ),
    "allgather_duplicate": lambda: horovod_duplicate_name(
        lambda t, n: hvd.allgather_async(t, name=n)
    ),
    "broadcast_duplicate": lambda: horovod_duplicate_name(
        lambda t, n: hvd.broadcast_async(t, name=n, root_rank=0)
    ),
    "reducescatter_duplicate": lambda: horovod_duplicate_name(
        lambda t, n: hvd.reducescatter_async(t, name=n)
    ),
    "dropped_output": dropped_output_is_not_written_into_reused_memory,
    "many_dropped": many_dropped_handles,
}


def main():
    hvd.init()
    for name, case in CASES.items():
        case()
        gc.collect()
        print(f"rank {hvd.rank()}: {name}: OK", flush=True)
    rank = hvd.rank()
    shutdown_with_work_in_flight(rank)
    print(f"rank {rank}: shutdown_in_flight: OK", flush=True)


if __name__ == "__main__":
    main()
