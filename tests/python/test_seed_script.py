"""A Horovod PyTorch script runs on khorovod with only its import line changed."""

import difflib
import re

from conftest import run_job, worker


def test_five_step_script_with_only_the_import_changed(tmp_path):
    with open(worker("seed_five_steps.py")) as f:
        original = f.read()
    converted = re.sub(r"^import horovod\.torch as hvd$", "import khorovod.torch as hvd",
                       original, flags=re.M)
    changed = [l for l in difflib.unified_diff(original.splitlines(), converted.splitlines(),
                                               lineterm="", n=0)
               if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert changed == ["-import horovod.torch as hvd", "+import khorovod.torch as hvd"], changed
    script = tmp_path / "train.py"
    script.write_text(converted)
    job = run_job(str(script), np=2)
    assert job.returncode == 0, job.output
    losses = [float(m.group(1)) for m in re.finditer(r"Epoch \d: loss=(\S+)", job.output)]
    assert len(losses) == 5, job.output
    assert all(l == l and l < 10 for l in losses), losses  # finite, sane
