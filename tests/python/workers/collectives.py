"""Every collective of khorovod.torch at N ranks, with values each rank can
check, and runtime errors surfacing as Python exceptions with the runtime's
message. Prints 'rank R: OK' at the end."""

import os

import khorovod.torch as hvd
import torch


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    assert hvd.is_initialized() and 0 <= r < n and hvd.local_rank() == r and hvd.local_size() == n
    assert hvd.cross_rank() == 0
    # The runtime's background thread is named (top -H, perf, gdb).
    threads = [
        open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")
    ]
    assert "khorovod-bg" in threads, threads

    x = torch.full((3, 2), float(r + 1))
    expected_sum = float(n * (n + 1) // 2)
    assert torch.allclose(hvd.allreduce(x, name="avg"), torch.full((3, 2), expected_sum / n))
    assert torch.equal(hvd.allreduce(x, name="sum", op=hvd.Sum), torch.full((3, 2), expected_sum))
    assert torch.equal(hvd.allreduce(x, name="max", op=hvd.Max), torch.full((3, 2), float(n)))
    assert torch.equal(
        hvd.allreduce(x, name="scaled", op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5),
        torch.full((3, 2), expected_sum),
    )
    assert torch.equal(x, torch.full((3, 2), float(r + 1))), "out-of-place must not modify input"
    y = torch.full((4,), float(r), dtype=torch.float64)
    assert hvd.allreduce_(y, name="inplace", op=hvd.Sum) is y
    assert torch.equal(y, torch.full((4,), float(sum(range(n))), dtype=torch.float64))
    # A non-contiguous tensor reduced in place.
    z = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    hvd.allreduce_(z, name="noncontig", op=hvd.Sum)
    assert torch.equal(z, n * torch.arange(12, dtype=torch.float32).reshape(3, 4).t())
    # fp16 compression on the wire.
    c = hvd.allreduce(torch.full((5,), 0.5), name="fp16", compression=hvd.Compression.fp16)
    assert c.dtype == torch.float32 and torch.allclose(c, torch.full((5,), 0.5))

    h = hvd.allreduce_async(torch.ones(1000) * r, name="async", op=hvd.Sum)
    out = hvd.synchronize(h)
    assert hvd.poll(h) and torch.equal(out, torch.full((1000,), float(sum(range(n)))))

    g = hvd.grouped_allreduce(
        [torch.ones(2) * r, torch.ones(3, dtype=torch.int32) * r], name="group", op=hvd.Sum
    )
    assert torch.equal(g[0], torch.full((2,), float(sum(range(n)))))
    assert g[1].dtype == torch.int32 and torch.equal(
        g[1], torch.full((3,), sum(range(n)), dtype=torch.int32)
    )

    # allgather with a different first dimension on every rank.
    gathered = hvd.allgather(torch.full((r + 1, 2), r, dtype=torch.int64), name="gather")
    expect = torch.cat([torch.full((i + 1, 2), i, dtype=torch.int64) for i in range(n)])
    assert torch.equal(gathered, expect), gathered

    b = torch.full((3,), float(r))
    assert torch.equal(hvd.broadcast(b, root_rank=n - 1, name="bcast"), torch.full((3,), n - 1.0))
    assert torch.equal(b, torch.full((3,), float(r)))
    hvd.broadcast_(b, root_rank=0, name="bcast_")
    assert torch.equal(b, torch.zeros(3))

    # alltoall: rank r sends (dest + 1) rows valued r to rank dest.
    splits = [d + 1 for d in range(n)]
    src = torch.cat([torch.full((d + 1,), float(r)) for d in range(n)])
    recv, recv_splits = hvd.alltoall(src, splits=splits, name="a2a")
    assert recv_splits.tolist() == [r + 1] * n, recv_splits
    assert torch.equal(recv, torch.cat([torch.full((r + 1,), float(s)) for s in range(n)]))
    even = hvd.alltoall(torch.arange(2 * n, dtype=torch.float32), name="a2a_even")
    assert even.shape == (2 * n,)

    rs = hvd.reducescatter(torch.ones(2 * n, 3), name="rs", op=hvd.Sum)
    assert torch.equal(rs, torch.full((2, 3), float(n)))

    hvd.barrier()

    # Errors: a shape mismatch across ranks names the tensor and the ranks.
    try:
        hvd.allreduce(torch.ones(r + 1), name="mismatch")
        raise AssertionError("a shape mismatch was not reported")
    except hvd.KhorovodError as e:
        # The runtime's own message: the field and every rank's value.
        assert e.code == "MISMATCH" and "shape" in e.runtime_message, str(e)
        assert str(e) == f"MISMATCH: {e.runtime_message}"
    # ... and the runtime keeps working afterwards.
    assert torch.equal(hvd.allreduce(torch.ones(1), name="after", op=hvd.Sum), torch.full((1,), n))
    # allreduce_ of a contiguous tensor is one blocking runtime call: its
    # errors surface the same way, and a process set's ranks still apply.
    try:
        hvd.allreduce_(torch.ones(r + 1), name="mismatch_", op=hvd.Sum)
        raise AssertionError("a shape mismatch in allreduce_ was not reported")
    except hvd.KhorovodError as e:
        assert e.code == "MISMATCH" and "shape" in e.runtime_message, str(e)
    try:
        hvd.allreduce_(torch.ones(2), name="khorovod.reserved")
        raise AssertionError("a reserved name in allreduce_ was not refused")
    except ValueError as e:
        assert "reserved" in str(e), str(e)
    for i in range(3):  # the same name again once the call returned
        w = torch.full((2,), float(r + i))
        assert hvd.allreduce_(w, name="again", op=hvd.Max) is w
        assert torch.equal(w, torch.full((2,), float(n - 1 + i)))
    try:
        hvd.broadcast(torch.ones(1), root_rank=n + 5, name="badroot")
        raise AssertionError("a bad root was not reported")
    except hvd.KhorovodError as e:
        assert e.code == "INVALID_ARGUMENT" and "root" in str(e), str(e)

    # join: the last rank to join is reported on every rank; a rank that
    # joined early contributes zeros to the others' allreduces.
    if r == n - 1:
        extra = hvd.allreduce(torch.ones(2), name="after_join", op=hvd.Sum)
        assert torch.equal(extra, torch.ones(2)), extra
    last = hvd.join()
    assert last == n - 1, last

    hvd.shutdown()
    assert not hvd.is_initialized()
    print(f"rank {r}: OK")


if __name__ == "__main__":
    main()
