"""The seeded fuzzer of the collectives' Python inputs (workers/binding_fuzz.py)
at 2 and 3 ranks: every call gives the reference result or raises what
Horovod raises, on every rank, and the process never crashes or hangs. In the
ASan build (label python-asan) it runs with the sanitizer preloaded."""

import pytest

from conftest import run_job, worker


@pytest.mark.parametrize("np,seed", [(2, 1), (2, 2), (3, 3)])
def test_fuzzed_calls_work_or_raise_on_every_rank(np, seed):
    job = run_job(worker("binding_fuzz.py"), seed, 150, np=np, timeout=180)
    assert job.returncode == 0, job.output
    assert len(job.lines("calls")) == np and len(job.lines(": OK")) == np, job.output
    assert "AddressSanitizer" not in job.output, job.output
