"""Elastic training from Python: a worker is SIGKILLed after a commit, the
survivors roll back and re-form, a replacement joins at a later commit, and
every rank ends with exactly the state that applying each step once gives."""

import re
import time

import khorovod
import pytest
from conftest import run_job, worker
from khorovod import _khorovod, elastic


def test_kill_and_rejoin():
    job = run_job(
        worker("elastic_train.py"),
        40,
        10,
        3,
        np=3,
        launcher_args=("--min-np", "2", "--max-np", "3", "--elastic-timeout", "60"),
    )
    out = job.output
    assert job.returncode == 0, out
    assert "Traceback" not in out, out
    assert job.lines("worker-1: simulating a crash after committing step 10"), out
    # Both survivors re-formed, resuming from the commit at step 10: as a world
    # of 2, or of 3 when the replacement registered before the rendezvous
    # settled (both orders happen; the end state must be the same).
    survivors = [l for l in job.lines("re-formed as rank") if re.search(r"of [23] at step 10\b", l)]
    assert len(survivors) >= 2, out
    # Each re-formation dropped the survivors' process set (they registered anew).
    assert len(job.lines("process set dropped by the re-formation")) >= 2, out
    done = [
        re.search(
            r"(worker-\d+): done: rank (\d) of 3, step (\d+), resets (\d+), .*"
            r"checksum (\S+)",
            l,
        )
        for l in job.lines(": done:")
    ]
    assert len(done) == 3 and all(done), out
    workers = sorted(m.group(1) for m in done)
    assert workers == ["worker-0", "worker-2", "worker-3"], out
    assert len({m.group(3) for m in done}) == 1, "ranks ended at different steps"
    assert len({m.group(5) for m in done}) == 1, "ranks disagree on the parameters"
    assert sorted(int(m.group(2)) for m in done) == [0, 1, 2]


def test_sigterm_leaves_at_the_commit_and_the_survivors_roll_nothing_back():
    job = run_job(
        worker("elastic_train.py"),
        40,
        10,
        3,
        np=3,
        launcher_args=("--min-np", "2", "--max-np", "3", "--elastic-timeout", "60"),
        env={"ELASTIC_TRAIN_SIGTERM": "1"},
    )
    out = job.output
    assert job.returncode == 0, out
    assert "Traceback" not in out, out
    assert job.lines("worker-1: SIGTERM at the start of step 10"), out
    assert job.lines("SIGTERM: left the job at a commit; ending"), out
    # It leaves at the commit of step 10 (of step 11 if the signal reached
    # the runtime's watch thread only after step 10's agreement).
    survivors = [
        l for l in job.lines("re-formed as rank") if re.search(r"of [23] at step 1[01]\b", l)
    ]
    assert len(survivors) >= 2, out
    done = {
        m.group(1): m
        for m in (
            re.search(
                r"(worker-\d+): done: rank \d of 3, step (\d+), resets \d+, "
                r"ran (\d+), .*checksum (\S+)",
                l,
            )
            for l in job.lines(": done:")
        )
        if m
    }
    assert {"worker-0", "worker-2"} <= set(done), out
    for name in ("worker-0", "worker-2"):
        assert done[name].group(2) == done[name].group(3), f"{name} ran a step twice:\n{out}"
    assert len({m.group(4) for m in done.values()}) == 1, "ranks disagree on the parameters"


def test_static_job_surfaces_a_dead_peer_as_an_exception():
    job = run_job(
        worker("peer_dies.py"),
        np=2,
        launcher_args=("--grace-period-ms", "30000"),
        env={"KHOROVOD_TIMEOUT_SECONDS": "10"},
    )
    # khorovodrun reports the killed worker as the job's failure.
    assert job.returncode != 0, job.output
    assert job.lines("rank 0: caught HorovodInternalError: UNAVAILABLE") or job.lines(
        "rank 0: caught HorovodInternalError: ABORTED"
    ), job.output
    assert job.lines("rank 0: reset refused: FAILED_PRECONDITION"), job.output
    assert job.lines("rank 0: OK"), job.output


def test_elastic_sampler_reshards_the_unprocessed_samples():
    import khorovod.torch as hvd
    import torch

    hvd.init()
    try:
        data = list(range(10))
        sampler = hvd.elastic.ElasticSampler(data, shuffle=False)
        assert list(sampler) == data
        sampler.record_batch(1, 3)  # two batches of 3 done at world size 1
        state = sampler.state_dict()
        again = hvd.elastic.ElasticSampler(data, shuffle=False)
        again.load_state_dict(state)
        assert list(again) == [6, 7, 8, 9]
        again.set_epoch(1)
        assert list(again) == data
        shuffled = hvd.elastic.ElasticSampler(data, shuffle=True, seed=3)
        assert sorted(shuffled) == data and list(shuffled) != data
        model = torch.nn.Linear(2, 1)
        st = hvd.elastic.TorchState(model=model, epoch=3)
        st.epoch = 4
        w0 = model.weight.detach().clone()
        with torch.no_grad():
            model.weight.add_(1.0)
        st.restore()
        assert st.epoch == 3 and torch.equal(model.weight, w0)
        st.epoch = 5
        st.commit()  # no membership change in a static job
        st.epoch = 6
        st.restore()
        assert st.epoch == 5
    finally:
        hvd.shutdown()


