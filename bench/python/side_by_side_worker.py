"""One rank of one block of the side-by-side benchmark (bench/side_by_side.sh
runs it through bench/python/side_by_side.py; not run by tests).

The same measurements under one framework, chosen by --framework:
- khorovod: khorovod.torch, DistributedOptimizer (launched by khorovodrun);
- horovod: horovod.torch, DistributedOptimizer (launched by horovodrun --gloo);
- ddp: torch.distributed with the gloo backend, DistributedDataParallel
  (launched by side_by_side.py with MASTER_ADDR/RANK/WORLD_SIZE).

Measurements (rank 0 prints one ``SXS {json}`` line for each):
- step/<workload>: a whole training step (zero_grad, forward, backward,
  optimizer step) of each workload of workloads.py, mean over the block;
- step-cpu/<workload>: the CPU time (user + system, all of rank 0's
  threads) per step: on hosts whose ranks outnumber their cores, a
  framework's own threads take it from the ranks' compute;
- allreduce/<bytes>: one blocking in-place sum allreduce of a float32 tensor
  of that many bytes from Python, mean over the block;
- allreduce-cpu/<bytes>: the CPU time (user + system, all of rank 0's
  threads) those calls used, per call: what spinning waits cost a host whose
  ranks outnumber its cores, and less sensitive to other load than the time.
Every rank runs the same number of iterations (it depends on the size only)
and each timed loop starts after a barrier.
"""

import argparse
import json
import resource
import time

import torch
import workloads


class _HorovodApi:
    """khorovod.torch and horovod.torch share this API."""

    def __init__(self, module_name):
        import importlib

        self.hvd = importlib.import_module(module_name)
        self.hvd.init()
        self.rank, self.size = self.hvd.rank(), self.hvd.size()

    def wrap(self, name, model, opt):
        hvd = self.hvd
        named = [(f"{name}.{n}", p) for n, p in model.named_parameters()]
        opt = hvd.DistributedOptimizer(opt, named_parameters=named)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        return model, opt

    def allreduce(self, tensor, name):
        self.hvd.allreduce_(tensor, name=name, op=self.hvd.Sum)

    def barrier(self):
        # Horovod 0.28 has hvd.barrier(); a tiny allreduce works on both.
        self.hvd.allreduce_(torch.zeros(1), name="sxs.barrier", op=self.hvd.Sum)

    def finish(self):
        self.hvd.shutdown()


class _Ddp:
    def __init__(self):
        import torch.distributed as dist

        self.dist = dist
        dist.init_process_group("gloo")
        self.rank, self.size = dist.get_rank(), dist.get_world_size()

    def wrap(self, name, model, opt):
        del name
        # DDP broadcasts rank 0's parameters when it wraps the module.
        return torch.nn.parallel.DistributedDataParallel(model), opt

    def allreduce(self, tensor, name):
        del name
        self.dist.all_reduce(tensor)

    def barrier(self):
        self.dist.barrier()

    def finish(self):
        self.dist.destroy_process_group()


def framework(name):
    if name == "ddp":
        return _Ddp()
    return _HorovodApi("khorovod.torch" if name == "khorovod" else "horovod.torch")


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fw, fn, iters, warmup, cpu=None):
    """Mean µs per call of the timed loop; with a list `cpu`, appends the
    loop's CPU µs per call (all of this process's threads)."""
    for _ in range(warmup):
        fn()
    fw.barrier()
    cpu_start = cpu_seconds()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    us = (time.perf_counter() - start) / iters * 1e6
    if cpu is not None:
        cpu.append((cpu_seconds() - cpu_start) / iters * 1e6)
    return us


STEP_ITERS = {"mlp": 100, "bandwidth": 3, "resnet": 3, "mobilenet": 10}
# Untimed steps first, the same for every framework. bandwidth's 4 hold
# khorovod's path trial across hosts (backend/shm/path_trial.h: its first
# 14 allreduces above 4 MiB, about 4 of these steps at 3 x 2), which a job
# pays once; the timed steps then show the steady state, as DDP's do after
# its first iteration rebuilds its buckets.
STEP_WARMUP = {"mlp": 5, "bandwidth": 4, "resnet": 1, "mobilenet": 2}


def measure_steps(fw, names, report):
    for name in names:
        model, opt, inputs = workloads.build(name, fw.rank)
        nbytes = workloads.gradient_bytes(model)
        model, opt = fw.wrap(name, model, opt)

        def step(model=model, opt=opt, inputs=inputs):
            opt.zero_grad()
            model(*inputs).backward()
            opt.step()

        cpu = []
        us = timed(fw, step, STEP_ITERS[name], STEP_WARMUP[name], cpu=cpu)
        report(f"step/{name}", us, gradient_bytes=nbytes)
        report(f"step-cpu/{name}", cpu[0])
        report(f"step-cpu-mean/{name}", mean_over_ranks(fw, cpu[0], f"sxs.cpu.{name}"))


def mean_over_ranks(fw, value, name):
    """`value` averaged over every rank (after the timed loop, so outside it).

    Rank 0's own CPU is one rank's share; where ranks do unequal work (a
    host's leader and its host-mates), only the mean tells the job's cost."""
    t = torch.tensor([float(value)], dtype=torch.float64)
    fw.allreduce(t, name)
    return t.item() / fw.size


def allreduce_iters(nbytes):
    return max(2, min(200, (32 << 20) // max(nbytes, 1)))


def measure_allreduce(fw, sizes, report):
    for nbytes in sizes:
        t = torch.ones(max(nbytes // 4, 1))
        name = f"sxs.allreduce.{nbytes}"
        cpu = []
        us = timed(
            fw,
            lambda t=t, name=name: fw.allreduce(t, name),
            allreduce_iters(nbytes),
            warmup=1,
            cpu=cpu,
        )
        report(f"allreduce/{nbytes}", us)
        report(f"allreduce-cpu/{nbytes}", cpu[0])
        del t


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=["khorovod", "horovod", "ddp"], required=True)
    p.add_argument(
        "--steps", default="mlp,bandwidth,resnet", help="comma-separated workloads (empty: none)"
    )
    p.add_argument("--sizes", default="", help="comma-separated allreduce sizes in bytes")
    args = p.parse_args()
    torch.set_num_threads(1)
    fw = framework(args.framework)

    def report(metric, us, **extra):
        if fw.rank == 0:
            print(
                "SXS "
                + json.dumps(
                    {
                        "framework": args.framework,
                        "ranks": fw.size,
                        "metric": metric,
                        "us": us,
                        **extra,
                    }
                ),
                flush=True,
            )

    measure_steps(fw, [s for s in args.steps.split(",") if s], report)
    measure_allreduce(fw, [int(s) for s in args.sizes.split(",") if s], report)
    fw.barrier()
    fw.finish()


if __name__ == "__main__":
    main()
