#!/usr/bin/env python3
"""Service discovery for the real node's Prometheus (scripts/real-node.sh).

Debian's prometheus is built without kubernetes_sd, so this process reads the
API (through kubectl, inside the node's network namespace) every PERIOD
seconds and writes file_sd target files that select what the chart's
monitors select:
  jobs.json      = the PodMonitor: Running pods in any namespace with the label
                   khorovod.dev/job-name, every container port named "metrics";
                   labels khorovod_job, namespace, pod;
  operator.json  = the ServiceMonitor: ready endpoints of Services labelled
                   app.kubernetes.io/name=khorovod, port named "metrics".
Files are replaced atomically. Runs until killed, or until OUT_DIR is removed
(the node went down). Single-threaded.
Usage: prom_discovery.py KUBECTL_CMD_JSON OUT_DIR PERIOD
"""

import json
import os
import subprocess
import sys
import time


def kubectl(cmd, *args):
    out = subprocess.run(cmd + list(args), capture_output=True, timeout=30, check=True)
    return json.loads(out.stdout)


def pod_targets(cmd):
    pods = kubectl(cmd, "get", "pods", "-A", "-l", "khorovod.dev/job-name", "-o", "json")["items"]
    groups = []
    for p in pods:
        ip = p.get("status", {}).get("podIP")
        if p.get("status", {}).get("phase") != "Running" or not ip:
            continue
        meta = p["metadata"]
        for c in p["spec"]["containers"]:
            for port in c.get("ports", []):
                if port.get("name") == "metrics":
                    groups.append(
                        {
                            "targets": [f"{ip}:{port['containerPort']}"],
                            "labels": {
                                "khorovod_job": meta["labels"]["khorovod.dev/job-name"],
                                "namespace": meta["namespace"],
                                "pod": meta["name"],
                            },
                        }
                    )
    return groups


def operator_targets(cmd):
    services = kubectl(
        cmd, "get", "services", "-A", "-l", "app.kubernetes.io/name=khorovod", "-o", "json"
    )["items"]
    wanted = {(x["metadata"]["namespace"], x["metadata"]["name"]) for x in services}
    slices = kubectl(cmd, "get", "endpointslices", "-A", "-o", "json")["items"] if wanted else []
    groups = []
    for s in slices:
        ns = s["metadata"]["namespace"]
        if (ns, s["metadata"].get("labels", {}).get("kubernetes.io/service-name")) not in wanted:
            continue
        ports = [p["port"] for p in s.get("ports") or [] if p.get("name") == "metrics"]
        for e in s.get("endpoints") or []:
            if e.get("conditions", {}).get("ready") is False:
                continue
            for a in e.get("addresses", []):
                groups.extend(
                    {"targets": [f"{a}:{port}"], "labels": {"namespace": ns}} for port in ports
                )
    return groups


def write(path, groups):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(groups, f)
    os.replace(tmp, path)


def main():
    cmd, out, period = json.loads(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    while os.path.isdir(out):
        try:
            write(os.path.join(out, "jobs.json"), pod_targets(cmd))
            write(os.path.join(out, "operator.json"), operator_targets(cmd))
        except (subprocess.SubprocessError, ValueError, KeyError, OSError) as e:
            print(f"prom_discovery: {e}", file=sys.stderr, flush=True)
        time.sleep(period)


if __name__ == "__main__":
    main()
