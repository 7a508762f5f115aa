#!/usr/bin/env python3
"""Randomized kill soak for elastic jobs: does re-formation ever lose progress?

Runs many trials of `khorovodrun -np N --min-np M --max-np N <worker>` and, in
each, disturbs the job with one schedule of SIGKILLs (or a SIGSTOP). The worker
is khorovod-soak-worker (C++) or bench/python/elastic_soak_worker.py (Python);
both append events to DIR/events.<pid> (see bench/elastic_soak_worker.cc).

Schedules:
  random       one random worker
  rank0_twice  rank 0, then the next generation's rank 0
  joiner       a worker, then its replacement while it joins and syncs
  two_at_once  two workers at the same moment (down to min at -np 4 --min-np 2)
  second_kill  a worker, then another 10-150 ms later
  large_state  a worker, then another during the new generation's state
               broadcast (the worker carries --large-state-mb of state)
  sigstop      SIGSTOP a worker past the heartbeat timeout, then SIGCONT

Each trial passes when: khorovodrun exits 0 within --trial-timeout; every
finishing rank reports the same parameters, equal to a local replay of the
steps (so no step was lost, doubled or torn); and no generation resumed from
a step older than the newest commit held by a worker alive at that moment.
Recovery time: the first disturbance to the first commit of a generation
formed after the last disturbance.

  bench/elastic_soak.py --khorovodrun build/release/bin/khorovodrun \\
      --worker build/release/bin/khorovod-soak-worker --trials 300

Prints one line per trial and a table per schedule; exits 1 if any trial failed.
"""

import argparse
import json
import os
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SCHEDULES = [
    "random",
    "rank0_twice",
    "joiner",
    "two_at_once",
    "second_kill",
    "large_state",
    "sigstop",
]


def now_ns():
    return time.monotonic_ns()


class Worker:
    def __init__(self, pid):
        self.pid = pid
        self.started = None
        self.rank = None
        self.size = None
        self.last_commit = None
        self.commits = []  # (t, step)
        self.gens = []  # (t, rank, size, step)
        self.resets = []  # (t, rank, size, step)
        self.done = None  # dict
        self.killed_at = None

    def alive_at(self, t):
        """Started, not killed and not finished at t (a worker that exited
        with an error is taken as alive: the trial fails anyway)."""
        return (
            (self.started is None or self.started <= t)
            and (self.killed_at is None or self.killed_at > t)
            and (self.done is None or self.done["t"] > t)
        )


class Events:
    """Reads the workers' event files incrementally."""

    def __init__(self, directory):
        self.dir = directory
        self.offsets = {}
        self.partial = {}
        self.workers = {}

    def poll(self):
        for name in os.listdir(self.dir):
            if not name.startswith("events."):
                continue
            pid = int(name.split(".", 1)[1])
            w = self.workers.setdefault(pid, Worker(pid))
            path = os.path.join(self.dir, name)
            with open(path, "rb") as f:
                f.seek(self.offsets.get(pid, 0))
                data = f.read()
            self.offsets[pid] = self.offsets.get(pid, 0) + len(data)
            text = self.partial.get(pid, "") + data.decode()
            lines = text.split("\n")
            self.partial[pid] = lines.pop()
            for line in lines:
                self._apply(w, line.split())

    @staticmethod
    def _apply(w, f):
        kind, t = f[0], int(f[1])
        if kind == "start":
            w.started = t
        elif kind == "reset":
            w.resets.append((t, int(f[2]), int(f[3]), int(f[4])))
            w.rank, w.size = int(f[2]), int(f[3])
        elif kind == "gen":
            w.gens.append((t, int(f[2]), int(f[3]), int(f[4])))
            w.rank, w.size = int(f[2]), int(f[3])
        elif kind == "commit":
            w.commits.append((t, int(f[2])))
            w.last_commit = int(f[2])
        elif kind == "done":
            w.done = {
                "t": t,
                "rank": int(f[2]),
                "size": int(f[3]),
                "step": int(f[4]),
                "checksum": f[5],
                "expected": f[6],
                "big_ok": f[7] == "1" if len(f) > 7 else True,
            }

    def alive(self):
        return [
            w
            for w in self.workers.values()
            if w.killed_at is None and w.done is None and _pid_alive(w.pid)
        ]

    def members(self):
        """Live workers that are in a generation (have synced at least once)."""
        return [w for w in self.alive() if w.gens]

    def total_commits(self):
        return sum(len(w.commits) for w in self.workers.values())

    def gens_after(self, t):
        return [g for w in self.workers.values() for g in w.gens if g[0] > t]


def _pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


