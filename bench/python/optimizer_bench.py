"""Benchmarks of khorovod.torch's DistributedOptimizer (not run by tests).

--mode overhead (run at 1 rank): a training step (forward, backward, SGD
  step) of the same MLP with the plain optimizer and with
  DistributedOptimizer, in alternating blocks; prints the median of each and
  the ratio. At 1 rank the difference is the Python hooks plus the runtime's
  negotiation per step.
--mode resnet (run at N ranks): 161 parameters with ResNet-50's shapes
  (97.5 MiB of float32), a synthetic backward that gives each a gradient,
  and SGD. Alternating blocks of: the DistributedOptimizer step; the same
  backward + step with the plain optimizer (compute only); one allreduce of
  a flat tensor of the same bytes. Prints medians and
  dist / (compute + single allreduce).

    khorovodrun -np 1 /usr/bin/python3 bench/python/optimizer_bench.py --mode overhead
    khorovodrun -np 4 /usr/bin/python3 bench/python/optimizer_bench.py --mode resnet
"""

import argparse
import statistics
import time

import khorovod.torch as hvd
import torch
from workloads import resnet50_shapes


def timed_block(fn, steps):
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps * 1e3


def compare(named_fns, blocks, steps):
    results = {name: [] for name, _ in named_fns}
    for _ in range(blocks):
        for name, fn in named_fns:
            hvd.barrier()
            results[name].append(timed_block(fn, steps))
    return {name: statistics.median(v) for name, v in results.items()}


def overhead(args):
    torch.manual_seed(0)

    def make():
        model = torch.nn.Sequential(
            torch.nn.Linear(784, 512),
            torch.nn.ReLU(),
            torch.nn.Linear(512, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 10),
        )
        return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
    plain_model, plain_opt = make()
    dist_model, inner = make()
    dist_opt = hvd.DistributedOptimizer(inner, named_parameters=dist_model.named_parameters())

    def step(model, opt):
        def fn():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        return fn

    fns = [("plain", step(plain_model, plain_opt)), ("distributed", step(dist_model, dist_opt))]
    for _, fn in fns:
        fn()  # warm-up (negotiation of new names, allocations)
    m = compare(fns, args.blocks, args.steps)
    if hvd.rank() == 0:
        print(
            f"np {hvd.size()}: plain step {m['plain']:.3f} ms | DistributedOptimizer step "
            f"{m['distributed']:.3f} ms | ratio {m['distributed'] / m['plain']:.3f}x | "
            f"overhead {m['distributed'] - m['plain']:.3f} ms"
        )


def resnet(args):
    params = [torch.nn.Parameter(torch.zeros(s)) for s in resnet50_shapes()]
    named = [(f"p{i}", p) for i, p in enumerate(params)]
    nbytes = sum(p.numel() for p in params) * 4
    coeff = [torch.full(p.shape, 1e-3 * (hvd.rank() + 1)) for p in params]
    dist_opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), named_parameters=named)
    plain_params = [torch.nn.Parameter(torch.zeros(s)) for s in resnet50_shapes()]
    plain_opt = torch.optim.SGD(plain_params, lr=0.1)
    flat = torch.ones(nbytes // 4)

    def backward(ps):
        # Backward runs from the last layer to the first, as in a network.
        sum((p * c).sum() for p, c in zip(reversed(ps), reversed(coeff))).backward()

    def dist_step():
        dist_opt.zero_grad()
        backward(params)
        dist_opt.step()

    def plain_step():
        plain_opt.zero_grad()
        backward(plain_params)
        plain_opt.step()

    def single():
        hvd.allreduce_(flat, name="flat")

    fns = [("dist", dist_step), ("compute", plain_step), ("single", single)]
    for _, fn in fns:
        fn()
    m = compare(fns, args.blocks, args.steps)
    if hvd.rank() == 0:
        ratio = m["dist"] / (m["compute"] + m["single"])
        print(
            f"np {hvd.size()}: {len(params)} tensors, {nbytes / 2**20:.1f} MiB | "
            f"DistributedOptimizer step {m['dist']:.1f} ms | compute only {m['compute']:.1f} ms"
            f" | single allreduce {m['single']:.1f} ms | step / (compute + allreduce) "
            f"{ratio:.3f}x"
        )


def main():
    p = argparse.ArgumentParser(description="DistributedOptimizer benchmarks")
    p.add_argument("--mode", choices=["overhead", "resnet"], required=True)
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--steps", type=int, default=0, help="steps per block (default per mode)")
    args = p.parse_args()
    args.steps = args.steps or (200 if args.mode == "overhead" else 3)
    hvd.init()
    overhead(args) if args.mode == "overhead" else resnet(args)
    hvd.shutdown()


if __name__ == "__main__":
    main()
