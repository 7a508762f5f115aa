"""Per-thread CPU, run-queue wait and context switches of a loop of
allreduces, khorovod.torch or torch DDP (gloo), read from
/proc/self/task/*/schedstat and status around the loop; rank 0 prints one
line per thread that ran (not run by tests; docs/benchmarks-history.md,
"Across nodes: the cause of the small-allreduce gap").

usage: thread_cpu_probe.py khorovod|ddp BYTES ITERS
Launch it like bench/python/side_by_side_worker.py: under khorovodrun for
khorovod, and with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set for
ddp.
"""

import os
import sys
import time

import torch

fw, nbytes, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
if fw == "ddp":
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()

    def ar(t):
        dist.all_reduce(t)
else:
    import khorovod.torch as hvd

    hvd.init()
    rank = hvd.rank()

    def ar(t):
        hvd.allreduce_(t, name="probe", op=hvd.Sum)


def snap():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            comm = open(f"/proc/self/task/{tid}/comm").read().strip()
            run_ns, wait_ns, slices = map(
                int, open(f"/proc/self/task/{tid}/schedstat").read().split()
            )
            st = open(f"/proc/self/task/{tid}/status").read().split("\n")
            vol = int([l for l in st if l.startswith("voluntary_ctxt")][0].split()[1])
            nvol = int([l for l in st if l.startswith("nonvoluntary_ctxt")][0].split()[1])
            out[tid] = (comm, run_ns, wait_ns, vol, nvol)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


t = torch.ones(max(nbytes // 4, 1))
for _ in range(50):
    ar(t)
a = snap()
t0 = time.perf_counter()
for _ in range(iters):
    ar(t)
dt = (time.perf_counter() - t0) / iters * 1e6
b = snap()
lines = [f"rank {rank} {fw} {nbytes}B: {dt:.0f} us/call"]
tot = 0
for tid, (comm, r, w, v, nv) in sorted(b.items()):
    if tid not in a:
        continue
    _, r0, w0, v0, nv0 = a[tid]
    cpu = (r - r0) / iters / 1e3
    tot += cpu
    if cpu < 1 and v == v0:
        continue
    lines.append(
        f"  {(comm + ('*main' if tid == str(os.getpid()) else '')):16s} cpu {cpu:7.1f} us/call  runq-wait {(w - w0) / iters / 1e3:7.1f} us/call  vol-cs {(v - v0) / iters:5.2f}  invol-cs {(nv - nv0) / iters:5.2f}"
    )
lines.append(f"  total cpu {tot:.1f} us/call")
if rank == 0:
    print("\n".join(lines), flush=True)
if fw == "ddp":
    dist.barrier()
else:
    hvd.shutdown()
