"""A training step three ways at the same rank count: compute alone
("local": no communication), khorovod.torch's DistributedOptimizer, and
torch DistributedDataParallel, in alternating blocks so that drift (clocks,
other load) falls on all three alike. Also the communication alone for each
(every gradient allreduced after backward, nothing to hide it behind), from
which the overlap is estimated:

    overlap = (local + comm_alone - step) / comm_alone     (clipped to 0..1)

i.e. the fraction of the communication hidden behind the backward pass.

Launch with khorovodrun (one process per rank); torch.distributed is formed
alongside khorovod over tcp://127.0.0.1:PORT. On CUDA, DDP uses NCCL; on the
CPU (the dry run of scripts/gpu-check.sh) it uses Gloo. Several ranks on one
GPU: khorovod needs KHOROVOD_GPU_SHARE=1; for torch's NCCL this script gives
each process its own NCCL_HOSTID (before any NCCL call) unless set.

Rank 0 prints one line per figure ("step-ms: ...", "overlap: ...") and,
with --json, writes them to a file.
"""

import argparse
import json
import os
import statistics
import time

import khorovod.torch as hvd
import torch
import torch.distributed as dist


def make_model(name):
    if name == "resnet50":
        import torchvision  # noqa: PLC0415 (only this model needs it)

        return torchvision.models.resnet50(), (3, 224, 224), 1000
    # A small stand-in for the dry run: the same structure of many tensors.
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    return (
        torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 256), *layers, torch.nn.Linear(256, 10)
        ),
        (3, 16, 16),
        10,
    )


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50", choices=["resnet50", "mlp"])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=10, help="steps per block")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--port", type=int, default=int(os.environ.get("KH_BENCH_PORT", "29533")))
    p.add_argument("--json", default="")
    return p.parse_args()


def report(args, times, n, dev):
    """Rank 0's lines (and JSON): each measure's median and spread, and the
    overlap of communication with the backward pass."""
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "ranks": n,
        "model": args.model,
        "batch": args.batch,
        "device": str(dev),
        "torch": torch.__version__,
        "step_ms": med,
    }
    for k in times:
        s = sorted(times[k])
        print(
            f"step-ms: {k} ranks={n} median={med[k]:.2f} p10={s[len(s) // 10]:.2f} "
            f"p90={s[(len(s) * 9) // 10]:.2f} n={len(s)}",
            flush=True,
        )
    for v in ("khorovod", "ddp"):
        c = med[f"comm-{v}"]
        ov = max(0.0, min(1.0, (med["local"] + c - med[v]) / c)) if c > 0 else 0.0
        out[f"overlap_{v}"] = ov
        print(
            f"overlap: {v} ranks={n} {ov:.2f} (step {med[v]:.2f} ms, local {med['local']:.2f}, "
            f"comm alone {c:.2f})",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


def main():
    args = parse_args()

    cuda = torch.cuda.is_available()
    if cuda:
        os.environ.setdefault("NCCL_HOSTID", f"khorovod-bench-{os.getpid()}")
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    dev = (
        torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        if cuda
        else torch.device("cpu")
    )
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group(
        "nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=r, world_size=n
    )

    torch.manual_seed(0)
    base, shape, classes = make_model(args.model)
    models = {}
    for v in ("local", "khorovod", "ddp"):
        m, _, _ = make_model(args.model)
        m.load_state_dict(base.state_dict())
        models[v] = m.to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(
        models["ddp"], device_ids=[dev] if cuda else None
    )
    opts = {
        "local": torch.optim.SGD(models["local"].parameters(), lr=0.01),
        "khorovod": hvd.DistributedOptimizer(
            torch.optim.SGD(models["khorovod"].parameters(), lr=0.01),
            named_parameters=models["khorovod"].named_parameters(),
        ),
        "ddp": torch.optim.SGD(ddp.parameters(), lr=0.01),
    }
    forward = {"local": models["local"], "khorovod": models["khorovod"], "ddp": ddp}
    gen = torch.Generator().manual_seed(r)
    x = torch.randn(args.batch, *shape, generator=gen).to(dev)
    y = torch.randint(0, classes, (args.batch,), generator=gen).to(dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(v):
        opts[v].zero_grad()
        loss_fn(forward[v](x), y).backward()
        opts[v].step()

    def comm_alone(v):
        grads = [q.grad for q in models["local"].parameters() if q.grad is not None]
        if v == "khorovod":
            hvd.grouped_allreduce_(grads, name="comm_alone")
        else:
            for g in grads:
                dist.all_reduce(g)

    work = {
        "local": step,
        "khorovod": step,
        "ddp": step,
        "comm-khorovod": lambda v: comm_alone("khorovod"),
        "comm-ddp": lambda v: comm_alone("ddp"),
    }
    for v in ("local", "khorovod", "ddp"):
        for _ in range(args.warmup):
            step(v)
    times = {k: [] for k in work}
    order = list(work)
    for rnd in range(args.rounds):
        for k in (
            order[rnd % len(order) :] + order[: rnd % len(order)]
        ):  # rotate: each goes first once
            hvd.barrier()
            sync(dev)
            for _ in range(args.steps):
                t0 = time.perf_counter()
                work[k](k)
                sync(dev)
                times[k].append((time.perf_counter() - t0) * 1e3)
    if r == 0:
        report(args, times, n, dev)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