class Trial:
    def __init__(self, args, schedule, rng, index):
        self.args, self.schedule, self.rng, self.index = args, schedule, rng, index
        self.dir = tempfile.mkdtemp(prefix=f"soak-{index:04d}-")
        self.events = Events(self.dir)
        self.disturbances = []  # (t, what)
        self.deadline = None
        self.proc = None

    # -- helpers the schedules use --------------------------------------------
    def running(self):
        return self.proc.poll() is None and now_ns() < self.deadline

    def wait_until(self, predicate, timeout_s, step_s=0.002):
        end = min(now_ns() + int(timeout_s * 1e9), self.deadline)
        while self.running() and now_ns() < end:
            self.events.poll()
            value = predicate()
            if value:
                return value
            time.sleep(step_s)
        return None

    def sleep(self, seconds):
        end = now_ns() + int(seconds * 1e9)
        while self.running() and now_ns() < end:
            time.sleep(0.001)
        self.events.poll()

    def signal(self, w, sig, what):
        if w is None:
            return False
        try:
            os.kill(w.pid, sig)
        except ProcessLookupError:
            return False
        t = now_ns()
        if sig == signal.SIGKILL:
            w.killed_at = t
        self.disturbances.append((t, f"{what} pid {w.pid} rank {w.rank}"))
        return True

    def warm(self):
        """Full world formed and a few steps committed by each member."""

        def ready():
            members = self.events.members()
            return len(members) == self.args.np and all(
                w.last_commit is not None and w.last_commit >= 5 for w in members
            )

        return self.wait_until(ready, 60)

    def pick(self, exclude=()):
        members = [w for w in self.events.members() if w not in exclude]
        return self.rng.choice(members) if members else None

    def rank0(self, after_t):
        """The live worker that is rank 0 of a generation formed after after_t."""
        for w in self.events.members():
            if w.gens and w.gens[-1][0] > after_t and w.gens[-1][1] == 0:
                return w
        return None

    # -- schedules --------------------------------------------------------------
    def run_schedule(self):
        if not self.warm():
            return "the job never reached its full size with commits"
        getattr(self, "s_" + self.schedule)()
        return None

    def s_random(self):
        self.signal(self.pick(), signal.SIGKILL, "kill")

    def s_rank0_twice(self):
        first = self.rank0(0)
        self.signal(first, signal.SIGKILL, "kill rank0")
        t = now_ns()
        second = self.wait_until(lambda: self.rank0(t), 60)
        if second:
            self.sleep(self.rng.uniform(0, 0.2))
            self.signal(second, signal.SIGKILL, "kill new rank0")

    def s_joiner(self):
        self.signal(self.pick(), signal.SIGKILL, "kill")
        t = now_ns()
        newcomer = self.wait_until(
            lambda: next((w for w in self.events.alive() if w.started and w.started > t), None), 60
        )
        if newcomer:
            self.sleep(self.rng.uniform(0, 0.4))
            self.signal(newcomer, signal.SIGKILL, "kill joiner")

    def s_two_at_once(self):
        a = self.pick()
        b = self.pick(exclude=(a,))
        self.signal(a, signal.SIGKILL, "kill")
        self.signal(b, signal.SIGKILL, "kill")

    def s_second_kill(self):
        a = self.pick()
        self.signal(a, signal.SIGKILL, "kill")
        self.sleep(self.rng.uniform(0.010, 0.150))
        b = self.pick(exclude=(a,))
        if b:
            self.signal(b, signal.SIGKILL, "second kill")

    def s_large_state(self):
        self.signal(self.pick(), signal.SIGKILL, "kill")
        t = now_ns()
        syncing = self.wait_until(
            lambda: [w for w in self.events.alive() if w.resets and w.resets[-1][0] > t], 60
        )
        if syncing:
            self.sleep(self.rng.uniform(0, 0.03))
            self.signal(self.rng.choice(syncing), signal.SIGKILL, "kill during sync")

    def s_sigstop(self):
        w = self.pick()
        self.signal(w, signal.SIGSTOP, "stop")
        self.sleep(self.args.heartbeat_timeout_s + 2)
        self.signal(w, signal.SIGCONT, "continue")

    # -- the trial --------------------------------------------------------------
    def command(self):
        worker = shlex.split(self.args.worker)
        extra = [
            "--dir",
            self.dir,
            "--steps",
            str(self.args.steps),
            "--step-ms",
            str(self.args.step_ms),
        ]
        if self.schedule == "large_state":
            extra += ["--state-mb", str(self.args.large_state_mb)]
        return [
            self.args.khorovodrun,
            "-np",
            str(self.args.np),
            "--min-np",
            str(self.args.min_np),
            "--max-np",
            str(self.args.np),
            "--elastic-timeout",
            str(self.args.elastic_timeout_s),
            *worker,
            *extra,
        ]

    def run(self):
        timeout = self.args.trial_timeout_s + (
            self.args.heartbeat_timeout_s if self.schedule == "sigstop" else 0
        )
        self.deadline = now_ns() + int(timeout * 1e9)
        log = open(os.path.join(self.dir, "khorovodrun.log"), "wb")
        started = now_ns()
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        problem = self.run_schedule()
        while self.proc.poll() is None and now_ns() < self.deadline:
            time.sleep(0.01)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            problem = problem or f"no exit within {timeout:.0f} s (hang)"
        wall = (now_ns() - started) / 1e9
        for w in self.events.workers.values():  # nothing of the job outlives the trial
            if _pid_alive(w.pid):
                os.kill(w.pid, signal.SIGKILL)
        self.events.poll()
        return self.verdict(problem, wall)

    def verdict(self, problem, wall):
        problems = [problem] if problem else []
        rc = self.proc.returncode
        if rc != 0:
            problems.append(f"khorovodrun exited {rc}")
        done = [w.done for w in self.events.workers.values() if w.done]
        if len(done) < self.args.min_np:
            problems.append(f"only {len(done)} ranks finished")
        for d in done:
            if d["step"] != self.args.steps:
                problems.append(f"rank {d['rank']} finished at step {d['step']}")
            if d["checksum"] != d["expected"] or not d["big_ok"]:
                problems.append(f"rank {d['rank']} holds parameters no correct run produces")
        if len({d["checksum"] for d in done}) > 1:
            problems.append("ranks disagree on the parameters")
        regressions, lost = self.check_progress()
        problems += regressions
        recovery = self.recovery_ms()
        return {
            "trial": self.index,
            "schedule": self.schedule,
            "ok": not problems,
            "problems": problems,
            "wall_s": round(wall, 2),
            "recovery_ms": recovery,
            "lost_with_all_holders": lost,
            "disturbances": [d[1] for d in self.disturbances],
            "dir": self.dir,
        }

    def check_progress(self):
        """Every generation resumes from at least the newest commit that a live
        worker held when it formed. Returns (problems, progress lost only
        because every holder had died)."""
        workers = list(self.events.workers.values())
        problems, lost = [], 0
        for w in workers:
            for t, rank, size, step in w.gens:
                held = [
                    max((s for (ct, s) in x.commits if ct < t), default=0)
                    for x in workers
                    if x.alive_at(t)
                ]
                newest_live = max(held, default=0)
                newest_ever = max(
                    (s for x in workers for (ct, s) in x.commits if ct < t), default=0
                )
                if step < newest_live:
                    problems.append(
                        f"generation at {t} resumed from step {step}, "
                        f"but a live worker held step {newest_live}"
                    )
                elif step < newest_ever:
                    lost += 1
        return problems, lost

    def recovery_ms(self):
        if not self.disturbances:
            return None
        first, last = self.disturbances[0][0], self.disturbances[-1][0]
        gens = [t for w in self.events.workers.values() for (t, *_rest) in w.gens if t > last]
        if not gens:
            return None
        formed = min(gens)
        commits = [t for w in self.events.workers.values() for (t, _s) in w.commits if t > formed]
        return round((min(commits) - first) / 1e6, 1) if commits else None


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def summarize(results):
    print(f"{'schedule':<12} {'trials':>6} {'passed':>6} {'recovery median ms':>19} {'p95 ms':>8}")
    for name in SCHEDULES:
        rs = [r for r in results if r["schedule"] == name]
        if not rs:
            continue
        rec = [r["recovery_ms"] for r in rs if r["recovery_ms"] is not None]
        med = f"{statistics.median(rec):.0f}" if rec else "-"
        p95 = f"{percentile(rec, 0.95):.0f}" if rec else "-"
        print(f"{name:<12} {len(rs):>6} {sum(r['ok'] for r in rs):>6} {med:>19} {p95:>8}")
    failed = sum(not r["ok"] for r in results)
    lost = sum(r["lost_with_all_holders"] for r in results)
    print(
        f"soak: {len(results) - failed} passed, {failed} failed"
        + (f" ({lost} generations restarted after every holder died)" if lost else "")
    )


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--khorovodrun", required=True)
    p.add_argument(
        "--worker", required=True, help="worker command line (quoted), e.g. 'python3 w.py'"
    )
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--schedules", default=",".join(SCHEDULES))
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--min-np", type=int, default=2)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--step-ms", type=int, default=4)
    p.add_argument("--large-state-mb", type=int, default=64)
    p.add_argument("--elastic-timeout-s", type=int, default=60)
    p.add_argument("--heartbeat-timeout-s", type=float, default=15)
    p.add_argument("--trial-timeout-s", type=float, default=120)
    p.add_argument("--json", help="write every trial's result here")
    p.add_argument("--keep", action="store_true", help="keep the directories of passing trials too")
    args = p.parse_args()
    schedules = args.schedules.split(",")
    for s in schedules:
        if s not in SCHEDULES:
            p.error(f"unknown schedule {s!r}; known: {', '.join(SCHEDULES)}")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"soak: seed {seed}, {args.trials} trials over {', '.join(schedules)}", flush=True)
    rng = random.Random(seed)
    results = []
    for i in range(args.trials):
        trial = Trial(args, schedules[i % len(schedules)], rng, i)
        r = trial.run()
        results.append(r)
        status = "ok" if r["ok"] else "FAILED: " + "; ".join(r["problems"])
        print(
            f"trial {i:3d} {r['schedule']:<12} {status}  wall {r['wall_s']} s  "
            f"recovery {r['recovery_ms']} ms  [{', '.join(r['disturbances'])}]"
            + (f"  (kept {r['dir']})" if not r["ok"] else ""),
            flush=True,
        )
        if r["ok"] and not args.keep:
            subprocess.run(["rm", "-rf", r["dir"]], check=False)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": seed, "args": vars(args), "results": results}, f, indent=1)
    summarize(results)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
