// khorovod-test-node-agent: test infrastructure that plays the kubelet for
// one Node on this machine (see node_agent.h). Not for production.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "kube/cluster_config.h"
#include "node_agent.h"

int main(int argc, char** argv) {
  khorovod::e2e::NodeAgentOptions options;
  std::string kubeconfig;
  std::vector<std::string> image_commands;
  int grace = 5;
  CLI::App app{"khorovod-test-node-agent: runs the pods bound to one Node as local processes (tests only)"};
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig of the test cluster")->required();
  app.add_option("--node-name", options.node_name, "Node to register")->capture_default_str();
  app.add_option("--bin-dir", options.bin_dir, "folder put first on the pods' PATH")->required();
  app.add_option("--log-dir", options.log_dir, "folder for pod logs and service-account files")->required();
  app.add_option("--first-ip", options.first_ip, "first 127.0.0.x address handed out")->check(CLI::Range(2, 250));
  app.add_option("--image-command", image_commands, "IMAGE_PREFIX=BINARY for pods whose container has no command");
  app.add_option("--grace-seconds", grace, "SIGTERM-to-SIGKILL grace")->check(CLI::Range(0, 60));
  CLI11_PARSE(app, argc, argv);
  options.grace = std::chrono::seconds(grace);
  for (const auto& ic : image_commands) {
    auto eq = ic.find('=');
    if (eq == std::string::npos) {
      std::cerr << "--image-command wants IMAGE_PREFIX=BINARY, not " << ic << "\n";
      return 2;
    }
    options.image_commands[ic.substr(0, eq)] = ic.substr(eq + 1);
  }
  auto config = khorovod::kube::LoadKubeconfig(kubeconfig);
  if (!config.ok()) {
    std::cerr << config.status().ToString() << "\n";
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  khorovod::kube::RestClient client(config.value());
  khorovod::e2e::NodeAgent agent(client, options);
  if (auto s = agent.Start(); !s.ok()) {
    std::cerr << "node-agent: " << s.ToString() << "\n";
    return 1;
  }
  std::cerr << "node-agent: node " << options.node_name << " ready\n";
  int sig = 0;
  sigwait(&stop, &sig);
  agent.Stop();
  return 0;
}
