"""Driver of the side-by-side benchmark: khorovod.torch, Horovod and torch
DDP (gloo) in alternating blocks of one run (not run by tests; see
bench/side_by_side.sh for the usual invocation).

Each block launches side_by_side_worker.py once per framework, in an order
that rotates from block to block, so the three share the machine's quiet
and busy minutes alike. Every figure is the median over blocks of the
block's mean; the ratios are other / khorovod time (above 1: khorovod is
faster) from the same run. Prints a Markdown table per rank count, and the
raw lines with --raw.

With --host-addrs (bench/crossnode.sh), the ranks span those hosts, reached
over ssh: --ranks is then the ranks per host; khorovodrun and horovodrun
--gloo get -H, and each DDP rank is started over ssh on its host (rendezvous
at the first host).

With --baseline-khorovodrun and --baseline-pythonpath, a fourth framework,
"baseline", is khorovod.torch from another build (e.g. the commit before a
change, built in a detached worktree), run by the same worker in the same
rotation, so a change's effect is a same-run ratio too. With --baseline-env
KEY=VALUE (repeatable) and no baseline build, "baseline" is this build with
those variables set (e.g. another KHOROVOD_FUSION_THRESHOLD): a setting's
effect, measured the same way.
"""

import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "side_by_side_worker.py")
FRAMEWORKS = ("khorovod", "baseline", "horovod", "ddp")
TITLES = {"khorovod": "khorovod", "baseline": "baseline", "horovod": "Horovod", "ddp": "DDP"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(args, fw):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    pythonpath = baseline_build(args)[1] if fw == "baseline" else args.khorovod_pythonpath
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, pythonpath) if p)
    if fw == "baseline":
        env.update(args.baseline_env)
    return env


def baseline_build(args):
    """(khorovodrun, pythonpath) of the baseline: its own build, or this one."""
    if args.baseline_khorovodrun:
        return args.baseline_khorovodrun, args.baseline_pythonpath
    return args.khorovodrun, args.khorovod_pythonpath


def parse_env(items):
    env = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--baseline-env wants KEY=VALUE, got {item!r}")
        env[key] = value
    return env


