#!/usr/bin/env python3
"""Goodput under injected failures: elastic recovery against checkpoint-restart.

Trains khorovod-soak-worker (a toy model whose result is known in advance,
so a lost or doubled step shows) for --steps steps on --np local workers and
kills one worker (SIGKILL) every --every seconds, in two ways:

  elastic             khorovodrun -np N --min-np 1 --max-np N: the survivors
                      roll back to their last commit and go on; khorovodrun
                      starts a replacement, which joins at the next commit.
  checkpoint-restart  khorovodrun -np N (a static job) with a checkpoint every
                      --checkpoint-every steps: a failure ends the job, and the
                      driver starts the whole job again, which resumes from the
                      last checkpoint. This is how torchrun (its restarts) and
                      JobSet (recreate every job on a failure) recover.

A failure-free elastic run first measures the ideal wall time. Goodput = the
ideal wall time / the wall time with failures (1.0: failures cost nothing).
Every run must end with every rank's checksum equal to the replay's.

  bench/goodput.py --khorovodrun build/release/bin/khorovodrun \\
      --worker build/release/bin/khorovod-soak-worker [--np 4] [--steps 1500] \\
      [--step-ms 20] [--every 5] [--checkpoint-every 100] [--repeats 3]

Prints one line per run and a table; exits 1 if a run failed.
"""

import argparse
import glob
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def children(pid):
    """Direct children of `pid` (the job's worker processes)."""
    out = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            out += [int(c) for c in open(path).read().split()]
        except OSError:
            pass
    return out


def done_lines(d):
    """The `done` events of every worker (see bench/elastic_soak_worker.cc)."""
    out = []
    for path in glob.glob(os.path.join(d, "events.*")):
        for line in open(path):
            f = line.split()
            if f and f[0] == "done":
                out.append({"step": int(f[4]), "checksum": f[5], "expected": f[6]})
    return out


class Runner:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)

    def command(self, d, elastic):
        a = self.args
        cmd = [a.khorovodrun, "-np", str(a.np)]
        if elastic:
            cmd += ["--min-np", "1", "--max-np", str(a.np), "--reset-limit", "10000"]
        cmd += [a.worker, "--dir", d, "--steps", str(a.steps), "--step-ms", str(a.step_ms)]
        if not elastic:
            cmd += [
                "--checkpoint",
                os.path.join(d, "job.ckpt"),
                "--checkpoint-every",
                str(a.checkpoint_every),
            ]
        return cmd

    def run_once(self, elastic, inject):
        """Wall time, failures injected, job starts, and problems ([] = ok)."""
        a = self.args
        d = tempfile.mkdtemp(prefix="goodput-")
        env = dict(os.environ, KHOROVOD_ELASTIC_TIMEOUT_SECONDS="60", OMP_NUM_THREADS="1")
        start = time.monotonic()
        deadline = start + a.timeout
        kills, starts, problems = 0, 0, []
        while True:
            starts += 1
            p = subprocess.Popen(
                self.command(d, elastic),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            next_kill = time.monotonic() + a.every
            while p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
                if inject and time.monotonic() >= next_kill:
                    workers = children(p.pid)
                    if workers:
                        os.kill(self.rng.choice(workers), signal.SIGKILL)
                        kills += 1
                    next_kill += a.every
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                problems.append(f"timed out after {a.timeout} s")
                break
            if p.returncode == 0:
                break
            if elastic:
                problems.append(f"khorovodrun exited {p.returncode}")
                break
            # Checkpoint-restart: stop whatever is left of the failed job and
            # start all of it again.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wall = time.monotonic() - start
        done = done_lines(d)
        if not problems:
            finished = [x for x in done if x["step"] == a.steps]
            if not finished:
                problems.append("no rank finished all steps")
            if any(x["checksum"] != x["expected"] for x in finished):
                problems.append("a rank's parameters differ from the replay")
        subprocess.run(["rm", "-rf", d])
        return wall, kills, starts, problems


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--khorovodrun", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--step-ms", type=int, default=20)
    p.add_argument("--every", type=float, default=5.0, help="seconds between injected failures")
    p.add_argument("--checkpoint-every", type=int, default=100, help="steps between checkpoints")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    r = Runner(a)
    results = {"ideal": [], "elastic": [], "checkpoint-restart": []}
    failed = 0
    for i in range(a.repeats):
        for mode in ("ideal", "elastic", "checkpoint-restart"):
            wall, kills, starts, problems = r.run_once(
                elastic=mode != "checkpoint-restart", inject=mode != "ideal"
            )
            status = "ok" if not problems else "FAILED: " + "; ".join(problems)
            print(
                f"run {i + 1} {mode:>18}: {wall:7.2f} s, {kills} failures, {starts} job start(s): {status}",
                flush=True,
            )
            if problems:
                failed += 1
            else:
                results[mode].append((wall, kills))
    if not results["ideal"]:
        print("no failure-free run succeeded")
        return 1
    ideal = statistics.median(w for w, _ in results["ideal"])
    print(
        f"\n{a.np} workers, {a.steps} steps of {a.step_ms} ms, a SIGKILL every {a.every} s, "
        f"checkpoint every {a.checkpoint_every} steps; median of {a.repeats}"
    )
    print(f"{'mode':>18} {'wall s':>8} {'failures':>9} {'goodput':>8}")
    for mode, rows in results.items():
        if not rows:
            continue
        wall = statistics.median(w for w, _ in rows)
        kills = statistics.median(k for _, k in rows)
        print(f"{mode:>18} {wall:8.2f} {kills:9.0f} {ideal / wall:8.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
