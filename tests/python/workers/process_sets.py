"""Process sets at N ranks (2 or 3), one check per argv item:

- static: sets passed to init(process_sets=...); every collective (and its
  async, grouped and autograd forms) with process_set= runs among the
  members only, with the set's ranks and size; non-members are refused
  with ValueError.
- dynamic: add_process_set/remove_process_set need dynamic process sets;
  a removed set is refused afterwards; a set dropped by shutdown/init is
  unregistered.
- mismatch: one name submitted in two sets by ranks that wait for each
  other, and a shape mismatch inside a set, raise on every rank involved.
- optimizer: DistributedOptimizer, broadcast_parameters and
  broadcast_optimizer_state with process_set.
Prints 'rank R: <check> ok' per check and 'rank R: OK' last."""

import os
import sys

import khorovod.torch as hvd
import torch


def expect_raise(exc, fn, needle):
    try:
        fn()
    except exc as e:
        assert needle in str(e), f"expected '{needle}' in: {e}"
        return e
    raise AssertionError(f"expected {exc.__name__} ({needle})")


def member_sets(n):
    """first: all but the last rank; last: the last rank alone; ends: the
    first and last ranks (a strict subset only at 3 ranks)."""
    sets = {"first": list(range(n - 1)), "last": [n - 1]}
    if n > 2:
        sets["ends"] = [0, n - 1]
    return sets


def check_collectives(ps, r, tag):
    members = ps.ranks
    k, size = len(members), ps.size()
    assert size == k
    if r not in members:
        assert not ps.included() and ps.rank() == -1
        expect_raise(
            ValueError,
            lambda: hvd.allreduce(torch.ones(2), process_set=ps, name=f"{tag}.outsider"),
            "not a member of process set",
        )
        expect_raise(ValueError, lambda: hvd.barrier(process_set=ps), "not a member")
        return
    me = members.index(r)
    assert ps.included() and ps.rank() == me
    x = torch.full((2, 3), float(r + 1))
    total = float(sum(m + 1 for m in members))
    assert torch.equal(
        hvd.allreduce(x, op=hvd.Sum, process_set=ps, name=f"{tag}.sum"), torch.full((2, 3), total)
    )
    assert torch.allclose(
        hvd.allreduce(x, process_set=ps, name=f"{tag}.avg"), torch.full((2, 3), total / k)
    )
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Sum, process_set=ps, name=f"{tag}.inplace")
    assert torch.equal(y, torch.full((2, 3), total))
    h = hvd.allreduce_async(x, op=hvd.Max, process_set=ps, name=f"{tag}.async")
    assert torch.equal(hvd.synchronize(h), torch.full((2, 3), float(members[-1] + 1)))
    outs = hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, process_set=ps, name=f"{tag}.grouped")
    assert torch.equal(outs[1], torch.full((2, 3), 2 * total))
    # allgather in member order; rank m contributes m+1 rows.
    g = hvd.allgather(torch.full((r + 1, 2), float(r)), process_set=ps, name=f"{tag}.gather")
    assert torch.equal(g, torch.cat([torch.full((m + 1, 2), float(m)) for m in members])), g
    gg = hvd.synchronize(
        hvd.grouped_allgather_async(
            [torch.full((1,), float(r))] * 2, process_set=ps, name=f"{tag}.ggather"
        )
    )
    assert torch.equal(gg[0], torch.tensor([float(m) for m in members]))
    # broadcast: root_rank is a global rank.
    b = hvd.broadcast(
        torch.full((3,), float(r)), root_rank=members[-1], process_set=ps, name=f"{tag}.bcast"
    )
    assert torch.equal(b, torch.full((3,), float(members[-1])))
    outsiders = [q for q in range(hvd.size()) if q not in members]
    if outsiders:
        expect_raise(
            ValueError,
            lambda: hvd.broadcast(
                torch.ones(1), root_rank=outsiders[0], process_set=ps, name=f"{tag}.badroot"
            ),
            "not a member",
        )
    # alltoall: one row to each member, holding the sender's rank.
    a = hvd.alltoall(torch.full((k, 1), float(r)), process_set=ps, name=f"{tag}.a2a")
    assert torch.equal(a, torch.tensor([[float(m)] for m in members])), a
    # reducescatter: k rows of (r+1); this member gets row `me` of the sum.
    rs = hvd.reducescatter(
        torch.full((k, 2), float(r + 1)), op=hvd.Sum, process_set=ps, name=f"{tag}.rs"
    )
    assert torch.equal(rs, torch.full((1, 2), total)), rs
    grs = hvd.grouped_reducescatter(
        [torch.full((k, 2), 1.0)], op=hvd.Average, process_set=ps, name=f"{tag}.grs"
    )
    assert torch.equal(grs[0], torch.ones(1, 2))
    # autograd: the gradient of an in-set Sum allreduce is the in-set sum.
    w = torch.ones(2, requires_grad=True)
    (hvd.allreduce(w, op=hvd.Sum, process_set=ps, name=f"{tag}.grad") * (r + 1)).sum().backward()
    assert torch.equal(w.grad, torch.full((2,), total)), w.grad
    v = torch.ones(1, 2, requires_grad=True)
    out = hvd.allgather(v, process_set=ps, name=f"{tag}.ggrad")
    (out * torch.arange(1, k + 1, dtype=torch.float32).unsqueeze(1)).sum().backward()
    # Horovod's allgather gradient averages over the set's k members.
    assert torch.equal(v.grad, torch.full((1, 2), float(me + 1))), v.grad
    hvd.barrier(process_set=ps)
    # Unnamed collectives count per set: the global ones still pair up.
    hvd.allreduce(torch.ones(1), process_set=ps)


