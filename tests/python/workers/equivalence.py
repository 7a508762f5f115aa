"""N ranks with DistributedOptimizer versus one process on the concatenated
batch: after K steps the weights must agree to float tolerance.

Each rank builds the same model (seeded), the same global batches, and runs
the single-process reference itself on the whole batch, then trains its
shard through DistributedOptimizer. Usage: equivalence.py OPTIMIZER
[compression] [backward_passes_per_step] [predivide] [clip]. With "clip",
both clip the gradient norm before stepping: the distributed run with
opt.synchronize(), clip, then step() inside opt.skip_synchronize()."""

import sys

import khorovod.torch as hvd
import torch

K, BATCH_PER_RANK, IN, HIDDEN, OUT = 6, 8, 10, 16, 3


def make_model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT)
    )


def make_optimizer(kind, params, lr_scale=1.0):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.1 * lr_scale, momentum=0.9)
    if kind == "adam":
        return torch.optim.Adam(params, lr=0.01 * lr_scale)
    raise SystemExit(f"unknown optimizer {kind}")


def main():
    kind = sys.argv[1]
    compression = (
        hvd.Compression.fp16
        if len(sys.argv) > 2 and sys.argv[2] == "fp16"
        else hvd.Compression.none
    )
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    predivide = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    clip = len(sys.argv) > 5 and sys.argv[5] == "clip"
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    g = torch.Generator().manual_seed(99)
    # batches[step][pass] = (x, y) of the global batch
    batches = [
        [
            (
                torch.randn(BATCH_PER_RANK * size, IN, generator=g),
                torch.randint(0, OUT, (BATCH_PER_RANK * size,), generator=g),
            )
            for _ in range(passes)
        ]
        for _ in range(K)
    ]
    loss_fn = torch.nn.CrossEntropyLoss()

    # Reference: one process, whole batch, gradients of each pass summed
    # locally (what backward_passes_per_step accumulates).
    ref = make_model()
    ref_opt = make_optimizer(kind, ref.parameters())
    for step in batches:
        ref_opt.zero_grad()
        for x, y in step:
            loss_fn(ref(x), y).backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.05)
        ref_opt.step()

    model = make_model()
    opt = hvd.DistributedOptimizer(
        make_optimizer(kind, model.parameters()),
        named_parameters=model.named_parameters(),
        compression=compression,
        backward_passes_per_step=passes,
        gradient_predivide_factor=predivide,
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    lo, hi = rank * BATCH_PER_RANK, (rank + 1) * BATCH_PER_RANK
    for step in batches:
        opt.zero_grad()
        for x, y in step:
            loss_fn(model(x[lo:hi]), y[lo:hi]).backward()
        if clip:
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()

    tol = 5e-3 if compression is hvd.Compression.fp16 else 1e-5
    worst = max((a - b).abs().max().item() for a, b in zip(model.parameters(), ref.parameters()))
    print(f"rank {rank}: max |distributed - single| = {worst:.3g} (tolerance {tol})")
    moved = max(
        (a - b).abs().max().item() for a, b in zip(model.parameters(), make_model().parameters())
    )
    assert moved > 1e-2, f"training did not move the weights ({moved})"
    assert worst < tol, f"weights differ from the single-process run by {worst}"
    hvd.shutdown()
    print(f"rank {rank}: OK")


if __name__ == "__main__":
    main()
