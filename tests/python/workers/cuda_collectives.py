"""khorovod.torch collectives on CUDA tensors at N ranks: results on the
input's device, values each rank can check. Run only where
torch.cuda.is_available(). Prints 'rank R: OK' at the end."""

import khorovod.torch as hvd
import torch


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    dev = torch.device("cuda", int(torch.cuda.current_device()) if n == 1 else 0)
    total = float(n * (n + 1) // 2)

    # Produced by a kernel on torch's stream: the submission must wait for it.
    x = torch.full((1000,), float(r + 1), device=dev) * 1.0
    out = hvd.allreduce(x, name="sum", op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)
    assert out.device == dev and torch.equal(out, torch.full_like(x, 2 * total))
    y = torch.full((3, 5), float(r + 1), device=dev)
    assert hvd.allreduce_(y, name="avg") is y and torch.allclose(y, torch.full_like(y, total / n))
    g = hvd.grouped_allreduce(
        [torch.ones(2, device=dev) * r, torch.ones(70000, device=dev)], name="group", op=hvd.Sum
    )
    assert torch.equal(g[0].cpu(), torch.full((2,), float(sum(range(n)))))
    assert torch.equal(g[1].cpu(), torch.full((70000,), float(n)))

    # op=Adasum: Horovod's NCCL result (Adasum across hosts of the host sums,
    # divided by the ranks per host); every rank here is on one host, so it
    # is the average.
    ad = hvd.allreduce(torch.full((6,), float(r + 1), device=dev), name="adasum", op=hvd.Adasum)
    assert ad.device == dev and torch.allclose(ad.cpu(), torch.full((6,), total / n))

    a = hvd.allgather(torch.full((r + 1, 2), float(r), device=dev), name="gather")
    assert a.device == dev and a.shape == (n * (n + 1) // 2, 2)
    expected = torch.cat([torch.full((k + 1, 2), float(k)) for k in range(n)])
    assert torch.equal(a.cpu(), expected)

    rs = hvd.reducescatter(torch.ones(n * 2, 3, device=dev), name="rs", op=hvd.Sum)
    assert rs.device == dev and torch.equal(rs.cpu(), torch.full((2, 3), float(n)))
    t = hvd.alltoall(torch.arange(n, dtype=torch.int64, device=dev) + 10 * r, name="a2a")
    assert t.device == dev and torch.equal(t.cpu(), torch.tensor([10 * k + r for k in range(n)]))
    b = hvd.broadcast(torch.full((4,), float(r), device=dev), root_rank=n - 1, name="bcast")
    assert torch.equal(b.cpu(), torch.full((4,), float(n - 1)))
    hvd.barrier()
    print(f"rank {r}: OK", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
