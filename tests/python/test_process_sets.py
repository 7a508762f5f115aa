"""Process sets with the runtime's support, at 2 and 3 ranks
(tests/python/workers/process_sets.py holds the checks)."""

import pytest
from conftest import run_job, worker

CHECKS = ["static", "dynamic", "mismatch", "optimizer"]


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", CHECKS)
def test_process_sets(check, np):
    job = run_job(worker("process_sets.py"), check, np=np, timeout=120)
    assert job.returncode == 0, job.output
    assert len(job.lines(f": {check} ok")) == np, job.output
    assert len(job.lines(": OK")) == np, job.output