def test_sync_takes_the_newest_commit_not_rank_0(tmp_path):
    for np in (2, 3):
        job = run_job(worker("elastic_election.py"), "elect", tmp_path / f"unused-{np}", np=np)
        assert job.returncode == 0, job.output
        assert len(job.lines(": elect OK")) == np, job.output


def test_fresh_workers_resume_from_the_checkpoint(tmp_path):
    path = tmp_path / "state.ckpt"
    job = run_job(worker("elastic_election.py"), "write", path, np=2)
    assert job.returncode == 0 and len(job.lines(": write OK")) == 2, job.output
    job = run_job(worker("elastic_election.py"), "resume", path, np=3)
    assert job.returncode == 0 and len(job.lines(": resume OK")) == 3, job.output
    assert job.lines("resuming from the checkpoint"), job.output


# The run wrapper's reset policy, driven through a stand-in runtime whose
# reset() answers scripted statuses (the multi-rank tests above cover real
# re-formations; these pin down which failures are retried and which end).


class _ScriptedRuntime:
    def __init__(self, answers, delay_s=0.0):
        self.answers = list(answers)
        self.resets = 0
        self.delay_s = delay_s
        self.training_finished = False

    # The worker metrics the run wrapper records (no-ops here).
    def record_reset(self, code):
        pass

    def record_recovered(self, seconds):
        pass

    def record_state_sync(self, nbytes, seconds):
        pass

    def mark_training_finished(self):
        self.training_finished = True

    def reset(self):
        self.resets += 1
        time.sleep(self.delay_s)
        name, message = self.answers.pop(0)
        return (_khorovod.STATUS_CODES[name], message)


class _PlainState(elastic.State):
    def save(self):
        pass

    def restore(self):
        pass

    def sync(self):
        pass


def _train_failing_once():
    failures = []

    def train(state):
        if not failures:
            failures.append(1)
            raise khorovod.HorovodInternalError("UNAVAILABLE", "a peer died")
        return "trained"

    return train


def test_a_reset_failing_while_the_generation_forms_is_retried(monkeypatch):
    rt = _ScriptedRuntime(
        [
            ("UNAVAILABLE", "generation 3: rank 1 could not connect to its peers"),
            ("DEADLINE_EXCEEDED", "no generation within 100 ms"),
            ("OK", ""),
        ]
    )
    monkeypatch.setattr(elastic.CONTEXT, "runtime", lambda: rt)
    assert elastic.run(_train_failing_once())(_PlainState()) == "trained"
    assert rt.resets == 3


def test_the_rendezvous_verdict_ends_the_run_and_says_which(monkeypatch):
    verdict = "rendezvous generation 'w': HTTP 409 job_failed: job failed: reset limit of 3 re-formations reached"
    rt = _ScriptedRuntime([("FAILED_PRECONDITION", verdict)])
    monkeypatch.setattr(elastic.CONTEXT, "runtime", lambda: rt)
    with pytest.raises(khorovod.KhorovodError) as e:
        elastic.run(_train_failing_once())(_PlainState())
    assert e.value.code == "FAILED_PRECONDITION"
    assert "rendezvous ended the job" in str(e.value) and "reset limit of 3" in str(e.value)
    assert rt.resets == 1


def test_failed_resets_count_towards_the_reset_limit(monkeypatch):
    rt = _ScriptedRuntime([("UNAVAILABLE", "connection refused")] * 5)
    monkeypatch.setattr(elastic.CONTEXT, "runtime", lambda: rt)
    with pytest.raises(khorovod.KhorovodError) as e:
        elastic.run(_train_failing_once(), reset_limit=2)(_PlainState())
    assert "reset limit of 2" in str(e.value), str(e.value)
    assert rt.resets == 2


def test_failed_resets_stop_at_the_elastic_timeout(monkeypatch):
    monkeypatch.setenv("KHOROVOD_ELASTIC_TIMEOUT_SECONDS", "0.05")
    rt = _ScriptedRuntime([("UNAVAILABLE", "connection refused")] * 50, delay_s=0.02)
    monkeypatch.setattr(elastic.CONTEXT, "runtime", lambda: rt)
    with pytest.raises(khorovod.KhorovodError) as e:
        elastic.run(_train_failing_once())(_PlainState())
    assert e.value.code == "DEADLINE_EXCEEDED" and "elastic timeout" in str(e.value), str(e.value)
    assert 2 <= rt.resets < 10


