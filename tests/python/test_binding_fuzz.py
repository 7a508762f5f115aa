"""The seeded fuzzer of the collectives' Python inputs (workers/binding_fuzz.py)
at 2 and 3 ranks: every call gives the reference result or raises what
Horovod raises, on every rank, and the process never crashes or hangs. In the
ASan build (label python-asan) it runs with the sanitizer preloaded."""

import os
import subprocess
import sys

import pytest
from conftest import run_job, worker


@pytest.mark.parametrize("np,seed", [(2, 1), (2, 2), (3, 3)])
def test_fuzzed_calls_work_or_raise_on_every_rank(np, seed):
    job = run_job(worker("binding_fuzz.py"), seed, 150, np=np, timeout=180)
    assert job.returncode == 0, job.output
    assert len(job.lines("calls")) == np and len(job.lines(": OK")) == np, job.output
    assert "AddressSanitizer" not in job.output, job.output


def test_the_preloaded_sanitizer_sees_python_heap_errors():
    """In the ASan build (python-asan) the fuzzer's pass means something only
    if ASan watches the interpreter's heap: a deliberate overflow must be
    reported. Elsewhere there is no sanitizer to check."""
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("not the ASan build")
    overflow = (
        "import ctypes; b = ctypes.create_string_buffer(16); "
        "ctypes.memmove(ctypes.addressof(b), b'x' * 64, 64)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", overflow],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0 and "heap-buffer-overflow" in proc.stdout, proc.stdout
