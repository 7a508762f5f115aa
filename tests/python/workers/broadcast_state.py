"""broadcast_parameters and broadcast_optimizer_state: ranks start from
different weights and optimizer states (only rank 0 has stepped, so only it
has Adam's moment buffers, and its lr differs); afterwards every rank must
hold rank 0's exactly. Also checks broadcast_object and allgather_object."""

import khorovod.torch as hvd
import torch


def flat_state(opt):
    sd = opt.state_dict()
    tensors = [
        v for slot in sd["state"].values() for v in slot.values() if isinstance(v, torch.Tensor)
    ]
    return sd["param_groups"][0]["lr"], tensors


def main():
    hvd.init()
    rank = hvd.rank()
    torch.manual_seed(100 + rank)  # different weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 2))
    model.register_buffer("counter", torch.tensor([rank], dtype=torch.int64))
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1))
    if rank == 0:
        model(torch.randn(4, 5)).sum().backward()
        opt.step()
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())

    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    mine = [p.detach().clone() for p in model.state_dict().values()]
    lr, slots = flat_state(opt)
    everyone = hvd.allgather_object((mine, lr, slots))
    root = everyone[0]
    assert lr == 0.01, f"rank {rank}: lr {lr}, expected root's 0.01"
    assert len(slots) == 2 * 4 + 4, (
        f"rank {rank}: expected Adam state for 4 params, got {len(slots)}"
    )
    for r, (params, r_lr, r_slots) in enumerate(everyone):
        assert all(torch.equal(a, b) for a, b in zip(params, root[0])), f"rank {r} params differ"
        assert r_lr == root[1]
        assert all(torch.equal(a, b) for a, b in zip(r_slots, root[2])), f"rank {r} state differs"
    assert int(model.counter.item()) == 0, "buffers are broadcast too"

    # A training step after the broadcast keeps ranks identical.
    opt.zero_grad()
    torch.manual_seed(7 + rank)
    model(torch.randn(4, 5)).sum().backward()
    opt.step()
    after = hvd.allgather_object([p.detach() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(after[0], after[-1])), "diverged after a step"

    obj = hvd.broadcast_object({"from": rank, "payload": list(range(rank + 3))}, root_rank=1)
    assert obj == {"from": 1, "payload": [0, 1, 2, 3]}, obj
    gathered = hvd.allgather_object("x" * rank)
    assert gathered == ["x" * r for r in range(hvd.size())], gathered
    hvd.shutdown()
    print(f"rank {rank}: OK")


if __name__ == "__main__":
    main()
