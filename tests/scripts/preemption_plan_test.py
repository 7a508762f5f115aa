#!/usr/bin/env python3
"""Tests tests/multinode/preemption_plan.py, the multinode preemption
scenario's choice of node, victim and CPU request, on pod and node lists in
the API's JSON shape: a node qualifies only with exactly one worker of the
job, no pod being deleted, not cordoned, and the other pods a preemptor
could take asking for less than the worker; nodes away from khvc-n1 and the
rendezvous come first; the CPU is the free CPU plus the worker's request
less 10m. Ends with "preemption_plan: N passed, M failed"."""

import json
import os
import subprocess
import sys
import tempfile

PLAN = os.path.join(os.path.dirname(__file__), "..", "multinode", "preemption_plan.py")
JOB_LABELS = {"khorovod.dev/job-name": "j"}


def pod(name, node, cpu, role=None, ns="ns", priority=0, phase="Running", deleting=False):
    labels = dict(JOB_LABELS, **{"khorovod.dev/role": role}) if role else {}
    meta = {"name": name, "namespace": ns, "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    resources = {"requests": {"cpu": cpu}}
    spec = {"nodeName": node, "priority": priority, "containers": [{"resources": resources}]}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def node(name, cpu="2", cordoned=False):
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": cordoned},
        "status": {"allocatable": {"cpu": cpu}},
    }


def plan(pods, nodes):
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, items in (("pods.json", pods), ("nodes.json", nodes)):
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "w") as f:
                json.dump({"items": items}, f)
        run = subprocess.run(
            [sys.executable, PLAN, *paths, "j", "ns", "1000000"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    return run.stdout.strip() if run.returncode == 0 else f"rc {run.returncode}"


NODES = [node("khvc-n1"), node("khvc-n2"), node("khvc-n3")]
ADDONS = [
    pod("operator", "khvc-n1", "100m", ns="khorovod-system"),
    pod("dns", "khvc-n1", "100m", priority=2000000000),
]


def cases():
    w = lambda name, at, **kw: pod(name, at, "300m", role="worker", **kw)  # noqa: E731
    rdv = pod("rdv", "khvc-n2", "100m", role="rendezvous")
    spread = [w("w0", "khvc-n1"), w("w1", "khvc-n2"), rdv, w("w2", "khvc-n3")]
    yield (
        "the node away from khvc-n1 and the rendezvous first",
        plan(ADDONS + spread, NODES),
        "khvc-n3 w2 1990m",
    )
    two_on_n3 = [w("w0", "khvc-n1"), rdv, w("w1", "khvc-n3"), w("w2", "khvc-n3")]
    yield "a node with two workers is skipped", plan(ADDONS + two_on_n3, NODES), "khvc-n1 w0 1790m"
    deleting = spread[:3] + [w("w2", "khvc-n3", deleting=True), w("w3", "khvc-n3")]
    yield (
        "a node with a pod being deleted is skipped",
        plan(ADDONS + deleting, NODES),
        "khvc-n1 w0 1790m",
    )
    big = [pod("batch", "khvc-n3", "300m", ns="other")]
    yield (
        "a node whose other pods could make room is skipped",
        plan(ADDONS + spread + big, NODES),
        "khvc-n1 w0 1790m",
    )
    gone = [pod("old", "khvc-n3", "500m", ns="other", phase="Failed")]
    yield "finished pods use no CPU", plan(ADDONS + spread + gone, NODES), "khvc-n3 w2 1990m"
    cordoned = [node("khvc-n1"), node("khvc-n2"), node("khvc-n3", cordoned=True)]
    yield "a cordoned node is skipped", plan(ADDONS + spread, cordoned), "khvc-n1 w0 1790m"
    yield "no node qualifies: exit 1", plan(ADDONS + two_on_n3[1:], NODES), "rc 1"


def main():
    ok = bad = 0
    for what, got, want in cases():
        if got == want:
            ok += 1
        else:
            bad += 1
            print(f"FAIL: {what}: got '{got}', want '{want}'")
    print(f"preemption_plan: {ok} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
