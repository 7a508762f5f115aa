"""khorovod.tensorflow and khorovod.tensorflow.keras through khorovodrun:
every collective at 2, 3 and 4 ranks; a Keras script written for Horovod
(import line changed) at 2 and 4 ranks, under Keras 3 and Keras 2
(tf-keras); the elastic Keras script with a
worker killed inside model.fit; the epoch resumed after a reset running
only its remaining batches (Keras 3 and tf-keras); a peer killed during a
TF allreduce;
TensorFlow and torch in one process.
Run with the interpreter that has TensorFlow (ctest when the build found
it; the tensorflow suite stage from the pip-installed venv)."""

import importlib.util
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import run_job  # noqa: E402  (tests/python/conftest.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ELASTIC = ("--min-np", "2", "--max-np", "3", "--elastic-timeout", "60", "--reset-limit", "3")


def skip_without_tf_keras(keras):
    """The tensorflow stage's venv has tf-keras; a CMake build's interpreter may not."""
    if keras == 2 and importlib.util.find_spec("tf_keras") is None:
        pytest.skip("tf-keras is not installed (python/tf-keras-pin.txt)")


def worker(name):
    return os.path.join(HERE, "workers", name)


def horovod_script(tmp_path, name):
    """The Horovod script with only its import line changed."""
    text = open(worker(name)).read()
    changed = text.replace(
        "import horovod.tensorflow.keras as hvd\n", "import khorovod.tensorflow.keras as hvd\n"
    )
    assert changed.count("\n") == text.count("\n") and changed != text
    path = tmp_path / name
    path.write_text(changed)
    return str(path)


@pytest.mark.parametrize("np", [2, 3, 4])
def test_collectives(np):
    job = run_job(worker("tf_collectives.py"), np=np, timeout=240)
    assert job.returncode == 0, job.output
    assert sorted(job.lines(": OK")) == sorted(f"[{r}]<stdout>:rank {r}: OK" for r in range(np)), (
        job.output
    )


@pytest.mark.parametrize(
    "np,keras", [(2, 3), (4, 3), (2, 2)], ids=["np2-keras3", "np4-keras3", "np2-keras2"]
)
def test_horovod_keras_script(tmp_path, np, keras):
    """Keras 2 is tf-keras through TF_USE_LEGACY_KERAS=1, as legacy code runs."""
    skip_without_tf_keras(keras)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    job = run_job(
        horovod_script(tmp_path, "keras_horovod_fit.py"),
        ckpt,
        np=np,
        timeout=300,
        env={"TF_USE_LEGACY_KERAS": "1" if keras == 2 else "0"},
    )
    assert job.returncode == 0, job.output
    assert job.lines(f"keras {keras}."), job.output
    losses = [
        float(m.group(1))
        for m in map(re.compile(r"epoch \d loss=(\S+)").search, job.output.splitlines())
        if m
    ]
    assert len(losses) == 4 and losses[-1] < losses[0] / 4, job.output
    assert job.lines("checkpoint restored, optimizer distributed"), job.output
    assert sorted(os.listdir(ckpt)) == [f"checkpoint-{e}.keras" for e in range(1, 5)]


def _done(job, pattern):
    return [m for m in map(re.compile(pattern).search, job.output.splitlines()) if m]


def elastic_args(np):
    return (
        "--min-np",
        str(np - 1),
        "--max-np",
        str(np),
        "--elastic-timeout",
        "60",
        "--reset-limit",
        "3",
    )


@pytest.mark.parametrize("np", [2, 4])
def test_keras_elastic_worker_killed_mid_fit(tmp_path, np):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    job = run_job(
        horovod_script(tmp_path, "keras_elastic.py"),
        3,
        1,
        np,
        ckpt,
        np=np,
        launcher_args=elastic_args(np),
        timeout=300,
    )
    assert job.returncode == 0, job.output
    assert job.lines("worker-1: simulating a crash in epoch 1 batch 3"), job.output
    survivors = [l for l in job.lines("re-formed as rank") if f"of {np - 1} at epoch 1" in l]
    assert len(survivors) == np - 1, job.output
    done = _done(job, rf"(worker-\d+): done: rank (\d) of {np}, epoch (\d+), checksum (\S+)")
    expected = sorted([f"worker-{w}" for w in range(np) if w != 1] + [f"worker-{np}"])
    assert sorted(m.group(1) for m in done) == expected, job.output
    assert len({m.group(4) for m in done}) == 1, "ranks ended with different weights"
    assert (ckpt / "checkpoint.keras").exists()