def test_job_finished_during_a_reset_ends_the_worker_with_status_0(monkeypatch):
    rt = _ScriptedRuntime([("JOB_FINISHED", "the job is finishing")])
    monkeypatch.setattr(elastic.CONTEXT, "runtime", lambda: rt)
    with pytest.raises(SystemExit) as e:
        elastic.run(_train_failing_once())(_PlainState())
    assert e.value.code == 0
    assert isinstance(e.value.error, khorovod.JobFinishedError)


def test_a_late_joiners_init_ends_the_worker_with_status_0(monkeypatch):
    class FinishedRuntime:
        def init(self):
            return (_khorovod.STATUS_CODES["JOB_FINISHED"], "job_finishing")

    monkeypatch.setattr(_khorovod, "Runtime", FinishedRuntime)
    with pytest.raises(SystemExit) as e:
        elastic.CONTEXT.init()
    assert e.value.code == 0 and isinstance(e.value.error, khorovod.JobFinishedError)
    assert not elastic.CONTEXT.is_initialized()


def test_a_finished_run_tells_the_runtime_so_late_joiners_are_sent_away(monkeypatch):
    rt = _ScriptedRuntime([("OK", "")])
    monkeypatch.setattr(elastic.CONTEXT, "runtime", lambda: rt)
    assert elastic.run(_train_failing_once())(_PlainState()) == "trained"
    assert rt.training_finished


def test_a_failed_run_does_not_mark_the_training_finished(monkeypatch):
    rt = _ScriptedRuntime([("FAILED_PRECONDITION", "job failed: reset limit")])
    monkeypatch.setattr(elastic.CONTEXT, "runtime", lambda: rt)
    with pytest.raises(khorovod.KhorovodError, match="reset limit"):
        elastic.run(_train_failing_once())(_PlainState())
    assert not rt.training_finished


def test_a_python_late_joiner_ends_with_status_0_and_the_job_succeeds():
    """worker-1 dies right after the last commit; its replacement arrives
    after training ended. Unmodified script: the joiner exits 0 by itself and
    khorovodrun exits 0. (If the replacement made it into the last
    generation instead, it finishes with the others: also exit 0.)"""
    job = run_job(
        worker("late_joiner.py"),
        20,
        np=3,
        timeout=120,
        launcher_args=("--min-np", "2", "--max-np", "3"),
    )
    assert "simulating a crash after committing step 20" in job.output, job.output
    assert job.returncode == 0, job.output
    assert len(job.lines("finished training at step 20")) >= 2, job.output
    assert "Traceback" not in job.output, job.output
    late = job.lines("the elastic job finished training before it joined")
    print("late joiner path:", "exited 0 after the job finished" if late else "joined in time")


def test_torch_state_dispatches_keywords_by_type_as_horovods_registry():
    import khorovod.torch as hvd
    import torch
    from khorovod.common.elastic import ObjectState, State
    from khorovod.torch.elastic import get_handler_registry

    hvd.init()
    try:
        data = list(range(12))
        train, val = (hvd.elastic.ElasticSampler(data, shuffle=False) for _ in range(2))
        model = torch.nn.Linear(2, 1)
        st = hvd.elastic.TorchState(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1),
            train_sampler=train,
            val_sampler=val,
            epoch=0,
        )
        assert set(st._handlers) == {"model", "optimizer", "train_sampler", "val_sampler"}
        assert st.train_sampler is train and st.epoch == 0
        assert any(t is torch.nn.Module for t, _ in get_handler_registry())
        train.record_batch(1, 3)
        st.commit()
        train.record_batch(3, 3)
        st.restore()  # in place: the DataLoader's sampler object is the one restored
        assert st.train_sampler is train and list(train) == data[6:], list(train)
        assert list(val) == data

        calls = []

        class Resetting(ObjectState):
            def reset(self):
                calls.append("reset")

        obj = Resetting(bcast_object=None, get_rank=None, lr=0.5)
        obj.register_reset_callbacks([lambda: calls.append("callback")])
        obj.lr = 1.0
        obj.restore()
        assert obj.lr == 0.5
        obj.lr = 2.0
        obj.save()
        obj.sync()  # one rank: its own values
        assert obj.lr == 2.0
        obj.on_reset()
        assert calls == ["reset", "callback"]
        assert issubclass(hvd.elastic.TorchState, State)
    finally:
        hvd.shutdown()
