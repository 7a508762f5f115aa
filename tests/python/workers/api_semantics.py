"""horovod.torch semantics at N ranks, one check per API item (issue 17):
dtypes, autograd through every collective, grouped allgather and
reducescatter, Horovod's exception types, duplicate in-flight names, join,
optimizer-state broadcast, DistributedOptimizer variants, SyncBatchNorm,
sparse allreduce, the *_built queries and the refusals (Adasum at 3 ranks, timeline). Prints 'rank R: <check> ok' per check and 'rank R: OK' last."""

import json
import os
import sys
import tempfile
import time

import khorovod.torch as hvd
import torch

DTYPES = [
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.bool,
]


def rank_value(dtype, r):
    return (
        torch.full((2, 3), r % 2 == 0, dtype=dtype)
        if dtype == torch.bool
        else torch.full((2, 3), r + 1, dtype=dtype)
    )


def check_dtypes(r, n):
    for dt in DTYPES:
        x = rank_value(dt, r)
        if dt == torch.bool:
            assert torch.equal(
                hvd.allreduce(x, op=hvd.Sum, name=f"dt.or.{dt}"), torch.ones(2, 3, dtype=dt)
            )  # some rank is even
            assert torch.equal(
                hvd.allreduce(x, op=hvd.Min, name=f"dt.and.{dt}"), torch.zeros(2, 3, dtype=dt)
            )  # rank 1 is odd
        else:
            total = sum(range(1, n + 1))
            out = hvd.allreduce(x, op=hvd.Sum, name=f"dt.sum.{dt}")
            assert out.dtype == dt and torch.equal(out, torch.full((2, 3), total, dtype=dt)), out
            rs = hvd.reducescatter(torch.cat([x] * n), op=hvd.Sum, name=f"dt.rs.{dt}")
            assert torch.equal(rs, torch.full((2, 3), total, dtype=dt)), rs
        g = hvd.allgather(x, name=f"dt.ag.{dt}")
        assert torch.equal(g, torch.cat([rank_value(dt, k) for k in range(n)])), (dt, g)
        b = hvd.broadcast(x, root_rank=n - 1, name=f"dt.bc.{dt}")
        assert torch.equal(b, rank_value(dt, n - 1)), (dt, b)
        a = hvd.alltoall(torch.cat([x[:1]] * n), name=f"dt.a2a.{dt}")
        assert torch.equal(a, torch.cat([rank_value(dt, k)[:1] for k in range(n)])), (dt, a)
    try:
        hvd.allreduce(torch.ones(2, dtype=torch.bool), op=hvd.Average)
        raise AssertionError("Average on bool accepted")
    except ValueError:
        pass


def weights(k, shape):
    """A gradient that differs per rank k, known to every rank."""
    return (torch.arange(torch.Size(shape).numel(), dtype=torch.float64).reshape(shape) + 1) * (
        k + 1
    )


