// NodeAgent: TEST INFRASTRUCTURE, not a kubelet. It plays the kubelet for
// the pods the real kube-scheduler binds to its Node, so end-to-end tests
// can run HorovodJobs on one machine without a container engine:
//   - registers a Node (tainted, so only pods that tolerate the taint land
//     on it) and keeps its Ready condition fresh;
//   - runs the first container of each bound pod as a local process: its
//     command and args (or, for an image without a command, the binary
//     mapped from the image name), with the pod's env resolved as the
//     kubelet would (values, downward-API fieldRefs, secretKeyRefs) and the
//     agent's bin dir first on PATH; images are otherwise ignored;
//   - gives every pod its own loopback address (127.0.0.x) as status.podIP;
//   - stands in for cluster DNS: an env value naming a Service as
//     "<svc>.<ns>.svc[.cluster.local]" gets the address of a running pod the
//     Service selects;
//   - mounts a service-account token (TokenRequest API), ca.crt and
//     namespace into a per-pod folder named by KHOROVOD_SERVICE_ACCOUNT_DIR,
//     with KUBERNETES_SERVICE_HOST/PORT pointing at the API server;
//   - reports phase, podIP, Ready and container state/exit codes through the
//     status subresource; restarts restartPolicy Always containers in place;
//   - on deletion, SIGTERMs the process group, SIGKILLs after the grace
//     period, and then removes the pod object (grace 0), as a kubelet does.
//
// Thread-safety: one informer thread feeds a work queue drained by one
// worker thread; a reaper thread collects exited processes. All pod state is
// guarded by mu_.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/informer.h"
#include "kube/rest_client.h"
#include "kube/work_queue.h"

namespace khorovod::e2e {

struct NodeAgentOptions {
  std::string node_name = "khorovod-e2e-node";
  std::string taint_key = "khorovod.dev/e2e";   // NoSchedule taint pods must tolerate
  std::string bin_dir;                          // prepended to PATH
  std::string log_dir;                          // <ns>_<pod>.log per pod; service-account folders
  int first_ip = 10;                            // 127.0.0.<first_ip> upwards
  std::map<std::string, std::string> image_commands;  // image prefix -> binary, for pods without command
  std::chrono::seconds grace{5};
};

class NodeAgent {
 public:
  NodeAgent(kube::RestClient& client, NodeAgentOptions options);
  ~NodeAgent();
  kube::ApiStatus Start();
  void Stop();

 private:
  struct RunningPod {
    std::string ns, name, uid, ip;
    pid_t pid = -1;
    int restarts = 0;
    bool deleting = false;
    bool finished = false;
    bool restart_always = false;
    bool relaunch = false;
    std::chrono::steady_clock::time_point kill_deadline{};
  };

  void Sync(const std::string& key);
  void Launch(RunningPod& state, const kube::Json& pod);
  bool ResolveEnv(const kube::Json& pod, const RunningPod& state, std::vector<std::string>& env, std::string& error);
  std::string ResolveServiceAddress(const std::string& ns, const std::string& service);
  bool MountServiceAccount(const kube::Json& pod, const RunningPod& state, std::vector<std::string>& env);
  void ReportRunning(const RunningPod& state, const kube::Json& pod);
  void ReportExit(const RunningPod& state, int exit_code, bool will_restart);
  void ReportFailure(const std::string& ns, const std::string& name, const std::string& reason,
                     const std::string& message);
  void Reap();
  void Heartbeat();
  kube::ApiStatus RegisterNode();

  kube::RestClient& client_;
  const NodeAgentOptions options_;
  kube::Informer pods_;
  kube::WorkQueue queue_;
  std::mutex mu_;
  std::map<std::string, RunningPod> running_;  // "ns/name" -> state
  int next_ip_;
  std::map<std::string, std::string> last_wait_;  // only the worker thread touches it
  std::atomic<bool> stop_{false};
  std::thread worker_, reaper_, heartbeat_;
};

}  // namespace khorovod::e2e
