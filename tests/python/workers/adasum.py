"""Adasum (op=hvd.Adasum) against a direct numpy implementation of Horovod's
pairwise formula, run by tests/python/test_adasum.py at 2 and 4 ranks (and
at 3, where Horovod's refusal is checked).

Every rank regenerates every rank's input from the rank's seed, so each can
compute the expected result itself: the tree of pairwise combinations
    a' = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b
over ranks (0,1), (2,3), then the pairs' results, in float64.
"""

import sys

import khorovod.torch as hvd
import numpy as np
import torch

TINY = np.sqrt(np.finfo(np.float64).tiny)


def pair(a, b):
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    ca = 1.0 - dot / aa * 0.5 if aa >= TINY else 1.0
    cb = 1.0 - dot / bb * 0.5 if bb >= TINY else 1.0
    return ca * a + cb * b


def reference(vectors):
    level = [v.astype(np.float64).ravel() for v in vectors]
    while len(level) > 1:
        level = [pair(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def inputs(rank, shape, dtype, kind):
    g = torch.Generator().manual_seed(1000 * rank + 7 * len(shape) + sum(shape))
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    if kind == "zero" and rank % 2 == 1:
        x = torch.zeros(*shape, dtype=torch.float64)
    if kind == "parallel":  # b = 2a: the formula gives a + b scaled down
        base = torch.randn(*shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        x = base * (rank + 1)
    return x.to(dtype)


TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 5e-3}


def check_values(r, n):
    for dtype in (torch.float64, torch.float32, torch.float16):
        for shape in ((1,), (17,), (1000,), (6, 5, 3)):
            for kind in ("random", "zero", "parallel"):
                mine = inputs(r, shape, dtype, kind)
                got = hvd.allreduce(mine, op=hvd.Adasum, name=f"ad.{dtype}.{shape}.{kind}")
                expect = reference([inputs(k, shape, dtype, kind).numpy() for k in range(n)])
                scale = max(1.0, float(np.abs(expect).max()))
                err = float(np.abs(got.double().numpy().ravel() - expect).max()) / scale
                assert got.dtype == dtype and got.shape == mine.shape
                assert err <= TOLERANCE[dtype], (dtype, shape, kind, err)
                # Every rank holds the same result, bit for bit.
                every = hvd.allgather(got.reshape(1, -1), name=f"ad.same.{dtype}.{shape}.{kind}")
                assert all(torch.equal(every[0], row) for row in every), (dtype, shape, kind)
    # In place and grouped forms, each tensor with its own coefficients.
    a, b = inputs(r, (9,), torch.float32, "random"), inputs(r, (4, 4), torch.float64, "random")
    ga, gb = hvd.grouped_allreduce([a, b], op=hvd.Adasum, name="ad.grouped")
    for got, shape, dtype in ((ga, (9,), torch.float32), (gb, (4, 4), torch.float64)):
        expect = reference([inputs(k, shape, dtype, "random").numpy() for k in range(n)])
        assert np.allclose(got.double().numpy().ravel(), expect, rtol=1e-5, atol=1e-6)
    c = inputs(r, (33,), torch.float32, "random")
    hvd.allreduce_(c, op=hvd.Adasum, name="ad.inplace")
    expect = reference([inputs(k, (33,), torch.float32, "random").numpy() for k in range(n)])
    assert np.allclose(c.double().numpy(), expect, rtol=1e-5, atol=1e-6)


def check_refusals(r, n):
    def raises(exc, fn, needle):
        try:
            fn()
        except exc as e:
            assert needle in str(e), (needle, str(e))
            return
        raise AssertionError(f"expected {exc.__name__} ({needle})")

    raises(
        ValueError,
        lambda: hvd.allreduce(torch.ones(3, dtype=torch.int32), op=hvd.Adasum),
        "float16, float32 and float64",
    )
    raises(
        NotImplementedError, lambda: hvd.reducescatter(torch.ones(2 * n), op=hvd.Adasum), "Adasum"
    )


def check_optimizer(r, n):
    # Each rank's batch differs; the reference replays every rank's local
    # SGD step and combines the parameter changes with Adasum.
    def batch(k):
        g = torch.Generator().manual_seed(50 + k)
        return torch.randn(8, 5, generator=g), torch.randn(8, 2, generator=g)

    def model():
        torch.manual_seed(3)
        return torch.nn.Linear(5, 2)

    lr = 0.1
    net = model()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(net.parameters(), lr=lr),
        named_parameters=net.named_parameters(),
        op=hvd.Adasum,
    )
    x, y = batch(r)
    opt.zero_grad()
    torch.nn.functional.mse_loss(net(x), y).backward()
    opt.step()
    deltas = {name: [] for name, _ in net.named_parameters()}
    for k in range(n):
        ref = model()
        xk, yk = batch(k)
        torch.nn.functional.mse_loss(ref(xk), yk).backward()
        for name, p in ref.named_parameters():
            deltas[name].append((-lr * p.grad).numpy())
    start = dict(model().named_parameters())
    for name, p in net.named_parameters():
        expect = start[name].detach().numpy().ravel() + reference(deltas[name])
        assert np.allclose(p.detach().numpy().ravel(), expect, rtol=1e-5, atol=1e-6), name
    # The combination is not the average: with different batches they differ.
    avg = {name: np.mean(deltas[name], axis=0) for name in deltas}
    assert any(not np.allclose(reference(deltas[k]), avg[k].ravel(), atol=1e-7) for k in deltas)


def check_non_power_of_two(r, n):
    try:
        hvd.allreduce(torch.ones(4), op=hvd.Adasum, name="ad.np2")
    except NotImplementedError as e:
        assert "non-power of 2" in str(e), str(e)
        return
    raise AssertionError("Adasum at a non-power-of-two size was not refused")


CHECKS = {
    "values": check_values,
    "refusals": check_refusals,
    "optimizer": check_optimizer,
    "non_power_of_two": check_non_power_of_two,
}

if __name__ == "__main__":
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    CHECKS[sys.argv[1]](rank, size)
    print(f"{sys.argv[1]} ok", flush=True)
    hvd.shutdown()
    print("OK", flush=True)
