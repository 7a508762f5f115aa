"""A real Prometheus scraping a 2-rank khorovodrun job on loopback, for the
tests of the worker's step series (test_torch_metrics.py for torch,
tensorflow/test_keras_metrics.py for Keras).

Contract: ``scrape_job(tmp_path, cmd, job_label, checks, job_checks)``
starts ``cmd`` (a khorovodrun command line whose script trains until the
file ``tmp_path/stop`` exists) with KHOROVOD_METRICS_PORT set to a free
block (rank r serves base+1+r) and no baseline, and a Prometheus loaded
with deploy/monitoring/khorovod-rules.yaml scraping both workers every
second; it polls until each PromQL in ``checks`` returns 2 series (one per
worker) and each in ``job_checks`` 1 (per job), at most 100 s, then stops
the job and returns (seen: {name: [values]}, job return code, output).
Everything binds 127.0.0.1; both processes are killed on the way out."""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from conftest import ROOT


def free_port_block(n):
    for _ in range(200):
        base = random.randint(20000, 60000 - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.fail("no free port block on 127.0.0.1")


def query(url, expr):
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as r:
        return json.load(r)["data"]["result"]


def values(url, expr):
    try:
        return [float(s["value"][1]) for s in query(url, expr)]
    except OSError:
        return []


def _start_prometheus(tmp_path, base, job_label):
    prometheus = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None
    )
    if prometheus is None:
        pytest.fail("prometheus is not installed (scripts/install-deps.sh installs it)")
    prom_port = free_port_block(1)
    rules = os.path.join(ROOT, "deploy", "monitoring", "khorovod-rules.yaml")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
        "rule_files": [rules],
        "scrape_configs": [
            {
                "job_name": "khorovod-workers",
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{base + 1}", f"127.0.0.1:{base + 2}"],
                        "labels": {"khorovod_job": job_label},
                    }
                ],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(json.dumps(config))
    prom = subprocess.Popen(
        [
            prometheus,
            f"--config.file={tmp_path}/prometheus.yml",
            f"--storage.tsdb.path={tmp_path}/tsdb",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return prom, f"http://127.0.0.1:{prom_port}"


def scrape_job(tmp_path, cmd, job_label, checks, job_checks, extra_env=None):
    base = free_port_block(3)
    env = dict(
        os.environ,
        KHOROVOD_METRICS_PORT=str(base),
        KHOROVOD_METRICS_HOST="127.0.0.1",
        OMP_NUM_THREADS="1",
        **(extra_env or {}),
    )
    # No baseline: the scaling efficiency must not need one.
    for var in ("KHOROVOD_BASELINE_SAMPLES_PER_SECOND", "HOROVOD_BASELINE_SAMPLES_PER_SECOND"):
        env.pop(var, None)
    job = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    prom, url = _start_prometheus(tmp_path, base, job_label)
    seen, out = {}, ""
    try:
        deadline = time.monotonic() + 100
        while time.monotonic() < deadline and job.poll() is None:
            seen = {name: values(url, expr) for name, expr in checks.items()}
            seen.update({name: values(url, expr) for name, expr in job_checks.items()})
            if all(len(seen[n]) == 2 for n in checks) and all(
                len(seen[n]) == 1 for n in job_checks
            ):
                break
            time.sleep(1)
        (tmp_path / "stop").write_text("")
        out, _ = job.communicate(timeout=60)
    finally:
        for p in (job, prom):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return seen, job.returncode, out


def step_checks(job_label):
    """The worker and per-job series both step-metrics tests look for."""
    checks = {
        "steps": "khorovod_worker_steps_total > 0",
        "samples per step": "khorovod_worker_samples_total / khorovod_worker_steps_total",
        "step duration": "khorovod_worker_step_duration_seconds_count > 0",
        "throughput": "khorovod_worker_throughput_samples_per_second > 0",
        "step efficiency": "khorovod_worker_step_efficiency >= 0",
        "scaling efficiency": "khorovod_worker_scaling_efficiency",
        "per-size samples": 'khorovod_worker_samples_at_world_size_total{world_size="2"} > 0',
    }
    # Recorded per job: one series (world size 2), as the dashboard shows it.
    job_checks = {
        "job scaling efficiency": f'khorovod_job:scaling_efficiency:by_world_size{{khorovod_job="{job_label}",world_size="2"}}',
        "job step efficiency": f'khorovod_job:step_efficiency:ratio_rate1m{{khorovod_job="{job_label}"}}',
    }
    return checks, job_checks


def assert_step_series(seen, checks, job_checks, samples_per_step):
    assert all(len(seen[n]) == 2 for n in checks), f"series per worker: {seen}"
    assert all(len(seen[n]) == 1 for n in job_checks), f"series per job: {seen}"
    # One world size only: the smallest, so 1 by definition (docs/observability.md).
    assert seen["scaling efficiency"] == [1.0, 1.0], seen
    assert seen["job scaling efficiency"] == [1.0], seen
    assert seen["samples per step"] == [samples_per_step] * 2, seen
    assert all(0 <= e <= 1 for e in seen["step efficiency"]), seen
