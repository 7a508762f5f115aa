"""horovod.torch's semantics, one test per API item of issue 17, at 2 and 3
ranks (tests/python/workers/api_semantics.py holds the checks)."""

import pytest
from conftest import run_job, worker

CHECKS = [
    "dtypes",
    "autograd",
    "grouped",
    "errors",
    "join",
    "optimizer_state",
    "distributed_optimizer",
    "sparse",
    "sync_batch_norm",
    "queries",
]


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("check", CHECKS)
def test_api_item(check, np):
    job = run_job(worker("api_semantics.py"), check, np=np, timeout=240)
    assert job.returncode == 0, job.output
    assert len(job.lines(f": {check} ok")) == np, job.output
    assert len(job.lines(": OK")) == np, job.output
