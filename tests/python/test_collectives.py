"""Collectives through khorovodrun at 2 and 3 ranks, and the single-process
behaviour of the API (errors before init, unsupported inputs)."""

import pytest
import torch

import khorovod
import khorovod.torch as hvd
from conftest import run_job, worker


@pytest.mark.parametrize("np", [2, 3])
def test_collectives(np):
    job = run_job(worker("collectives.py"), np=np)
    assert job.returncode == 0, job.output
    assert len(job.lines(": OK")) == np, job.output


def test_calls_before_init_raise_value_error():
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.rank()
    with pytest.raises(khorovod.NotInitializedError):
        hvd.allreduce(torch.ones(1))


def test_single_process_job():
    hvd.init()
    try:
        assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
        assert torch.equal(hvd.allreduce(torch.arange(4.0)), torch.arange(4.0))
        with pytest.raises(TypeError, match="not supported"):
            hvd.allreduce(torch.ones(2, dtype=torch.complex64))
        with pytest.raises(NotImplementedError, match="Adasum"):
            hvd.allreduce(torch.ones(2), op=hvd.Adasum)
        with pytest.raises(hvd.KhorovodError, match="INVALID_ARGUMENT") as info:
            hvd.allreduce(torch.ones(2), name="")  # the runtime rejects empty names
        assert info.value.code == "INVALID_ARGUMENT"
        handle = hvd.allreduce_async(torch.ones(2), name="")
        for _ in range(2):  # a failed handle raises on every synchronize
            with pytest.raises(hvd.KhorovodError, match="INVALID_ARGUMENT"):
                hvd.synchronize(handle)
        assert hvd.poll(handle)
        with pytest.raises(ValueError, match="unique"):
            model = torch.nn.Linear(2, 2)
            named = [("w", model.weight), ("w", model.bias)]
            hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named)
    finally:
        hvd.shutdown()
    assert not hvd.is_initialized()


def test_bad_environment_is_reported(monkeypatch):
    monkeypatch.setenv("KHOROVOD_SIZE", "two")
    with pytest.raises(hvd.KhorovodError, match="KHOROVOD_SIZE"):
        hvd.init()
    assert not hvd.is_initialized()
