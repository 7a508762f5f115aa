#!/usr/bin/env python3
"""End to end: a real Prometheus scrapes a local elastic khorovod job and a
real operator.

khorovodrun runs 2 example-trainer workers (min 1, max 2) with
KHOROVOD_METRICS_PORT=B: the rendezvous server serves metrics on B and worker
slot i on B+1+i. Once Prometheus has scraped the whole job, the test kills
the worker of slot 1 (SIGKILL) and khorovodrun replaces it: the reset, the
recovery and the re-formation all happen after a first scrape, so the
elastic panels' rates see them (a crash before the first scrape would leave
those series flat and their ratios NaN).
khorovod-operator runs against the API server of the ctest fixture "k8s" and
reconciles a HorovodJob driven into phase Restarting (live_operator.py). A
`prometheus` process on 127.0.0.1 scrapes the four endpoints every second and
evaluates deploy/monitoring/khorovod-rules.yaml.

Asserted:
  * every endpoint's /metrics passes `promtool check metrics`;
  * every scrape target is up;
  * every query of the Grafana dashboard, the operator's included, returns
    data through the Prometheus HTTP API: at least one sample that is a
    number (not NaN, which a panel shows as no data);
  * the job recorded at least one reset and a world size of 2; the operator
    leads, counts the HorovodJob and reconciled it successfully;
  * every recording and alert rule evaluates without error; the operator
    alerts see the live series: KhorovodOperatorNoLeader is inactive and
    KhorovodOperatorJobsStuckRestarting pending (its `for` has not elapsed).

Every wait polls with a deadline; nothing sleeps to synchronize. Everything
binds 127.0.0.1. Usage:
  prometheus_e2e_test.py KHOROVODRUN TRAINER PROMETHEUS PROMTOOL MONITORING_DIR
                         OPERATOR CLUSTER_DIR
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from live_operator import LiveOperator

DEADLINE_S = 150  # for everything after the processes start
JOB = "e2e"
# Grafana's $__rate_interval on a dashboard spanning hours with 1 s scrapes;
# it also spans two of the operator's periodic re-queues of a live job.
RATE_INTERVAL = "30s"


def free_port_block(n):
    """A base port B with B..B+n-1 free on 127.0.0.1 (bounded attempts)."""
    for _ in range(200):
        base = random.randint(20000, 60000 - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports found")


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(prom, expr):
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(http_get(url))
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {expr}: {body}")
    return body["data"]["result"]


def scalar(prom, expr):
    """The value of a single-series query; None when it returns nothing."""
    result = query(prom, expr)
    return float(result[0]["value"][1]) if result else None


def dashboard_queries(path):
    dash = json.load(open(path))
    out = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            out.append((panel["title"], t["expr"]))
    return out


def substitute(expr):
    # Grafana variables: the job selector matches our job.
    return expr.replace("$khorovod_job", JOB).replace("$__rate_interval", RATE_INTERVAL)


def has_number(result):
    return any(sample["value"][1] != "NaN" for sample in result)


def child_with_env(parent_pid, assignment):
    """The pid of parent_pid's child whose environment holds `assignment`."""
    want = assignment.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != parent_pid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    return int(entry)
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile
    return None


def promtool_check(promtool, text):
    r = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    return r.returncode, (r.stdout + r.stderr).strip()


def wait_until(what, fn, deadline):
    """Polls fn() -> (ok, detail) until ok; tries at least once, so a wait
    that starts past the deadline still reports what it saw."""
    while True:
        try:
            ok, last = fn()
            if ok:
                return last
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            last = str(e)
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {last}")
        time.sleep(0.25)  # polling interval of a bounded wait, not synchronization


def rules_by_name(prom):
    body = json.loads(http_get(prom + "/api/v1/rules"))
    return {r["name"]: r for g in body["data"]["groups"] for r in g["rules"]}