def check_autograd(r, n):
    x = torch.full((2, 3), float(r), dtype=torch.float64, requires_grad=True)
    for op, scale in ((hvd.Average, 1.0 / n), (hvd.Sum, 1.0)):
        y = hvd.allreduce(x, op=op, name=f"ag.ar.{op}")
        (y * weights(r, y.shape)).sum().backward()
        assert torch.allclose(x.grad, sum(weights(k, y.shape) for k in range(n)) * scale), x.grad
        x.grad = None
    # Horovod's gradient definitions (horovod/torch/mpi_ops.py): allgather
    # and broadcast average the gradient over ranks. allgather: rank k has
    # k+1 rows.
    xs = torch.ones(r + 1, 2, dtype=torch.float64, requires_grad=True)
    y = hvd.allgather(xs, name="ag.gather")
    (y * weights(r, y.shape)).sum().backward()
    total = sum(weights(k, y.shape) for k in range(n)) / n
    assert torch.allclose(xs.grad, total[r * (r + 1) // 2 : r * (r + 1) // 2 + r + 1]), xs.grad
    # broadcast from the last rank.
    xb = torch.ones(2, 2, dtype=torch.float64, requires_grad=True)
    y = hvd.broadcast(xb, root_rank=n - 1, name="ag.bcast")
    (y * weights(r, y.shape)).sum().backward()
    expect = sum(weights(k, y.shape) for k in range(n)) / n if r == n - 1 else torch.zeros(2, 2)
    assert torch.allclose(xb.grad, expect.double()), xb.grad
    # alltoall with equal splits of 2 rows: my block k went to rank k, and
    # its gradient is block r of rank k's weights.
    xa = torch.ones(2 * n, 3, dtype=torch.float64, requires_grad=True)
    y, _ = hvd.alltoall(xa, splits=[2] * n, name="ag.a2a")
    (y * weights(r, y.shape)).sum().backward()
    expect = torch.cat([weights(k, y.shape)[2 * r : 2 * r + 2] for k in range(n)])
    assert torch.allclose(xa.grad, expect), xa.grad
    # reducescatter: the gradient of my rows of block k is rank k's weights,
    # times the size for Sum (Horovod's definition; Average's as is).
    for op, scale in ((hvd.Sum, float(n)), (hvd.Average, 1.0)):
        xr = torch.ones(2 * n, 3, dtype=torch.float64, requires_grad=True)
        y = hvd.reducescatter(xr, op=op, name=f"ag.rs.{op}")
        (y * weights(r, y.shape)).sum().backward()
        expect = torch.cat([weights(k, y.shape) for k in range(n)]) * scale
        assert torch.allclose(xr.grad, expect), xr.grad
    # grouped forms.
    a = torch.ones(3, dtype=torch.float64, requires_grad=True)
    b = torch.ones(2, 2, dtype=torch.float64, requires_grad=True)
    ya, yb = hvd.grouped_allreduce([a, b], op=hvd.Sum, name="ag.gar")
    ((ya * (r + 1)).sum() + (yb * 2).sum()).backward()
    assert torch.allclose(a.grad, torch.full((3,), float(n * (n + 1) // 2), dtype=torch.float64))
    assert torch.allclose(b.grad, torch.full((2, 2), 2.0 * n, dtype=torch.float64))
    a = torch.ones(r + 1, dtype=torch.float64, requires_grad=True)
    (ga,) = hvd.grouped_allgather([a], name="ag.gag")
    (ga * weights(r, ga.shape)).sum().backward()
    total = sum(weights(k, ga.shape) for k in range(n)) / n
    assert torch.allclose(a.grad, total[r * (r + 1) // 2 : r * (r + 1) // 2 + r + 1])
    c = torch.ones(2 * n, dtype=torch.float64, requires_grad=True)
    (gc,) = hvd.grouped_reducescatter([c], op=hvd.Sum, name="ag.grs")
    (gc * weights(r, gc.shape)).sum().backward()
    assert torch.allclose(c.grad, torch.cat([weights(k, gc.shape) for k in range(n)]) * n)


def check_grouped(r, n):
    parts = [torch.full((r + 1, 2), float(r)), torch.full((1,), r, dtype=torch.int32)]
    g = hvd.synchronize(hvd.grouped_allgather_async(parts, name="grp.ag"))
    assert torch.equal(g[0], torch.cat([torch.full((k + 1, 2), float(k)) for k in range(n)]))
    assert torch.equal(g[1], torch.arange(n, dtype=torch.int32))
    ins = [torch.ones(2 * n, 2), torch.arange(n, dtype=torch.int64) * (r + 1)]
    h = hvd.grouped_reducescatter_async(ins, op=hvd.Sum, name="grp.rs")
    rs = hvd.synchronize(h)
    assert hvd.poll(h)
    assert torch.equal(rs[0], torch.full((2, 2), float(n)))
    assert torch.equal(rs[1], torch.tensor([r * n * (n + 1) // 2]))


def expect_raise(kinds, fn, what):
    try:
        fn()
    except kinds as e:
        return e
    raise AssertionError(f"{what}: no {kinds} raised")


def check_errors(r, n):
    # Mismatches across ranks raise on every rank (RuntimeError, as
    # Horovod's HorovodInternalError/torch.FatalError), and the job goes on.
    expect_raise(
        RuntimeError, lambda: hvd.allreduce(torch.ones(r + 1), name="err.shape"), "shape mismatch"
    )
    dt = torch.float32 if r == 0 else torch.float64
    expect_raise(
        RuntimeError,
        lambda: hvd.allreduce(torch.ones(2, dtype=dt), name="err.dtype"),
        "dtype mismatch",
    )
    op = hvd.Sum if r == 0 else hvd.Max
    expect_raise(
        RuntimeError, lambda: hvd.allreduce(torch.ones(2), op=op, name="err.op"), "op mismatch"
    )
    expect_raise(
        RuntimeError,
        lambda: hvd.broadcast(torch.ones(2), root_rank=r, name="err.root"),
        "root mismatch",
    )
    assert torch.equal(
        hvd.allreduce(torch.ones(2), op=hvd.Sum, name="err.after"), torch.full((2,), float(n))
    )
    # Invalid arguments: ValueError on the calling rank.
    expect_raise(
        ValueError, lambda: hvd.allreduce(torch.ones(2, dtype=torch.complex64)), "complex dtype"
    )
    expect_raise(
        ValueError, lambda: hvd.broadcast(torch.ones(2), root_rank=n + 3), "root outside the job"
    )
    assert torch.equal(
        hvd.allreduce(torch.ones(2), op=hvd.Sum, name=""),  # no name, as Horovod
        torch.full((2,), float(n)),
    )
    expect_raise(ValueError, lambda: hvd.allreduce(torch.ones(2), op=42), "unknown op")
    if n & (n - 1):  # Horovod's refusal; power-of-two sizes: tests/python/test_adasum.py
        e = expect_raise(
            NotImplementedError, lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum), "Adasum"
        )
        assert "non-power of 2" in str(e) and isinstance(e, RuntimeError)
    # A name still in flight: ValueError from the second submission. Each
    # rank submits its duplicate while the op cannot complete (a peer has
    # not submitted yet): rank 0 is late for "dup.a", the others for "dup.b".
    late, early = ("dup.a", "dup.b") if r == 0 else ("dup.b", "dup.a")
    h_early = hvd.allreduce_async(torch.ones(4), name=early)
    expect_raise(
        ValueError, lambda: hvd.allreduce_async(torch.ones(4), name=early), "duplicate name"
    )
    time.sleep(0.5)
    h_late = hvd.allreduce_async(torch.ones(4), name=late)
    for h in (h_early, h_late):
        assert torch.allclose(hvd.synchronize(h), torch.ones(4))


def check_join(r, n):
    if r == 0:
        hvd.join()
        return
    start = time.monotonic()
    out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="join.ar")
    assert torch.equal(out, torch.full((3,), float(n - 1))), out  # the joined rank adds zeros
    for what, call in (
        ("allgather", lambda: hvd.allgather(torch.ones(1), name="join.ag")),
        ("broadcast", lambda: hvd.broadcast(torch.ones(1), 1, name="join.bc")),
        ("alltoall", lambda: hvd.alltoall(torch.ones(n), name="join.a2a")),
    ):
        expect_raise(RuntimeError, call, f"{what} while a rank joined")
    assert time.monotonic() - start < 20, "join conflicts must raise, not stall"
    hvd.join()


def check_optimizer_state(r, n):
    optimizers = [
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        lambda p: torch.optim.Adam(p, lr=0.01),
        lambda p: torch.optim.AdamW(p, lr=0.01),
        lambda p: torch.optim.Adagrad(p, lr=0.01),
        lambda p: torch.optim.Adadelta(p),
        lambda p: torch.optim.Adamax(p),
        lambda p: torch.optim.RMSprop(p, lr=0.01),
        lambda p: torch.optim.ASGD(p),
        lambda p: torch.optim.Rprop(p),
        lambda p: torch.optim.NAdam(p),
        lambda p: torch.optim.RAdam(p),
    ]
    for i, make in enumerate(optimizers):
        torch.manual_seed(1 + r)
        model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 2))
        opt = make(model.parameters())
        for g in opt.param_groups:
            g["lr"] = g.get("lr", 1.0) * (r + 1)  # root's options must win
        # Only the first layer gets gradients on the root: the second has
        # no state there yet.
        if r == 0:
            model[0](torch.randn(4, 3)).sum().backward()
            opt.step()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        root = hvd.broadcast_object(opt.state_dict(), root_rank=0, name=f"opt.sd.{i}")
        mine = opt.state_dict()
        assert [g["lr"] for g in mine["param_groups"]] == [g["lr"] for g in root["param_groups"]], (
            i,
            mine["param_groups"],
        )
        assert sorted(mine["state"]) == sorted(root["state"]), i
        for k, slots in root["state"].items():
            for key, v in slots.items():
                mv = mine["state"][k][key]
                assert torch.equal(torch.as_tensor(mv), torch.as_tensor(v)), (i, key)


def params_agree(model, tag):
    for name, p in model.named_parameters():
        allp = hvd.allgather(p.detach().unsqueeze(0), name=f"{tag}.{name}")
        assert all(torch.allclose(allp[0], q) for q in allp), (tag, name)


def check_distributed_optimizer(r, n):
    # Without named_parameters, with a parameter that never gets a gradient.
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    unused = torch.nn.Parameter(torch.ones(2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(list(model.parameters()) + [unused], lr=0.1))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(3):
        opt.zero_grad()
        torch.manual_seed(100 * r + step)
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
    params_agree(model, "dopt.noname")
    assert torch.equal(unused.detach(), torch.ones(2))  # zero gradient, SGD leaves it
    # backward_passes_per_step=2 with synchronize()/skip_synchronize(), on a
    # fresh model (the first optimizer's hooks stay on the first one).
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=2,
    )
    for step in range(2):
        opt.zero_grad()
        for _ in range(2):
            model(torch.randn(8, 4) * (r + 1)).sum().backward()
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        with opt.skip_synchronize():
            opt.step()
    params_agree(model, "dopt.bpps")


def check_sparse(r, n):
    dense = torch.zeros(n + 1, 2)
    dense[r] = r + 1.0
    dense[r + 1] = 1.0
    out = hvd.synchronize(hvd.sparse_allreduce_async(dense.to_sparse(), name="sp.raw", op=hvd.Sum))
    expect = torch.zeros(n + 1, 2)
    for k in range(n):
        expect[k] += k + 1.0
        expect[k + 1] += 1.0
    assert out.is_sparse and torch.allclose(out.to_dense(), expect), out
    results = []
    for as_dense in (False, True):
        torch.manual_seed(3)
        emb = torch.nn.Embedding(10, 3, sparse=True)
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(emb.parameters(), lr=0.5),
            named_parameters=emb.named_parameters(prefix=f"e{as_dense}"),
            sparse_as_dense=as_dense,
        )
        emb(torch.tensor([r, r + 1, 5])).sum().backward()
        opt.step()
        params_agree(emb, f"sp.{as_dense}")
        results.append(emb.weight.detach().clone())
    assert torch.allclose(results[0], results[1])


def check_sync_batch_norm(r, n):
    torch.manual_seed(11)
    full = torch.randn(4 * n, 3, 5, dtype=torch.float64)
    ref = torch.nn.BatchNorm1d(3).double()
    sync = hvd.SyncBatchNorm(3).double()
    mine = full[4 * r : 4 * r + 4].clone().requires_grad_()
    whole = full.clone().requires_grad_()
    w = torch.randn(4 * n, 3, 5, dtype=torch.float64)
    ref_out = ref(whole)  # one forward: each also updates the running statistics
    (ref_out * w).sum().backward()
    out = sync(mine)
    (out * w[4 * r : 4 * r + 4]).sum().backward()
    assert torch.allclose(out, ref_out.detach()[4 * r : 4 * r + 4], atol=1e-6)
    assert torch.allclose(mine.grad, whole.grad[4 * r : 4 * r + 4], atol=1e-6), "input grad"
    assert torch.allclose(sync.running_mean, ref.running_mean, atol=1e-6)
    assert torch.allclose(sync.running_var, ref.running_var, atol=1e-6)


def timeline_tensors(path):
    """Tensor names with events in a timeline file (which must be complete
    JSON) and the number of CYCLE_START marks."""
    with open(path) as f:
        trace = json.load(f)
    tensors = {e["args"]["tensor"] for e in trace if e.get("ph") == "X"}
    return tensors, sum(1 for e in trace if e.get("name") == "CYCLE_START")


def check_timeline(r):
    # One file per rank ("{rank}"), under a directory the whole job shares.
    pattern = os.path.join(tempfile.gettempdir(), f"khorovod-tl-{os.getppid()}-{{rank}}.json")
    mine = pattern.replace("{rank}", str(r))
    hvd.allreduce(torch.ones(1), name="tl.before")
    hvd.start_timeline(pattern, mark_cycles=True)
    hvd.allreduce(torch.ones(1), name="tl.during")
    hvd.allgather(torch.ones(1), name="tl.during.gather")
    hvd.stop_timeline()
    hvd.allreduce(torch.ones(1), name="tl.after")
    try:
        tensors, cycles = timeline_tensors(mine)
    finally:
        os.unlink(mine)
    assert tensors == {"tl.during", "tl.during.gather"}, tensors
    assert cycles >= 1


def check_queries(r, n):
    from khorovod import _build_info

    assert hvd.nccl_built() == _build_info.NCCL_BUILT and hvd.gloo_built() and hvd.gloo_enabled()
    # Horovod answers NCCL_VERSION_CODE (an int, >= 2.14's 21400 here) or 0.
    assert type(hvd.nccl_built()) is int
    assert hvd.nccl_built() == 0 or hvd.nccl_built() >= 21400, hvd.nccl_built()
    # The NCCL loaded at run time (a khorovod extension): a version >= 2.27
    # with its path, or an error listing what was searched; nothing without NCCL.
    if hvd.nccl_built():
        try:
            info = hvd.nccl_runtime_info()
            assert info["version_code"] >= 22700 and info["path"], info
            assert hvd.nccl_runtime_version() == info["version_code"]
        except hvd.KhorovodError as e:
            assert "no NCCL >= 2.27 found" in str(e) and "libnccl.so.2" in str(e), str(e)
    else:
        assert hvd.nccl_runtime_info() == {} and hvd.nccl_runtime_version() == 0
    # khorovodrun puts every rank on this host: one host, so homogeneous;
    # local_size must be the world size for that to be the right answer.
    assert hvd.local_size() == n and hvd.is_homogeneous() is True
    assert not hvd.ccl_built() and not hvd.mpi_built() and not hvd.ddl_built()
    check_timeline(r)
    assert hvd.global_process_set.size() == n and hvd.global_process_set.rank() == r
    out = hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=hvd.global_process_set)
    assert torch.equal(out, torch.full((1,), float(n)))
    # add_process_set without dynamic process sets is refused, as in Horovod
    # (test_process_sets.py covers process sets themselves).
    expect_raise(ValueError, lambda: hvd.add_process_set([0]), "dynamic process sets")


CHECKS = {
    f.__name__[len("check_") :]: f
    for f in (
        check_dtypes,
        check_autograd,
        check_grouped,
        check_errors,
        check_join,
        check_optimizer_state,
        check_distributed_optimizer,
        check_sparse,
        check_sync_batch_norm,
        check_queries,
    )
}


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    for name in sys.argv[1:] or CHECKS:
        CHECKS[name](r, n)
        print(f"rank {r}: {name} ok", flush=True)
    hvd.shutdown()
    print(f"rank {r}: OK", flush=True)


if __name__ == "__main__":
    main()
