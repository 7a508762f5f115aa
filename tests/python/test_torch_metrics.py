"""A torch job's metrics without code changes: a real Prometheus, loaded with
deploy/monitoring/khorovod-rules.yaml, scrapes a 2-rank khorovod.torch job
(tests/python/workers/metrics_train.py) that sets no baseline, and the step
and efficiency series are non-empty: steps, samples (32 per step, inferred
from the model's input), step duration, throughput, step efficiency, and
the scaling efficiency derived without a baseline, per worker and per job
and world size (the dashboard's "against world size" panel). Everything
binds 127.0.0.1; every wait has a deadline."""

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

from conftest import ROOT, _env, worker

JOB = "torch-job"


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


def test_torch_job_exports_step_series(tmp_path):
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.fail("prometheus is not installed (scripts/install-deps.sh installs it)")
    base, prom_port = free_port_block(3), free_port_block(1)
    stop_file = tmp_path / "stop"
    env = dict(os.environ, KHOROVOD_METRICS_PORT=str(base), KHOROVOD_METRICS_HOST="127.0.0.1",
               OMP_NUM_THREADS="1")
    # No baseline: the scaling efficiency must not need one.
    for var in ("KHOROVOD_BASELINE_SAMPLES_PER_SECOND", "HOROVOD_BASELINE_SAMPLES_PER_SECOND"):
        env.pop(var, None)
    job = subprocess.Popen([_env("KHOROVODRUN"), "-np", "2", _env("KHOROVOD_TEST_PYTHON"),
                            worker("metrics_train.py"), str(stop_file), "120"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           start_new_session=True)
    rules = os.path.join(ROOT, "deploy", "monitoring", "khorovod-rules.yaml")
    config = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms",
                         "evaluation_interval": "1s"},
              "rule_files": [rules],
              "scrape_configs": [{"job_name": "khorovod-workers", "static_configs": [
                  {"targets": [f"127.0.0.1:{base + 1}", f"127.0.0.1:{base + 2}"],
                   "labels": {"khorovod_job": JOB}}]}]}
    (tmp_path / "prometheus.yml").write_text(json.dumps(config))
    prom = subprocess.Popen([prometheus, f"--config.file={tmp_path}/prometheus.yml",
                             f"--storage.tsdb.path={tmp_path}/tsdb",
                             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{prom_port}"
    seen = {}
    try:
        deadline = time.monotonic() + 100
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
            "job scaling efficiency":
                f'khorovod_job:scaling_efficiency:by_world_size{{khorovod_job="{JOB}",world_size="2"}}',
            "job step efficiency": f'khorovod_job:step_efficiency:ratio_rate1m{{khorovod_job="{JOB}"}}',
        }
        while time.monotonic() < deadline and job.poll() is None:
            seen = {name: values(url, expr) for name, expr in checks.items()}
            seen.update({name: values(url, expr) for name, expr in job_checks.items()})
            if all(len(seen[n]) == 2 for n in checks) and all(len(seen[n]) == 1 for n in job_checks):
                break
            time.sleep(1)
        stop_file.write_text("")
        out, _ = job.communicate(timeout=60)
    finally:
        for p in (job, prom):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert all(len(seen[n]) == 2 for n in checks), f"series per worker: {seen}\n{out}"
    assert all(len(seen[n]) == 1 for n in job_checks), f"series per job: {seen}\n{out}"
    # One world size only: the smallest, so 1 by definition (docs/observability.md).
    assert seen["scaling efficiency"] == [1.0, 1.0], seen
    assert seen["job scaling efficiency"] == [1.0], seen
    assert seen["samples per step"] == [32.0, 32.0], seen
    assert all(0 <= e <= 1 for e in seen["step efficiency"]), seen
    assert job.returncode == 0 and out.count(": OK") == 2, out