def ddp_over_ssh(args, env, addrs, per_host, worker):
    """Each DDP rank started over ssh on its host, with the variables a static
    torchrun rendezvous at the first host would set (Debian's torch 1.13
    torchrun fails under Python 3.11 before it starts a worker)."""
    exported = {k: env[k] for k in ("OMP_NUM_THREADS", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    exported.update(
        GLOO_SOCKET_IFNAME=args.interface,
        MASTER_ADDR=addrs[0],
        MASTER_PORT=str(free_port()),
        WORLD_SIZE=str(per_host * len(addrs)),
    )
    cmds = []
    for node, addr in enumerate(addrs):
        for local in range(per_host):
            rank = dict(exported, RANK=str(node * per_host + local), LOCAL_RANK=str(local))
            remote = ["env"] + [f"{k}={v}" for k, v in rank.items()] + [args.python] + worker
            cmds.append(["ssh", addr, f"cd {shlex.quote(HERE)} && " + shlex.join(remote)])
    return cmds


def multi_host_commands(args, fw, per_host, env, worker):
    addrs = args.host_addrs.split(",")
    hosts = ",".join(f"{a}:{per_host}" for a in addrs)
    ranks = per_host * len(addrs)
    if fw in ("khorovod", "baseline"):
        run = baseline_build(args)[0] if fw == "baseline" else args.khorovodrun
        return [[run, "-np", str(ranks), "-H", hosts, args.python] + worker]
    if fw == "horovod":
        horovodrun = os.path.join(os.path.dirname(args.horovod_python), "horovodrun")
        return [
            [
                horovodrun,
                "--gloo",
                "-np",
                str(ranks),
                "-H",
                hosts,
                "--network-interface",
                args.interface,
                args.horovod_python,
            ]
            + worker
        ]
    return ddp_over_ssh(args, env, addrs, per_host, worker)


def launch(args, fw, ranks, worker_args):
    env = base_env(args, fw)
    worker = [WORKER, "--framework", "khorovod" if fw == "baseline" else fw] + worker_args
    if args.host_addrs:
        cmds = multi_host_commands(args, fw, ranks, env, worker)
    elif fw in ("khorovod", "baseline"):
        run = baseline_build(args)[0] if fw == "baseline" else args.khorovodrun
        cmds = [[run, "-np", str(ranks), args.python] + worker]
    elif fw == "horovod":
        horovodrun = os.path.join(os.path.dirname(args.horovod_python), "horovodrun")
        cmds = [
            [
                horovodrun,
                "--gloo",
                "-np",
                str(ranks),
                "-H",
                f"localhost:{ranks}",
                "--network-interface",
                "lo",
                args.horovod_python,
            ]
            + worker
        ]
    else:
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(ranks))
        cmds = [[args.python] + worker for _ in range(ranks)]
    procs = []
    for rank, cmd in enumerate(cmds):
        e = (
            dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
            if fw == "ddp" and not args.host_addrs
            else env
        )
        procs.append(
            subprocess.Popen(
                cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    outputs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise SystemExit(
                f"side_by_side: {fw} at {ranks} ranks ran past {args.timeout} s"
            ) from None
        if p.returncode != 0:
            raise SystemExit(
                f"side_by_side: {fw} at {ranks} ranks failed (exit {p.returncode}):\n{out[-3000:]}"
            )
        outputs.append(out)
    rows = []
    for out in outputs:
        for line in out.splitlines():
            at = line.find("SXS ")
            if at >= 0:
                rows.append(json.loads(line[at + 4 :]))
            elif "khorovod: allreduces above" in line:  # the path trial's verdict
                print(f"# {fw}: {line[line.find('khorovod: ') :]}", file=sys.stderr, flush=True)
    if not rows:
        raise SystemExit(f"side_by_side: {fw} at {ranks} ranks printed no result:\n{out[-3000:]}")
    return rows


def label(metric):
    kind, _, what = metric.partition("/")
    if kind in ("allreduce", "allreduce-cpu"):
        prefix = "allreduce" if kind == "allreduce" else "CPU time per allreduce"
        n = int(what)
        for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
            if n >= scale:
                return f"{prefix} {n // scale} {unit}"
        return f"{prefix} {n} B"
    if kind == "step-cpu":
        return f"CPU time per step {what}"
    if kind == "step-cpu-mean":
        return f"CPU time per step {what}, mean of all ranks"
    return f"step {what}"


def summarize(results, title, blocks, load_before, frameworks):
    load_after = os.getloadavg()[0]
    shown = [fw for fw in FRAMEWORKS if fw in frameworks]
    others = [fw for fw in shown if fw != "khorovod"]
    print(
        f"\n### {title} ({blocks} alternating blocks; median of block means, "
        f"min..max of block means in brackets; 1-min load average {load_before:.1f} "
        f"before, {load_after:.1f} after)\n"
    )
    print(
        "| measure | "
        + " | ".join(TITLES[fw] for fw in shown)
        + " | "
        + " | ".join(f"{TITLES[o]} / khorovod" for o in others)
        + " |"
    )
    print("|---|" + "---|" * (len(shown) + len(others)))
    metrics = []
    for fw, metric in results:
        if metric not in metrics:
            metrics.append(metric)
    for metric in metrics:
        runs = {fw: results[(fw, metric)] for fw in shown if (fw, metric) in results}
        med = {fw: statistics.median(v) for fw, v in runs.items()}
        cells = [
            f"{med[fw]:.0f} µs ({min(runs[fw]):.0f}..{max(runs[fw]):.0f})" if fw in med else "—"
            for fw in shown
        ]
        ratios = [
            f"{med[o] / med['khorovod']:.2f}x" if o in med and "khorovod" in med else "—"
            for o in others
        ]
        print(f"| {label(metric)} | " + " | ".join(cells + ratios) + " |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--khorovodrun", required=True)
    p.add_argument(
        "--khorovod-pythonpath",
        required=True,
        help="the build's python/ directory (holds khorovod)",
    )
    p.add_argument(
        "--horovod-python",
        default="",
        help="python of the venv scripts/horovod-wheel.sh made (needed for horovod)",
    )
    p.add_argument(
        "--baseline-khorovodrun",
        default="",
        help="khorovodrun of the baseline build (needed for baseline)",
    )
    p.add_argument(
        "--baseline-pythonpath", default="", help="the baseline build's python/ directory"
    )
    p.add_argument(
        "--baseline-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set for the baseline's workers; without a baseline build, the baseline is this one",
    )
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--ranks", default="2,4", help="rank counts; with --host-addrs, ranks per host")
    p.add_argument(
        "--host-addrs",
        default="",
        help="comma-separated host addresses reached over ssh (bench/crossnode.sh)",
    )
    p.add_argument(
        "--interface",
        default="eth0",
        help="with --host-addrs: the hosts' network interface (Horovod, Gloo)",
    )
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument(
        "--frameworks",
        default="khorovod,horovod,ddp",
        help="comma-separated, of " + ", ".join(FRAMEWORKS),
    )
    p.add_argument("--steps", default="mlp,bandwidth,resnet")
    p.add_argument("--sizes", default="4,65536,4194304,67108864")
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--raw", action="store_true")
    args = p.parse_args()
    frameworks = [f for f in args.frameworks.split(",") if f]
    for fw in frameworks:
        if fw not in FRAMEWORKS:
            p.error(f"unknown framework {fw}")
    if "horovod" in frameworks and not args.horovod_python:
        p.error("horovod needs --horovod-python")
    try:
        args.baseline_env = parse_env(args.baseline_env)
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    if bool(args.baseline_khorovodrun) != bool(args.baseline_pythonpath):
        p.error("a baseline build needs both --baseline-khorovodrun and --baseline-pythonpath")
    if "baseline" in frameworks and not (args.baseline_khorovodrun or args.baseline_env):
        p.error(
            "baseline needs a build (--baseline-khorovodrun, --baseline-pythonpath) or --baseline-env"
        )
    worker_args = ["--steps", args.steps, "--sizes", args.sizes]
    for ranks in (int(r) for r in args.ranks.split(",")):
        results = {}
        title = f"{ranks} ranks"
        if args.host_addrs:
            title = f"{len(args.host_addrs.split(','))} hosts x {ranks} ranks"
        load_before = os.getloadavg()[0]
        for block in range(args.blocks):
            shift = block % len(frameworks)
            for fw in frameworks[shift:] + frameworks[:shift]:
                for row in launch(args, fw, ranks, worker_args):
                    results.setdefault((fw, row["metric"]), []).append(row["us"])
                    if args.raw:
                        print(f"block {block} {fw} " + json.dumps(row), flush=True)
            print(f"# {title}: block {block + 1}/{args.blocks} done", file=sys.stderr, flush=True)
        summarize(results, title, args.blocks, load_before, frameworks)


if __name__ == "__main__":
    main()
