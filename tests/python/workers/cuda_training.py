"""A short training run on a CUDA model under khorovod.torch at N ranks:
parameters broadcast from rank 0 (each rank starts from its own seed),
DistributedOptimizer averaging gradients of device tensors, and a check
that every rank ends with bit-identical parameters and a lower loss.
Run only where torch.cuda.is_available(). Prints 'rank R: OK' at the end."""

import khorovod.torch as hvd
import torch


def batch(gen, dev):
    x = torch.randn(32, 16, generator=gen)
    y = x[:, :4].argmax(dim=1)  # learnable: the largest of the first four inputs
    return x.to(dev), y.to(dev)


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    dev = torch.device("cuda", int(torch.cuda.current_device()) if n == 1 else 0)
    torch.manual_seed(100 + r)  # different initial weights everywhere: the broadcast must fix that
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())

    gen = torch.Generator().manual_seed(7 + r)  # each rank its own data
    losses = []
    for _ in range(60):
        x, y = batch(gen, dev)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert flat.device == dev
    rows = hvd.allgather(flat.unsqueeze(0), name="final.params")
    for k in range(n):
        assert torch.equal(rows[k], rows[0]), f"rank {k}'s parameters differ from rank 0's"
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.7 * first, f"loss did not fall: {first:.3f} -> {last:.3f}"
    print(f"rank {r}: OK loss {first:.3f} -> {last:.3f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
