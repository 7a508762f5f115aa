"""A Horovod PyTorch script runs on khorovod with only its import line changed."""

import difflib
import re

import pytest
import torch
from conftest import run_job, worker


def test_five_step_script_with_only_the_import_changed(tmp_path):
    with open(worker("seed_five_steps.py")) as f:
        original = f.read()
    converted = re.sub(
        r"^import horovod\.torch as hvd$", "import khorovod.torch as hvd", original, flags=re.M
    )
    changed = [
        l
        for l in difflib.unified_diff(
            original.splitlines(), converted.splitlines(), lineterm="", n=0
        )
        if l[:1] in "+-" and not l.startswith(("+++", "---"))
    ]
    assert changed == ["-import horovod.torch as hvd", "+import khorovod.torch as hvd"], changed
    script = tmp_path / "train.py"
    script.write_text(converted)
    job = run_job(str(script), np=2)
    assert job.returncode == 0, job.output
    losses = [float(m.group(1)) for m in re.finditer(r"Epoch \d: loss=(\S+)", job.output)]
    assert len(losses) == 5, job.output
    assert all(l == l and l < 10 for l in losses), losses  # finite, sane


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="torch.cuda.is_available() is False (no GPU, or a CPU-only torch)",
)
@pytest.mark.parametrize("np_", [2, 4])
def test_seed_script_on_cuda_tensors_through_nccl(tmp_path, np_):
    """The same script on CUDA tensors through NCCL. A machine with fewer
    GPUs than ranks needs one change: the pinned device wraps around
    (local_rank % device_count), and the ranks share it (KHOROVOD_GPU_SHARE=1)."""
    with open(worker("seed_five_steps.py")) as f:
        script = re.sub(
            r"^import horovod\.torch as hvd$", "import khorovod.torch as hvd", f.read(), flags=re.M
        )
    if torch.cuda.device_count() < np_:
        script = script.replace(
            "hvd.local_rank())", "hvd.local_rank() % torch.cuda.device_count())"
        )
        assert script.count("% torch.cuda.device_count()") == 2, script
    path = tmp_path / "train_cuda.py"
    path.write_text(script)
    job = run_job(
        str(path),
        np=np_,
        timeout=300,
        env={"KHOROVOD_GPU_OPERATIONS": "nccl", "KHOROVOD_GPU_SHARE": "1"},
    )
    assert job.returncode == 0, job.output
    losses = [float(m.group(1)) for m in re.finditer(r"Epoch \d: loss=(\S+)", job.output)]
    assert len(losses) == 5, job.output
    assert all(l == l and l < 10 for l in losses), losses
