"""A real khorovod-operator for the Prometheus end-to-end test.

The operator runs against the kube-apiserver of the ctest fixture "k8s"
(tests/operator/cluster/cluster.sh), watches a namespace of its own (so it
never touches the jobs of tests running beside it) and holds the leader lease
there. It reconciles one HorovodJob that the test drives, as a kubelet would
by writing pod status, from Created through Running into Restarting: a
replaced worker stays Pending (no kubelet runs), so the job remains
Restarting and the operator keeps reconciling it (live jobs are re-queued
every few seconds). Every operator series the dashboard and the rules read
then has live values: reconciles and their duration, jobs by phase, queue
depth, leadership, API requests and their latency.

Every wait is bounded by the caller's deadline; a pod status update that the
operator's own writes raced with is sent again rather than waited for.
"""

import json
import os
import signal
import subprocess
import time

JOB_NAME = "prom-e2e"
REPLICAS = 2


def read_cluster_env(cluster_dir):
    env = {}
    with open(os.path.join(cluster_dir, "env")) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            if key:
                env[key] = value
    if "KUBECONFIG" not in env or "K8S_BIN" not in env:
        raise AssertionError(f"no test cluster in {cluster_dir} (is the ctest fixture k8s up?)")
    return env


class LiveOperator:
    def __init__(self, operator_binary, cluster_dir, work_dir, metrics_port):
        env = read_cluster_env(cluster_dir)
        self.kubeconfig = env["KUBECONFIG"]
        self.kubectl_binary = os.path.join(env["K8S_BIN"], "kubectl")
        self.operator_binary = operator_binary
        self.work = work_dir
        self.port = metrics_port
        self.namespace = f"prom-e2e-{os.getpid() % 100000}"
        self.process = None
        self.namespace_created = False

    @property
    def log_path(self):
        return os.path.join(self.work, "operator.log")

    def kubectl(self, *args, stdin=None):
        r = subprocess.run(
            [self.kubectl_binary, "--kubeconfig", self.kubeconfig, "--request-timeout=30s", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return r.returncode, (r.stdout + r.stderr).strip()

    def must_kubectl(self, *args, stdin=None):
        rc, out = self.kubectl(*args, stdin=stdin)
        if rc != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: exit {rc}: {out}")
        return out

    def poll(self, what, fn, deadline, interval=0.25):
        """fn() -> (ok, detail); polls until ok or the deadline."""
        detail = None
        while time.monotonic() < deadline:
            self.check_alive()
            ok, detail = fn()
            if ok:
                return
            time.sleep(interval)  # polling interval of a bounded wait
        raise AssertionError(f"operator side: timed out waiting for {what}; last: {detail}")

    def check_alive(self):
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"khorovod-operator exited early with {self.process.returncode}; "
                f"log: {self.log_path}"
            )

    def start(self, deadline):
        """Namespace, HorovodJob, then the operator on 127.0.0.1:port."""
        self.must_kubectl("create", "namespace", self.namespace)
        self.namespace_created = True
        # Pods are refused until the controller-manager made the default service account.
        self.poll(
            "the namespace's default service account",
            lambda: (
                self.kubectl("get", "serviceaccount", "default", "-n", self.namespace)[0] == 0,
                "absent",
            ),
            deadline,
        )
        job = {
            "apiVersion": "khorovod.dev/v1alpha1",
            "kind": "HorovodJob",
            "metadata": {"name": JOB_NAME, "namespace": self.namespace},
            "spec": {
                "replicas": REPLICAS,
                "minReplicas": 1,
                "maxReplicas": REPLICAS,
                "worker": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "trainer",
                                    "image": "ghcr.io/khorovod/khorovod-runtime:0.1.0",
                                    "command": ["khorovod-example-trainer"],
                                }
                            ]
                        }
                    }
                },
            },
        }
        self.must_kubectl("apply", "-f", "-", stdin=json.dumps(job))
        log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [
                self.operator_binary,
                "--kubeconfig",
                self.kubeconfig,
                "--namespace",
                self.namespace,
                "--lease-namespace",
                self.namespace,
                "--metrics-bind",
                f"127.0.0.1:{self.port}",
                "--retry-period-seconds",
                "1",
                "--renew-deadline-seconds",
                "3",
                "--lease-duration-seconds",
                "4",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def worker_pods(self):
        rc, out = self.kubectl(
            "get",
            "pods",
            "-n",
            self.namespace,
            "-l",
            f"khorovod.dev/job-name={JOB_NAME},khorovod.dev/role=worker",
            "-o",
            "json",
        )
        return json.loads(out)["items"] if rc == 0 else []

    def job_phase(self):
        rc, out = self.kubectl(
            "get", "hvdjob", JOB_NAME, "-n", self.namespace, "-o", "jsonpath={.status.phase}"
        )
        return out if rc == 0 else f"(kubectl: {out})"

    def set_pod_status(self, pod, phase, ready, exit_code=None):
        """Writes a pod's status as a kubelet would; False on a write conflict."""
        if exit_code is None:
            state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
        else:
            state = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Error" if exit_code else "Completed",
                }
            }
        pod["status"] = {
            "phase": phase,
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": ready,
                    "restartCount": 0,
                    "state": state,
                }
                for c in pod["spec"]["containers"]
            ],
        }
        return (
            self.kubectl("replace", "--subresource", "status", "-f", "-", stdin=json.dumps(pod))[0]
            == 0
        )

    def drive_to_restarting(self, deadline):
        """Created -> Running (every worker ready) -> Restarting (one failed)."""
        self.poll(
            f"{REPLICAS} worker pods",
            lambda: (len(self.worker_pods()) == REPLICAS, len(self.worker_pods())),
            deadline,
        )

        def running():
            for pod in self.worker_pods():
                if pod.get("status", {}).get("phase") != "Running":
                    self.set_pod_status(pod, "Running", True)
            phase = self.job_phase()
            return phase == "Running", phase

        self.poll("job phase Running", running, deadline, interval=0.5)

        failed_uid = None

        def restarting():
            nonlocal failed_uid
            pods = {p["metadata"]["name"]: p for p in self.worker_pods()}
            victim = pods.get(f"{JOB_NAME}-worker-1")
            if (
                failed_uid is None
                and victim
                and self.set_pod_status(victim, "Failed", False, exit_code=137)
            ):
                failed_uid = victim["metadata"]["uid"]
            elif (
                victim
                and victim["metadata"]["uid"] == failed_uid
                and victim["status"].get("phase") != "Failed"
            ):
                self.set_pod_status(
                    victim, "Failed", False, exit_code=137
                )  # a lost update, sent again
            phase = self.job_phase()
            return phase == "Restarting", phase

        self.poll("job phase Restarting", restarting, deadline, interval=0.5)

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        if self.namespace_created:
            self.kubectl("delete", "namespace", self.namespace, "--wait=false")
