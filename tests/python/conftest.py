"""Shared helpers for the Python tests: launching multi-rank jobs.

ctest sets KHOROVODRUN (the launcher), KHOROVOD_TEST_PYTHON (the interpreter
the package was built for) and PYTHONPATH (the built package). Every job runs
on loopback under a wall-clock bound, and its whole output is returned so a
failing assertion shows what each rank printed.
"""

import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set; run these tests through ctest (-L python)")
    return value


class Job:
    def __init__(self, returncode, output):
        self.returncode = returncode
        self.output = output

    def lines(self, needle):
        return [line for line in self.output.splitlines() if needle in line]


def run_job(script, *args, np=2, launcher_args=(), timeout=150, env=None):
    """Runs ``khorovodrun -np N python script args`` and returns a Job."""
    cmd = [
        _env("KHOROVODRUN"),
        "-np",
        str(np),
        *launcher_args,
        _env("KHOROVOD_TEST_PYTHON"),
        script,
        *[str(a) for a in args],
    ]
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.update(env or {})
    try:
        proc = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            env=full_env,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"job timed out after {timeout}s: {' '.join(cmd)}\n{out}")
    return Job(proc.returncode, proc.stdout)


def worker(name):
    return os.path.join(HERE, "workers", name)
