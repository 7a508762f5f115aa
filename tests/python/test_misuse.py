"""Misuse of the async API never crashes the process (issue 28): dropped
handles, duplicate in-flight names, tensors freed early, shutdown with work
in flight. See workers/dropped_handles.py for the cases."""

from conftest import run_job, worker

CASES = (
    "allreduce_duplicate",
    "allreduce_inplace_duplicate",
    "allgather_duplicate",
    "broadcast_duplicate",
    "reducescatter_duplicate",
    "dropped_output",
    "many_dropped",
    "shutdown_in_flight",
)


def test_dropped_handles_and_duplicate_names_do_not_crash():
    job = run_job(worker("dropped_handles.py"), np=2, timeout=120)
    assert job.returncode == 0, job.output
    for case in CASES:
        assert len(job.lines(f": {case}: OK")) == 2, (case, job.output)
    assert "corrupted" not in job.output and "Segmentation" not in job.output, job.output
