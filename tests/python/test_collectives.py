"""Collectives through khorovodrun at 2 and 3 ranks, and the single-process
behaviour of the API (errors before init, unsupported inputs)."""

import khorovod
import khorovod.torch as hvd
import pytest
import torch
import torch.utils.dlpack
from conftest import run_job, worker
from khorovod._context import CONTEXT
from khorovod.torch import mpi_ops

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="torch.cuda.is_available() is False (no GPU, or a CPU-only torch)",
)


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
        with pytest.raises(ValueError, match="not supported"):
            hvd.allreduce(torch.ones(2, dtype=torch.complex64))
        # Adasum of one rank's vector is that vector (1 is a power of two).
        assert torch.equal(hvd.allreduce(torch.arange(3.0), op=hvd.Adasum), torch.arange(3.0))
        with pytest.raises(NotImplementedError, match="Adasum"):
            hvd.reducescatter(torch.ones(2), op=hvd.Adasum)
        # An empty name is no name, as Horovod's GetOpName has it.
        assert torch.equal(hvd.allreduce(torch.ones(2), name="", op=hvd.Sum), torch.ones(2))
        # Refused at submission: the async call itself raises, a ValueError
        # as Horovod raises for bad arguments (a broadcast root outside the job).
        with pytest.raises(ValueError, match="INVALID_ARGUMENT") as info:
            hvd.broadcast_async(torch.ones(2), root_rank=3)
        assert info.value.code == "INVALID_ARGUMENT"
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


def test_results_export_through_dlpack():
    """The capsule path that hands CUDA results to torch, on host results:
    same bytes as take_output, the capsule is consumed once, and an
    unconsumed capsule is freed without leaking or crashing."""
    hvd.init()
    try:
        runtime = CONTEXT.runtime()
        for dtype in (
            torch.float32,
            torch.float16,
            torch.bfloat16,
            torch.int8,
            torch.uint8,
            torch.int64,
        ):
            src = (torch.arange(24) % 7).to(dtype).reshape(2, 3, 4)
            h = runtime.allgather_async(f"dl.{dtype}", mpi_ops._view(src))
            assert h.wait()[0] == 0
            capsule, code, shape, kind, index = h.take_output_dlpack()
            assert (code, shape, kind, index) == (mpi_ops._DTYPES[dtype], [2, 3, 4], 0, 0)
            out = torch.utils.dlpack.from_dlpack(capsule)
            assert out.dtype == dtype and torch.equal(out, src)
            # already taken over; torch's exception type for that varies by version
            with pytest.raises(Exception):  # noqa: B017
                torch.utils.dlpack.from_dlpack(capsule)
        h = runtime.allgather_async("dl.dropped", mpi_ops._view(torch.ones(3)))
        assert h.wait()[0] == 0
        dropped = h.take_output_dlpack()[0]
        assert dropped is not None
        del dropped  # never consumed: the capsule's destructor frees the result
        h = runtime.allgather_async("dl.empty", mpi_ops._view(torch.ones(0, 2)))
        assert h.wait()[0] == 0
        assert h.take_output_dlpack()[0] is None
    finally:
        hvd.shutdown()


# Every collective on CUDA tensors, and a short DistributedOptimizer training run.
CUDA_WORKERS = ["cuda_collectives.py", "cuda_training.py"]


@needs_cuda
@pytest.mark.parametrize("script", CUDA_WORKERS)
def test_cuda_single_process_nccl(script):
    job = run_job(worker(script), np=1, env={"KHOROVOD_GPU_OPERATIONS": "nccl"})
    assert job.returncode == 0, job.output
    assert len(job.lines(": OK")) == 1, job.output


@needs_cuda
@pytest.mark.parametrize("script", CUDA_WORKERS)
def test_cuda_two_processes_share_a_gpu_through_staging(script):
    job = run_job(
        worker(script), np=2, env={"KHOROVOD_GPU_OPERATIONS": "staging", "KHOROVOD_GPU_DEVICE": "0"}
    )
    assert job.returncode == 0, job.output
    assert len(job.lines(": OK")) == 2, job.output


# Several ranks on one GPU through NCCL (KHOROVOD_GPU_SHARE=1: the runtime
# makes NCCL accept it, docs/gpu.md), at 2 and 4 ranks.
@needs_cuda
@pytest.mark.parametrize("np_", [2, 4])
@pytest.mark.parametrize("script", CUDA_WORKERS)
def test_cuda_ranks_share_a_gpu_through_nccl(script, np_):
    job = run_job(
        worker(script),
        np=np_,
        timeout=300,
        env={
            "KHOROVOD_GPU_OPERATIONS": "nccl",
            "KHOROVOD_GPU_SHARE": "1",
            "KHOROVOD_GPU_DEVICE": "0",
        },
    )
    assert job.returncode == 0, job.output
    assert len(job.lines(": OK")) == np_, job.output
    assert job.lines("khorovod: nccl: "), job.output  # the formation line names the NCCL loaded
