"""A torch job's metrics without code changes: a real Prometheus, loaded with
deploy/monitoring/khorovod-rules.yaml, scrapes a 2-rank khorovod.torch job
(tests/python/workers/metrics_train.py) that sets no baseline, and the step
and efficiency series are non-empty: steps, samples (32 per step, inferred
from the model's input), step duration, throughput, step efficiency, and
the scaling efficiency derived without a baseline, per worker and per job
and world size (the dashboard's "against world size" panel). Everything
binds 127.0.0.1; every wait has a deadline (prometheus_scrape.py)."""

from conftest import _env, worker
from prometheus_scrape import assert_step_series, scrape_job, step_checks

JOB = "torch-job"


def test_torch_job_exports_step_series(tmp_path):
    checks, job_checks = step_checks(JOB)
    cmd = [
        _env("KHOROVODRUN"),
        "-np",
        "2",
        _env("KHOROVOD_TEST_PYTHON"),
        worker("metrics_train.py"),
        str(tmp_path / "stop"),
        "120",
    ]
    seen, returncode, out = scrape_job(tmp_path, cmd, JOB, checks, job_checks)
    assert_step_series(seen, checks, job_checks, 32.0)
    assert returncode == 0 and out.count(": OK") == 2, out
