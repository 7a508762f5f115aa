"""khorovodrun exports Horovod's variables (horovodrun's gloo_run) to every
worker, readable before init(): the placement in static jobs; in elastic ones
HOROVOD_HOSTNAME, HOROVOD_ELASTIC=1 and the spawn-time placement (ranks then
come from each generation)."""

import ast

from conftest import run_job, worker


def _before(job):
    return [
        ast.literal_eval(line.split("env before init: ", 1)[1])
        for line in job.lines("env before init: ")
    ]


def test_static_workers_see_their_placement_before_init():
    job = run_job(worker("horovod_env.py"), np=3, timeout=60)
    assert job.returncode == 0, job.output
    assert len(job.lines(": OK")) == 3, job.output
    seen = _before(job)
    assert sorted(int(e["HOROVOD_RANK"]) for e in seen) == [0, 1, 2], job.output
    for e in seen:
        assert (
            e["HOROVOD_SIZE"],
            e["HOROVOD_LOCAL_SIZE"],
            e["HOROVOD_CROSS_RANK"],
            e["HOROVOD_CROSS_SIZE"],
        ) == ("3", "3", "0", "1"), e
        assert e["HOROVOD_LOCAL_RANK"] == e["HOROVOD_RANK"], e
        assert e["HOROVOD_HOSTNAME"], e
        assert e["HOROVOD_ELASTIC"] is None, e


def test_elastic_workers_see_hostname_and_elastic_flag():
    job = run_job(
        worker("horovod_env.py"), np=2, timeout=90, launcher_args=("--min-np", "2", "--max-np", "2")
    )
    assert job.returncode == 0, job.output
    seen = _before(job)
    assert len(seen) == 2, job.output
    for e in seen:
        assert e["HOROVOD_ELASTIC"] == "1" and e["HOROVOD_HOSTNAME"], e
        assert e["HOROVOD_SIZE"] == "2", e  # the spawn-time placement, as Horovod's driver exports
    assert sorted(int(e["HOROVOD_RANK"]) for e in seen) == [0, 1], job.output
