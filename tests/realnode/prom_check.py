#!/usr/bin/env python3
"""Checks against a Prometheus HTTP API, for the real node's
prometheus-operator test (tests/realnode/prometheus_operator.sh; run inside
the node's network namespace, where the Prometheus pod's address routes).

  prom_check.py targets URL POOL MIN_UP
      at least MIN_UP active targets of scrape pool POOL (prometheus-operator
      names them serviceMonitor/NS/NAME/I and podMonitor/NS/NAME/I) are up,
      and none of that pool is down; prints the pool's targets.
  prom_check.py rules URL RULES_FILE
      every group and rule of RULES_FILE (the chart's files/khorovod-rules.yaml,
      which its PrometheusRule carries) is loaded, and every rule has been
      evaluated without error (health "ok").
  prom_check.py dashboard URL DASHBOARD JOB RATE_INTERVAL SECONDS
      every query of the Grafana dashboard returns a number (not NaN, which a
      panel shows as no data) within SECONDS, with $khorovod_job = JOB and
      $__rate_interval = RATE_INTERVAL; a query counts once it has returned one;
      and every query variable (label_values(METRIC, LABEL)) offers JOB.

Exit status 0 when the check holds, 1 otherwise (the reason on stdout).
Single checks do not wait: the caller polls them with a deadline.
"""

import json
import re
import sys
import time
import urllib.parse
import urllib.request


def get(url, path, params=None):
    if params:
        path += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url + path, timeout=10) as r:
        body = json.loads(r.read().decode())
    if body.get("status") != "success":
        raise RuntimeError(f"{path}: {body}")
    return body["data"]


def targets(url, pool, min_up):
    active = [
        t
        for t in get(url, "/api/v1/targets", {"state": "active"})["activeTargets"]
        if t.get("scrapePool") == pool
    ]
    for t in active:
        print(f"  {t['health']:7} {t['scrapeUrl']} {t.get('lastError', '')}".rstrip())
    up = sum(t["health"] == "up" for t in active)
    down = [t["scrapeUrl"] for t in active if t["health"] == "down"]
    if up < min_up or down:
        print(f"{pool}: {up} up (want >= {min_up}), down: {down}")
        return 1
    print(f"{pool}: {up} targets up")
    return 0


def rule_names(path):
    """Group name -> rule names ("record" or "alert") of a rules file, read
    without a YAML library: `- name:` opens a group, `- record:`/`- alert:`
    names a rule (the layout of deploy/monitoring/khorovod-rules.yaml)."""
    groups, current = {}, None
    for line in open(path):
        m = re.match(r"^\s*- name:\s*(\S+)", line)
        if m:
            current = m.group(1)
            groups[current] = []
            continue
        m = re.match(r"^\s*- (?:record|alert):\s*(\S+)", line)
        if m and current is not None:
            groups[current].append(m.group(1))
    return groups


def rules(url, path):
    want = rule_names(path)
    loaded = {}
    for g in get(url, "/api/v1/rules")["groups"]:
        loaded.setdefault(g["name"], []).extend(g["rules"])
    problems = []
    for group, names in want.items():
        if group not in loaded:
            problems.append(f"group {group} not loaded")
            continue
        have = {r["name"]: r for r in loaded[group]}
        for n in names:
            r = have.get(n)
            if r is None:
                problems.append(f"{group}/{n} not loaded")
            elif r.get("health") != "ok":
                problems.append(
                    f"{group}/{n}: health {r.get('health')!r} {r.get('lastError', '')}".rstrip()
                )
    total = sum(len(v) for v in want.values())
    if problems or total == 0:
        print(
            f"rules: of {total} rules in {len(want)} groups, not loaded or not healthy: "
            + "; ".join(problems[:10])
        )
        return 1
    print(f"rules: all {total} rules of {len(want)} groups loaded and evaluated without error")
    return 0


def dashboard_queries(path):
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t["expr"]))
            walk(p.get("panels", []))

    walk(json.load(open(path))["panels"])
    return out


def variable_queries(path):
    """The dashboard's query variables, as (name, metric, label) of their
    label_values(METRIC, LABEL) queries."""
    out = []
    for v in json.load(open(path)).get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or v.get("definition", ""))
        m = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)\s*", q)
        out.append((v.get("name"), m.group(1), m.group(2)) if m else (v.get("name"), None, q))
    return out


def variables_offer(url, path, job):
    """Every query variable offers JOB among its values (what Grafana's
    variable drop-down asks: /api/v1/label/LABEL/values?match[]=METRIC)."""
    missing = []
    for name, metric, label in variable_queries(path):
        if metric is None:
            missing.append(f"${name}: unsupported variable query {label!r}")
            continue
        values = get(url, f"/api/v1/label/{label}/values", {"match[]": metric})
        if job not in values:
            missing.append(f"${name} = label_values({metric}, {label}) offers {values}, not {job}")
    return missing


def dashboard(url, path, job, rate_interval, seconds):
    queries = dashboard_queries(path)
    pending = {}
    for title, expr in queries:
        e = expr.replace("$khorovod_job", job).replace("${khorovod_job}", job)
        e = e.replace("$__rate_interval", rate_interval)
        pending[f"[{title}] {e}"] = e
    operator = sum("khorovod_operator_" in e for e in pending.values())
    if not queries or operator == 0 or operator == len(pending):
        print("dashboard: expected both runtime and operator queries")
        return 1
    deadline = time.monotonic() + seconds
    while True:
        for label, expr in list(pending.items()):
            try:
                result = get(url, "/api/v1/query", {"query": expr})["result"]
            except Exception as e:  # a failed poll is retried until the deadline
                print(f"  query failed: {label}: {e}")
                continue
            if any(s["value"][1] != "NaN" for s in result):
                del pending[label]
        try:
            variables_missing = variables_offer(url, path, job)
        except Exception as e:
            variables_missing = [f"variable queries failed: {e}"]
        if not pending and not variables_missing:
            print(
                f"dashboard: all {len(queries)} queries return data ({operator} of them the operator's)"
                f" and its {len(variable_queries(path))} variable(s) offer {job}"
            )
            return 0
        if time.monotonic() >= deadline:
            print(
                f"dashboard: {len(pending)} of {len(queries)} queries returned no data in {seconds}s:"
            )
            for label in sorted(pending):
                print("  " + label)
            for m in variables_missing:
                print("  " + m)
            return 1
        time.sleep(2)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    try:
        if cmd == "targets" and len(argv) == 5:
            return targets(argv[2], argv[3], int(argv[4]))
        if cmd == "rules" and len(argv) == 4:
            return rules(argv[2], argv[3])
        if cmd == "dashboard" and len(argv) == 7:
            return dashboard(argv[2], argv[3], argv[4], argv[5], float(argv[6]))
    except Exception as e:  # Prometheus not answering yet: the caller polls
        print(f"{cmd}: {e}")
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
