"""DistributedOptimizer: numerical equivalence with single-process training,
and the broadcast helpers, through khorovodrun."""

import pytest
from conftest import run_job, worker


@pytest.mark.parametrize(
    "args",
    [
        ("sgd",),
        ("adam",),
        ("sgd", "fp16"),
        ("sgd", "none", "2"),
        ("adam", "none", "1", "2.0"),
        ("sgd", "none", "1", "1.0", "clip"),
    ],
    ids=["sgd", "adam", "sgd-fp16", "sgd-2-passes", "adam-predivide", "sgd-clip-synchronize"],
)
def test_matches_single_process_on_concatenated_batch(args):
    job = run_job(worker("equivalence.py"), *args, np=2)
    assert job.returncode == 0, job.output
    assert len(job.lines(": OK")) == 2, job.output


def test_three_ranks_sgd():
    job = run_job(worker("equivalence.py"), "sgd", np=3)
    assert job.returncode == 0, job.output
    assert len(job.lines(": OK")) == 3, job.output


def test_broadcast_parameters_and_optimizer_state():
    job = run_job(worker("broadcast_state.py"), np=2)
    assert job.returncode == 0, job.output
    assert len(job.lines(": OK")) == 2, job.output
