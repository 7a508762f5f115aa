"""The elastic sampler across a re-formation (workers/elastic_sampler.py): a
3-rank elastic job whose discovery script drops to 2 slots mid-epoch; every
sample of the epoch is trained exactly once. And hvd.elastic.run recovering
from a stall shutdown (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)."""

import os
import re
import stat

from conftest import run_job, worker


def discovery_script(tmp_path, marker):
    script = tmp_path / "hosts.sh"
    script.write_text(
        f"#!/bin/sh\nif [ -e '{marker}' ]; then echo localhost:2; else echo localhost:3; fi\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_every_sample_once_across_a_reformation(tmp_path):
    marker = str(tmp_path / "shrink")
    job = run_job(
        worker("elastic_sampler.py"),
        marker,
        np=3,
        timeout=240,
        launcher_args=(
            "--min-np",
            "2",
            "--max-np",
            "3",
            "--host-discovery-script",
            discovery_script(tmp_path, marker),
            "--discovery-interval-ms",
            "200",
            "--elastic-timeout",
            "60",
        ),
    )
    out = job.output
    assert job.returncode == 0, out
    assert job.lines("worker-2: frozen after committing batch 4"), out
    assert os.path.exists(marker), out
    # The survivors restarted from the 48 samples committed before the freeze.
    assert len([l for l in job.lines("training as rank") if "of 2 from sample 48" in l]) == 2, out
    done = [
        re.search(
            r"epoch done: rank \d of 2, batches (\d+), sizes \[2, 3\], "
            r"min (\d+), max (\d+), total (\d+)",
            l,
        )
        for l in job.lines("epoch done")
    ]
    assert len(done) == 2 and all(done), out
    for m in done:
        # 4 batches of 12 at size 3, then 192 samples in batches of 8 at size 2.
        assert m.group(1) == "28", out
        assert (m.group(2), m.group(3), m.group(4)) == ("1", "1", "240"), out


def test_elastic_run_recovers_from_a_stall_shutdown():
    job = run_job(
        worker("stall_elastic.py"),
        np=2,
        timeout=180,
        launcher_args=("--min-np", "2", "--max-np", "2", "--elastic-timeout", "60"),
        env={"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3", "HOROVOD_STALL_CHECK_TIME_SECONDS": "1"},
    )
    out = job.output
    assert job.returncode == 0, out
    assert len(job.lines("caught by elastic.run: reset 1 after HorovodInternalError")) == 2, out
    done = job.lines("finished step 6 with value")
    assert len(done) == 2 and all(l.endswith("value 12.0") for l in done), out