@pytest.mark.parametrize("keras", [3, 2], ids=["keras3", "keras2"])
def test_keras_update_batch_state_shortens_the_resumed_epoch(keras):
    """The exact cases in one process: a resumed epoch, one resumed twice,
    other callbacks' stops kept, no reset."""
    skip_without_tf_keras(keras)
    job = run_job(
        worker("keras_batch_state.py"),
        np=1,
        timeout=180,
        env={"TF_USE_LEGACY_KERAS": "1" if keras == 2 else "0"},
    )
    assert job.returncode == 0, job.output
    assert job.lines(f"keras {keras}."), job.output
    assert job.lines("rank 0: OK"), job.output


RESUME_STEPS = 12
EPOCH_LINE = r"(worker-\d+): epoch (\d+) from batch (\d+) ran (\d+) batches of (\d+) at size (\d)"


@pytest.mark.parametrize("keras", [3, 2], ids=["keras3", "keras2"])
def test_keras_elastic_resumed_epoch_runs_the_remaining_batches(tmp_path, keras):
    """2 ranks, worker-1 killed at batch 6 of epoch 1, a replacement added:
    every epoch that resumes at state.batch B runs RESUME_STEPS - B batches
    (UpdateBatchStateCallback's rule), under Keras 3 and tf-keras."""
    skip_without_tf_keras(keras)
    job = run_job(
        horovod_script(tmp_path, "keras_elastic_resume.py"),
        3,
        RESUME_STEPS,
        1,
        6,
        2,
        np=2,
        launcher_args=elastic_args(2),
        timeout=300,
        env={"TF_USE_LEGACY_KERAS": "1" if keras == 2 else "0"},
    )
    assert job.returncode == 0, job.output
    assert job.lines("worker-1: simulating a crash in epoch 1 batch 6"), job.output
    epochs = [m.groups() for m in _done(job, EPOCH_LINE)]
    wrong = [e for e in epochs if int(e[3]) != RESUME_STEPS - int(e[2])]
    assert not wrong, (
        f"epochs that ran other than {RESUME_STEPS} - B batches: {wrong}\n{job.output}"
    )
    # The survivor's resumed epoch 1 (rolled back to the commit before the
    # crash) ran only what was left of it, alone.
    resumed = [e for e in epochs if e[0] == "worker-0" and e[1] == "1" and e[5] == "1"]
    assert len(resumed) == 1 and 0 < int(resumed[0][2]) < RESUME_STEPS, job.output
    done = _done(job, r"(worker-\d+): done: rank (\d) of 2, epoch (\d+), checksum (\S+)")
    assert sorted(m.group(1) for m in done) == ["worker-0", "worker-2"], job.output
    assert len({m.group(4) for m in done}) == 1, "ranks ended with different weights"


def test_peer_killed_during_a_tf_allreduce():
    job = run_job(worker("tf_peer_dies.py"), 30, 10, 3, np=3, launcher_args=ELASTIC, timeout=300)
    assert job.returncode == 0, job.output
    failed = [l for l in job.lines("allreduce of step 10 failed:")]
    assert len(failed) == 2 and all(
        "khorovod UNAVAILABLE" in l or "khorovod ABORTED" in l for l in failed
    ), job.output
    assert len([l for l in job.lines("re-formed as rank") if "of 2 at step 10" in l]) == 2, (
        job.output
    )
    done = _done(job, r"(worker-\d+): done: rank (\d) of 3, step (\d+), probe (\S+)")
    assert sorted(m.group(1) for m in done) == ["worker-0", "worker-2", "worker-3"], job.output
    assert len({(m.group(3), m.group(4)) for m in done}) == 1, job.output


def test_tensorflow_and_torch_in_one_process():
    torch_site = os.environ.get("KHOROVOD_TEST_TORCH_SITE")
    if not torch_site:
        pytest.skip(
            "no torch to add (KHOROVOD_TEST_TORCH_SITE: run.sh sets it to the pip-install "
            "stage's PyPI torch venv when it exists)"
        )
    job = run_job(
        worker("tf_and_torch.py"), np=2, timeout=240, env={"KHOROVOD_TEST_TORCH_SITE": torch_site}
    )
    assert job.returncode == 0, job.output
    assert sorted(job.lines(": OK")) == [f"[{r}]<stdout>:rank {r}: OK" for r in range(2)], (
        job.output
    )


@pytest.mark.parametrize(
    "np,keras", [(2, 3), (3, 3), (2, 2)], ids=["np2-keras3", "np3-keras3", "np2-keras2"]
)
def test_sync_batch_normalization(np, keras):
    skip_without_tf_keras(keras)
    job = run_job(
        worker("tf_sync_batch_norm.py"),
        np=np,
        timeout=240,
        env={"TF_USE_LEGACY_KERAS": "1" if keras == 2 else "0"},
    )
    assert job.returncode == 0, job.output
    assert sorted(job.lines(": OK")) == sorted(f"[{r}]<stdout>:rank {r}: OK" for r in range(np)), (
        job.output
    )
