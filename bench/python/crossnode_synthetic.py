"""Horovod's own examples/pytorch/pytorch_synthetic_benchmark.py under
horovodrun --gloo and, with its import changed to khorovod.torch, under
khorovodrun, across the hosts of bench/crossnode.sh, in alternating blocks
(not run by tests; bench/crossnode.sh synthetic is the usual invocation).

Each block runs the example once per framework (the order alternates from
block to block) and takes its "Img/sec per CPU" line: the mean over the
example's timed iterations on rank 0. A figure is the median over blocks;
the ratio is khorovod's img/sec over Horovod's from the same run (above 1:
khorovod is faster). Prints a Markdown table.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

PER_RANK = re.compile(r"Img/sec per CPU: ([0-9.]+)")


def run_once(args, fw, per_host):
    addrs = args.host_addrs.split(",")
    hosts = ",".join(f"{a}:{per_host}" for a in addrs)
    ranks = str(per_host * len(addrs))
    example = [
        "--model",
        args.model,
        "--batch-size",
        str(args.batch_size),
        "--no-cuda",
        "--num-warmup-batches",
        str(args.warmup),
        "--num-batches-per-iter",
        str(args.batches_per_iter),
        "--num-iters",
        str(args.iters),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    if fw == "khorovod":
        env["PYTHONPATH"] = args.khorovod_pythonpath
        cmd = [args.khorovodrun, "-np", ranks, "-H", hosts, args.python, args.khorovod_script]
    else:
        horovodrun = os.path.join(os.path.dirname(args.horovod_python), "horovodrun")
        cmd = [
            horovodrun,
            "--gloo",
            "-np",
            ranks,
            "-H",
            hosts,
            "--network-interface",
            args.interface,
            args.horovod_python,
            args.horovod_script,
        ]
    try:
        out = subprocess.run(
            cmd + example,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired:
        raise SystemExit(
            f"crossnode_synthetic: {fw} at {hosts} ran past {args.timeout} s"
        ) from None
    found = PER_RANK.findall(out.stdout)
    if out.returncode != 0 or not found:
        raise SystemExit(
            f"crossnode_synthetic: {fw} at {hosts} failed (exit {out.returncode}):\n"
            f"{out.stdout[-3000:]}"
        )
    return float(found[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--khorovodrun", required=True)
    p.add_argument("--khorovod-pythonpath", required=True)
    p.add_argument("--horovod-python", required=True)
    p.add_argument("--khorovod-script", required=True, help="the example importing khorovod.torch")
    p.add_argument("--horovod-script", required=True, help="Horovod's example as published")
    p.add_argument("--host-addrs", required=True)
    p.add_argument("--interface", default="eth0")
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--model", default="mobilenet_v3_small")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batches-per-iter", type=int, default=5)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--slots", default="1,2", help="ranks per host, comma-separated")
    p.add_argument("--timeout", type=int, default=900)
    args = p.parse_args()
    hosts = len(args.host_addrs.split(","))
    rows = []
    for per_host in (int(s) for s in args.slots.split(",")):
        load_before = os.getloadavg()[0]
        got = {"khorovod": [], "horovod": []}
        for block in range(args.blocks):
            order = ["khorovod", "horovod"] if block % 2 == 0 else ["horovod", "khorovod"]
            for fw in order:
                got[fw].append(run_once(args, fw, per_host))
            print(
                f"# {hosts} x {per_host}: block {block + 1}/{args.blocks}: "
                f"khorovod {got['khorovod'][-1]:.2f}, Horovod {got['horovod'][-1]:.2f} img/sec",
                file=sys.stderr,
                flush=True,
            )
        med = {fw: statistics.median(v) for fw, v in got.items()}
        cells = [
            f"{med[fw]:.2f} ({min(got[fw]):.2f}..{max(got[fw]):.2f})"
            for fw in ("khorovod", "horovod")
        ]
        rows.append(
            f"| {hosts} x {per_host} | "
            + " | ".join(cells)
            + f" | {med['khorovod'] / med['horovod']:.2f}x | "
            f"{load_before:.1f} / {os.getloadavg()[0]:.1f} |"
        )
    print(
        f"\n### pytorch_synthetic_benchmark.py, {args.model}, batch {args.batch_size} "
        f"({args.blocks} alternating blocks; img/sec per rank, median, min..max in brackets)\n"
    )
    print("| hosts x ranks | khorovod | Horovod | khorovod / Horovod | load before / after |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