def main():
    khorovodrun, trainer, prometheus, promtool, monitoring, operator_binary, cluster_dir = sys.argv[
        1:8
    ]
    rules = os.path.abspath(os.path.join(monitoring, "khorovod-rules.yaml"))
    dashboard = os.path.join(monitoring, "khorovod-dashboard.json")
    work = tempfile.mkdtemp(prefix="khorovod-prom-e2e-")
    procs = []
    operator = None
    failures = []
    try:
        base = free_port_block(3)
        prom_port = free_port_block(1)
        operator_port = free_port_block(1)
        deadline = time.monotonic() + DEADLINE_S

        operator = LiveOperator(operator_binary, cluster_dir, work, operator_port)
        operator.start(deadline)
        procs.append(operator.process)

        env = dict(os.environ)
        env.update(
            {
                "KHOROVOD_METRICS_PORT": str(base),
                "KHOROVOD_METRICS_HOST": "127.0.0.1",
                "KHOROVOD_BASELINE_SAMPLES_PER_SECOND": "2000",
            }
        )
        job_log = open(os.path.join(work, "job.log"), "w")
        job = subprocess.Popen(
            [
                khorovodrun,
                "-np",
                "2",
                "--min-np",
                "1",
                "--max-np",
                "2",
                trainer,
                "--steps",
                "100000000",
                "--log-every",
                "1000",
            ],
            env=env,
            stdout=job_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(job)

        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "900ms",
                "evaluation_interval": "1s",
            },
            "rule_files": [rules],
            "scrape_configs": [
                {
                    "job_name": "khorovod-workers",
                    "static_configs": [
                        {
                            "targets": [f"127.0.0.1:{base + 1}", f"127.0.0.1:{base + 2}"],
                            "labels": {"khorovod_job": JOB},
                        }
                    ],
                },
                {
                    "job_name": "khorovod-rendezvous",
                    "static_configs": [
                        {"targets": [f"127.0.0.1:{base}"], "labels": {"khorovod_job": JOB}}
                    ],
                },
                {
                    "job_name": "khorovod-operator",
                    "static_configs": [{"targets": [f"127.0.0.1:{operator_port}"]}],
                },
            ],
        }
        config_path = os.path.join(work, "prometheus.yml")
        with open(config_path, "w") as f:
            json.dump(config, f)  # JSON is YAML
        prom_log = open(os.path.join(work, "prometheus.log"), "w")
        prom = subprocess.Popen(
            [
                prometheus,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={work}/tsdb",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--log.level=warn",
            ],
            stdout=prom_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(prom)
        url = f"http://127.0.0.1:{prom_port}"

        def alive():
            for p in procs:
                if p.poll() is not None:
                    raise AssertionError(
                        f"{p.args[0]} exited early with {p.returncode}; logs in {work}"
                    )

        def ready():
            alive()
            return "Ready" in http_get(url + "/-/ready"), "not ready"

        wait_until("prometheus ready", ready, deadline)

        # The operator's HorovodJob reaches Restarting while the local job runs.
        operator.drive_to_restarting(deadline)

        # Prometheus has scraped both workers in a world of 2 (their
        # recovery histograms still empty) and the rendezvous server.
        def job_scraped():
            alive()
            workers = scalar(url, f'count(khorovod_worker_world_size{{khorovod_job="{JOB}"}} == 2)')
            histograms = scalar(
                url,
                f'count(khorovod_worker_recovery_duration_seconds_count{{khorovod_job="{JOB}"}})',
            )
            rendezvous = scalar(url, f'max(khorovod_rendezvous_generation{{khorovod_job="{JOB}"}})')
            return (
                workers == 2 and histograms == 2 and (rendezvous or 0) >= 1,
                f"workers in world 2={workers} recovery histograms={histograms} generation={rendezvous}",
            )

        wait_until("a first scrape of the whole job", job_scraped, deadline)

        victim = None

        def find_victim():
            nonlocal victim
            alive()
            victim = child_with_env(job.pid, f"KHOROVOD_METRICS_PORT={base + 2}")
            return victim is not None, "no worker process holds slot 1"

        wait_until("the worker of slot 1", find_victim, deadline)
        os.kill(victim, signal.SIGKILL)

        # The survivor reset, the replacement joined, and rules evaluated.
        def job_recovered():
            alive()
            r = scalar(url, f'sum(khorovod_worker_resets_total{{khorovod_job="{JOB}"}})') or 0
            j = scalar(url, f'max(khorovod_rendezvous_joins_total{{khorovod_job="{JOB}"}})') or 0
            w = scalar(url, f'khorovod_job:world_size:max{{khorovod_job="{JOB}"}}') or 0
            return r >= 1 and j >= 3 and w == 2, f"resets={r} joins={j} world={w}"

        print(
            "job:",
            wait_until("a reset, the replacement's join and world size 2", job_recovered, deadline),
        )

        # Every endpoint's exposition passes promtool.
        for port in (base, base + 1, base + 2, operator_port):
            text = http_get(f"http://127.0.0.1:{port}/metrics")
            rc, out = promtool_check(promtool, text)
            if rc != 0 or out:
                failures.append(f"promtool check metrics on :{port}: exit {rc}: {out}")

        def targets_up():
            alive()
            body = json.loads(http_get(url + "/api/v1/targets"))
            active = body["data"]["activeTargets"]
            down = [t["scrapeUrl"] + " " + t["health"] for t in active if t["health"] != "up"]
            return len(active) == 4 and not down, down

        wait_until("all targets up", targets_up, deadline)

        # The operator's series describe the live cluster, not just exist.
        def operator_live():
            alive()
            leader = scalar(url, "max(khorovod_operator_is_leader)")
            restarting = scalar(url, 'sum(khorovod_operator_jobs{phase="Restarting"})')
            reconciled = scalar(
                url, 'sum(khorovod_operator_reconcile_total{result=~"success|requeue"})'
            )
            answered = scalar(url, 'sum(khorovod_operator_api_requests_total{code=~"2.."})')
            ok = leader == 1 and restarting == 1 and (reconciled or 0) > 0 and (answered or 0) > 0
            return (
                ok,
                f"leader={leader} restarting_jobs={restarting} reconciles={reconciled} api_2xx={answered}",
            )

        try:
            print("operator:", wait_until("the operator's live series", operator_live, deadline))
        except AssertionError as e:
            failures.append(str(e))

        # Every dashboard query returns data. A query counts once it has
        # returned a number, so a slow poll under load cannot miss it.
        queries = dashboard_queries(dashboard)
        pending = {f"[{t}] {substitute(e)}": substitute(e) for t, e in queries}
        operator_queries = [e for _, e in queries if "khorovod_operator_" in e]
        if not operator_queries or len(operator_queries) == len(queries):
            failures.append("the dashboard should have both runtime and operator queries")

        def all_have_data():
            alive()
            for label, expr in list(pending.items()):
                if has_number(query(url, expr)):
                    del pending[label]
            return not pending, sorted(pending)

        try:
            wait_until("data for every dashboard query", all_have_data, deadline)
            print(
                f"dashboard: all {len(queries)} queries return data "
                f"({len(operator_queries)} of them the operator's)"
            )
        except AssertionError as e:
            failures.append(str(e))

        # The rules evaluate on the live series: none errs, and the operator
        # alerts read the operator's state (leader present; one job
        # Restarting, for less than the alert's 10 minutes).
        expected_alerts = {
            "KhorovodOperatorNoLeader": "inactive",
            "KhorovodOperatorJobsStuckRestarting": "pending",
        }

        def rules_agree():
            alive()
            by_name = rules_by_name(url)
            bad = [
                f"{n}: {r['health']} {r.get('lastError', '')}".strip()
                for n, r in by_name.items()
                if r["health"] != "ok"
            ]
            bad += [
                f"{n}: {by_name.get(n, {}).get('state')} (want {want})"
                for n, want in expected_alerts.items()
                if by_name.get(n, {}).get("state") != want
            ]
            return not bad, bad

        try:
            wait_until(
                "every rule healthy and the operator alerts in their expected state",
                rules_agree,
                deadline,
            )
            print(f"rules: {len(rules_by_name(url))} evaluate without error")
        except AssertionError as e:
            failures.append(str(e))
    except AssertionError as e:
        failures.append(str(e))
    finally:
        if operator is not None:
            operator.stop()
        for p in reversed(procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        for name in ("job.log", "prometheus.log", "operator.log"):
            path = os.path.join(work, name)
            if os.path.exists(path):
                print(f"--- {name} (tail)")
                print("".join(open(path).readlines()[-30:]))
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
