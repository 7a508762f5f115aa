"""The MNIST-like example (examples/python/mnist_synthetic.py) converges at 2 ranks."""

import os
import re

from conftest import ROOT, run_job

EXAMPLE = os.path.join(ROOT, "examples", "python", "mnist_synthetic.py")


def test_mnist_like_example_converges():
    job = run_job(EXAMPLE, "--epochs", "2", "--train-size", "2048", np=2)
    assert job.returncode == 0, job.output
    epochs = [
        (float(m.group(1)), float(m.group(2)))
        for m in re.finditer(r"epoch \d: loss (\S+)  accuracy (\S+)  world 2", job.output)
    ]
    assert len(epochs) == 2, job.output
    assert epochs[1][0] < epochs[0][0], f"loss did not go down: {epochs}"
    final = float(re.search(r"final accuracy (\S+)", job.output).group(1))
    assert final > 0.9, job.output  # chance is 0.1
