"""A Keras job's metrics without code changes: a real Prometheus, loaded
with deploy/monitoring/khorovod-rules.yaml, scrapes a 2-rank Keras job
(workers/keras_metrics_fit.py: model.fit with khorovod's
DistributedOptimizer, no metrics code, no baseline), under Keras 3 and
under Keras 2 (tf-keras, TF_USE_LEGACY_KERAS=1), and the step and
efficiency series the torch test checks are there: steps, samples (32 per
step, inferred from the train step's batch), step duration, throughput,
step efficiency, scaling efficiency per worker and per job and world size
(tests/python/prometheus_scrape.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import _env  # noqa: E402  (tests/python/conftest.py)
from prometheus_scrape import assert_step_series, scrape_job, step_checks  # noqa: E402
from test_tensorflow import skip_without_tf_keras  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("legacy_keras", ["0", "1"], ids=["keras3", "keras2"])
def test_keras_fit_exports_step_series(tmp_path, legacy_keras):
    skip_without_tf_keras(2 if legacy_keras == "1" else 3)
    job_label = f"keras-job-{legacy_keras}"
    checks, job_checks = step_checks(job_label)
    cmd = [
        _env("KHOROVODRUN"),
        "-np",
        "2",
        _env("KHOROVOD_TEST_PYTHON"),
        os.path.join(HERE, "workers", "keras_metrics_fit.py"),
        str(tmp_path / "stop"),
        "120",
    ]
    seen, returncode, out = scrape_job(
        tmp_path,
        cmd,
        job_label,
        checks,
        job_checks,
        extra_env={"TF_USE_LEGACY_KERAS": legacy_keras},
    )
    assert_step_series(seen, checks, job_checks, 32.0)
    assert returncode == 0 and out.count(": OK") == 2, out
