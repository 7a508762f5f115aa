// Helpers for operator tests against the real API server that
// tests/operator/cluster/cluster.sh starts (ctest fixture "k8s").
//
// TestCluster reads KHOROVOD_TEST_CLUSTER_DIR (admin kubeconfig, env file with
// the binaries' folder). OperatorProcess runs the real khorovod-operator
// binary in its own process group, logging to a file the test prints on
// failure. Every wait is bounded by a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kube/rest_client.h"

namespace khorovod::optest {

using kube::Json;

class TestCluster {
 public:
  // Fails the test (ADD_FAILURE) and returns nullptr when no cluster is up.
  static std::unique_ptr<TestCluster> FromEnvironment();

  kube::RestClient& admin() { return *admin_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& dir() const { return dir_; }
  std::string Binary(const std::string& name) const { return bin_ + "/" + name; }

  // Runs kubectl with the admin kubeconfig; returns its exit code and output.
  int Kubectl(const std::vector<std::string>& args, std::string* output = nullptr) const;
  // Creates a fresh namespace named after the test.
  std::string CreateNamespace(const std::string& base);
  // Kubelet stand-in: sets a pod's status through the status subresource.
  bool SetPodStatus(const std::string& ns, const std::string& name, const std::string& phase,
                    bool ready, int exit_code = -1);

 private:
  std::string dir_, kubeconfig_, bin_;
  std::unique_ptr<kube::RestClient> admin_;
};

class OperatorProcess {
 public:
  OperatorProcess(const TestCluster& cluster, std::vector<std::string> extra_args,
                  const std::string& log_name);
  ~OperatorProcess();
  void Kill(int signal);
  bool Running();
  int metrics_port() const { return metrics_port_; }
  std::string Log() const;
  // GETs /metrics and returns the value of the first sample line starting
  // with `series`, or -1 if absent or the endpoint is unreachable.
  double Metric(const std::string& series) const;

 private:
  pid_t pid_ = -1;
  int metrics_port_ = 0;
  std::string log_path_;
};

// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);
int FreePort();

}  // namespace khorovod::optest
