"""op=hvd.Adasum (runtime core/adasum.h) at 2 and 4 ranks against a numpy
implementation of Horovod's pairwise formula, and Horovod's refusal at 3
ranks (tests/python/workers/adasum.py holds the checks)."""

import pytest
from conftest import run_job, worker


@pytest.mark.parametrize("np", [2, 4])
@pytest.mark.parametrize("check", ["values", "refusals", "optimizer"])
def test_adasum(check, np):
    job = run_job(worker("adasum.py"), check, np=np, timeout=180)
    assert job.returncode == 0, job.output
    assert len(job.lines(f"<stdout>:{check} ok")) == np, job.output
    assert len(job.lines("<stdout>:OK")) == np, job.output


def test_adasum_refused_at_three_ranks():
    job = run_job(worker("adasum.py"), "non_power_of_two", np=3, timeout=120)
    assert job.returncode == 0, job.output
    assert len(job.lines("<stdout>:non_power_of_two ok")) == 3, job.output