def check_static(r, n):
    sets = {name: hvd.ProcessSet(ranks) for name, ranks in member_sets(n).items()}
    hvd.init(process_sets=list(sets.values()))
    for name, ps in sets.items():
        assert ps.process_set_id is not None and ps.process_set_id > 0, ps
        check_collectives(ps, r, f"static.{name}")
    assert torch.equal(hvd.allreduce(torch.ones(1), op=hvd.Sum), torch.full((1,), float(n)))
    expect_raise(ValueError, lambda: hvd.add_process_set([0]), "dynamic process sets")


def check_dynamic(r, n):
    os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
    hvd.init()
    for name, ranks in member_sets(n).items():
        ps = hvd.add_process_set(ranks)
        check_collectives(ps, r, f"dynamic.{name}")
        expect_raise(
            ValueError, lambda ranks=ranks: hvd.add_process_set(list(ranks)), "already registered"
        )
        assert hvd.remove_process_set(ps) is True
        assert ps.process_set_id is None and ps.size() is None
        expect_raise(
            ValueError, lambda ps=ps: hvd.allreduce(torch.ones(1), process_set=ps), "not registered"
        )
    assert hvd.remove_process_set(hvd.global_process_set) is False
    expect_raise(ValueError, lambda: hvd.add_process_set([0, n]), "must be distinct, ascending")
    # Registration is collective and checked: ranks asking for different
    # sets are told so on every rank.
    expect_raise(RuntimeError, lambda: hvd.add_process_set([r]), "mismatched process set ranks")


def check_mismatch(r, n):
    os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
    hvd.init()
    # At 2 ranks every non-global set has one member, which never waits.
    if n > 2:
        pair = hvd.add_process_set([0, 1])
        # Rank 0 submits 'clash' in `pair`, every other rank in the global
        # set: rank 0 waits for a member that holds the global 'clash', and
        # the global 'clash' waits for rank 0.
        ps = pair if r == 0 else None
        e = expect_raise(
            RuntimeError,
            lambda: hvd.allreduce(torch.ones(2), name="clash", process_set=ps),
            "different process sets",
        )
        assert getattr(e, "code", "") == "MISMATCH", e
        if pair.included():
            shape = (2,) if r == 0 else (3,)
            expect_raise(
                RuntimeError,
                lambda: hvd.allreduce(torch.ones(shape), name="bad.shape", process_set=pair),
                "mismatched shape",
            )
    e = expect_raise(RuntimeError, lambda: hvd.add_process_set([r]), "mismatched process set ranks")
    assert getattr(e, "code", "") == "MISMATCH", e
    # Everything still works afterwards.
    assert torch.equal(
        hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after"), torch.full((1,), float(n))
    )


def check_optimizer(r, n):
    os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
    hvd.init()
    group = hvd.add_process_set(list(range(n - 1)))
    if not group.included():
        hvd.barrier()
        return
    members = group.ranks
    torch.manual_seed(r)
    model = torch.nn.Linear(3, 1, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=members[-1], process_set=group)
    torch.manual_seed(members[-1])
    assert torch.equal(model.weight, torch.nn.Linear(3, 1, bias=False).weight)
    dopt = hvd.DistributedOptimizer(
        opt, named_parameters=model.named_parameters(), process_set=group
    )
    before = model.weight.detach().clone()
    model(torch.full((1, 3), float(r + 1))).sum().backward()
    dopt.step()
    mean = sum(m + 1 for m in members) / len(members)
    assert torch.allclose(model.weight, before - 0.5 * mean), (model.weight, before)
    hvd.broadcast_optimizer_state(dopt, root_rank=members[0], process_set=group)
    hvd.barrier()


CHECKS = {
    "static": check_static,
    "dynamic": check_dynamic,
    "mismatch": check_mismatch,
    "optimizer": check_optimizer,
}


def main():
    name = sys.argv[1]
    CHECKS[name](int(os.environ["KHOROVOD_RANK"]), int(os.environ["KHOROVOD_SIZE"]))
    r = hvd.rank()
    print(f"rank {r}: {name} ok", flush=True)
    hvd.shutdown()
    print(f"rank {r}: OK", flush=True)


if __name__ == "__main__":
    main()
