"""Elastic training from Python: a worker is SIGKILLed after a commit, the
survivors roll back and re-form, a replacement joins at a later commit, and
every rank ends with exactly the state that applying each step once gives."""

import re

from conftest import run_job, worker


def test_kill_and_rejoin():
    job = run_job(worker("elastic_train.py"), 40, 10, 3, np=3,
                  launcher_args=("--min-np", "2", "--max-np", "3", "--elastic-timeout", "60"))
    out = job.output
    assert job.returncode == 0, out
    assert "Traceback" not in out, out
    assert job.lines("worker-1: simulating a crash after committing step 10"), out
    # Both survivors re-formed as a world of 2, resuming from the commit at step 10.
    assert len([l for l in job.lines("re-formed as rank") if "of 2 at step 10" in l]) == 2, out
    done = [re.search(r"(worker-\d+): done: rank (\d) of 3, step (\d+), resets (\d+), .*"
                      r"checksum (\S+)", l) for l in job.lines(": done:")]
    assert len(done) == 3 and all(done), out
    workers = sorted(m.group(1) for m in done)
    assert workers == ["worker-0", "worker-2", "worker-3"], out
    assert len({m.group(3) for m in done}) == 1, "ranks ended at different steps"
    assert len({m.group(5) for m in done}) == 1, "ranks disagree on the parameters"
    assert sorted(int(m.group(2)) for m in done) == [0, 1, 2]
