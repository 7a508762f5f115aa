#!/usr/bin/env python3
"""The preemption scenario's plan (tests/multinode/scenarios.sh, evict_by).

Contract: reads `kubectl get pods -A -o json` and `kubectl get nodes -o json`
(two file paths), and prints "NODE POD CPU" for one node where a pod of
priority PRIORITY asking for CPU (millicores) can only be scheduled by
preempting exactly POD, the one worker of JOB in NS on that node; or prints
nothing and exits 1 when no node allows that.

Why that is deterministic: the scheduler's preemption on a node removes every
pod of lower priority, then puts them back, most important first, while the
preemptor still fits; what it cannot put back are the victims. CPU is chosen
as the node's free CPU plus (the worker's request - SLACK): more than is free,
so the preemptor must preempt; no more than is free without the worker, so
the worker alone is enough. A node qualifies only when every other pod there
that the preemptor could preempt requests, all together, less than that
margin: then no set of them makes room without the worker, and the worker
is the only victim, whatever order the scheduler reprieves them in. Nodes
with a pod being deleted are skipped (its CPU would be freed on its own,
and the preemptor would fit without preempting). Nodes away from khvc-n1 (the
add-ons) and from the job's rendezvous come first.

Usage: preemption_plan.py PODS_JSON NODES_JSON JOB NS PRIORITY
"""

import json
import sys

SLACK_MILLI = 10


def milli_cpu(quantity):
    if not quantity:
        return 0
    if quantity.endswith("m"):
        return int(quantity[:-1])
    return int(float(quantity) * 1000)


def cpu_request(pod):
    containers = pod["spec"].get("containers", [])
    return sum(milli_cpu(c.get("resources", {}).get("requests", {}).get("cpu")) for c in containers)


def is_job_pod(pod, job, ns, role):
    labels = pod["metadata"].get("labels", {})
    return (
        pod["metadata"]["namespace"] == ns
        and labels.get("khorovod.dev/job-name") == job
        and labels.get("khorovod.dev/role") == role
    )


def plan_for_node(node, pods, job, ns, priority):
    """(POD, CPU) when NODE qualifies (see the module's contract), else None."""
    live = [p for p in pods if p["status"].get("phase") not in ("Succeeded", "Failed")]
    if any(p["metadata"].get("deletionTimestamp") for p in live):
        return None
    workers = [p for p in live if is_job_pod(p, job, ns, "worker")]
    if len(workers) != 1:
        return None
    worker = workers[0]
    margin = cpu_request(worker) - SLACK_MILLI
    others = [p for p in live if p is not worker and p["spec"].get("priority", 0) < priority]
    if margin <= 0 or sum(cpu_request(p) for p in others) >= margin:
        return None
    free = milli_cpu(node["status"]["allocatable"]["cpu"]) - sum(cpu_request(p) for p in live)
    return worker["metadata"]["name"], free + margin


def main(argv):
    if len(argv) != 6:
        sys.exit(__doc__)
    with open(argv[1]) as f:
        pods = json.load(f)["items"]
    with open(argv[2]) as f:
        nodes = json.load(f)["items"]
    job, ns, priority = argv[3], argv[4], int(argv[5])
    rdv_nodes = {p["spec"].get("nodeName") for p in pods if is_job_pod(p, job, ns, "rendezvous")}

    def preference(node):
        name = node["metadata"]["name"]
        return (name == "khvc-n1" or name in rdv_nodes, name)

    for node in sorted(nodes, key=preference):
        name = node["metadata"]["name"]
        if node["spec"].get("unschedulable"):
            continue
        on_node = [p for p in pods if p["spec"].get("nodeName") == name]
        plan = plan_for_node(node, on_node, job, ns, priority)
        if plan:
            print(name, plan[0], f"{plan[1]}m")
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
