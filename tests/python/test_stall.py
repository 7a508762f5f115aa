"""Stall check as Horovod's: a slow rank is warned about, not failed; the
job shuts down (HorovodInternalError) only past the stall shutdown time, and
the check can be disabled. Short check times keep each job under ~10 s."""

from conftest import run_job, worker

WARNING = "waiting for remainder of ranks for more than 1 seconds"


def test_a_rank_busy_past_the_check_time_is_warned_about_and_the_job_finishes():
    job = run_job(
        worker("stall.py"),
        3.5,
        np=2,
        timeout=60,
        launcher_args=("--stall-check-warning-time-seconds", "1"),
    )
    assert job.returncode == 0, job.output
    assert len(job.lines("allreduce completed")) == 2, job.output
    assert WARNING in job.output, job.output
    assert "Missing ranks:\n" in job.output.replace("[0]<stderr>:", ""), job.output
    assert job.lines("0: [stall.tensor]"), job.output
    assert "HorovodInternalError" not in job.output, job.output


def test_the_stall_shutdown_time_raises_horovod_internal_error_on_every_rank():
    job = run_job(
        worker("stall.py"),
        8,
        np=2,
        timeout=60,
        env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "2", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "5"},
    )
    assert job.returncode == 0, job.output
    assert len(job.lines("HorovodInternalError: ABORTED")) == 2, job.output
    assert job.lines("0!: [stall.tensor]"), job.output
    assert "allreduce completed" not in job.output, job.output


def test_no_stall_check_disables_the_warning():
    job = run_job(
        worker("stall.py"),
        2.5,
        np=2,
        timeout=60,
        launcher_args=("--no-stall-check", "--stall-check-warning-time-seconds", "1"),
    )
    assert job.returncode == 0, job.output
    assert len(job.lines("allreduce completed")) == 2, job.output
    assert "Missing ranks" not in job.output, job.output
