#include "test_cluster.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "kube/cluster_config.h"

#ifndef KHOROVOD_OPERATOR_BINARY
#error "KHOROVOD_OPERATOR_BINARY must name the operator binary"
#endif

namespace khorovod::optest {

// TLS writes to an API server that just restarted raise SIGPIPE; the test,
// like the operator, handles the failed write as an error instead of dying.
[[maybe_unused]] const bool kSigpipeIgnored = (signal(SIGPIPE, SIG_IGN), true);

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

std::unique_ptr<TestCluster> TestCluster::FromEnvironment() {
  const char* dir = std::getenv("KHOROVOD_TEST_CLUSTER_DIR");
  if (!dir) {
    ADD_FAILURE() << "KHOROVOD_TEST_CLUSTER_DIR is not set: run through ctest (fixture k8s)";
    return nullptr;
  }
  auto c = std::make_unique<TestCluster>();
  c->dir_ = dir;
  c->kubeconfig_ = c->dir_ + "/admin.kubeconfig";
  std::ifstream env(c->dir_ + "/env");
  std::string line;
  while (std::getline(env, line))
    if (line.rfind("K8S_BIN=", 0) == 0) c->bin_ = line.substr(8);
  auto config = kube::LoadKubeconfig(c->kubeconfig_);
  if (!config.ok() || c->bin_.empty()) {
    ADD_FAILURE() << "no test cluster in " << dir << ": "
                  << (config.ok() ? "env file lacks K8S_BIN" : config.status().ToString());
    return nullptr;
  }
  c->admin_ = std::make_unique<kube::RestClient>(config.value());
  return c;
}

int TestCluster::Kubectl(const std::vector<std::string>& args, std::string* output) const {
  std::string cmd =
      "'" + Binary("kubectl") + "' --kubeconfig '" + kubeconfig_ + "' --request-timeout=30s";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string TestCluster::CreateNamespace(const std::string& base) {
  std::string name = base + "-" + std::to_string(getpid() % 100000);
  for (auto& ch : name)
    ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto r =
      admin_->Post("/api/v1/namespaces",
                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  EXPECT_TRUE(r.ok() || r.status().code() == kube::ApiCode::kAlreadyExists)
      << r.status().ToString();
  // Pods need the namespace's default service account (made by the controller-manager).
  EXPECT_TRUE(WaitFor(
      [&] { return admin_->Get("/api/v1/namespaces/" + name + "/serviceaccounts/default").ok(); },
      std::chrono::seconds(30)));
  return name;
}

bool TestCluster::SetPodStatus(const std::string& ns, const std::string& name,
                               const std::string& phase, bool ready, int exit_code) {
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto pod = admin_->Get(path);
    if (!pod.ok()) return false;
    Json p = pod.value();
    Json status = {{"phase", phase}, {"podIP", "127.0.0.1"}};
    status["conditions"] = Json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}});
    Json cs = Json::array();
    for (const auto& c : p["spec"]["containers"]) {
      Json state;
      if (exit_code >= 0)
        state = {{"terminated",
                  {{"exitCode", exit_code}, {"reason", exit_code ? "Error" : "Completed"}}}};
      else if (phase == "Running")
        state = {{"running", {{"startedAt", "2026-01-01T00:00:00Z"}}}};
      else
        state = {{"waiting", {{"reason", "ContainerCreating"}}}};
      cs.push_back({{"name", c["name"]},
                    {"image", c["image"]},
                    {"imageID", ""},
                    {"ready", ready},
                    {"restartCount", 0},
                    {"state", state}});
    }
    status["containerStatuses"] = cs;
    p["status"] = status;
    auto r = admin_->Put(path + "/status", p);
    if (r.ok()) return true;
    if (r.status().code() != kube::ApiCode::kConflict) {
      ADD_FAILURE() << "setting " << name << " to " << phase << ": " << r.status().ToString();
      return false;
    }
  }
  return false;
}

OperatorProcess::OperatorProcess(const TestCluster& cluster, std::vector<std::string> extra_args,
                                 const std::string& log_name) {
  metrics_port_ = FreePort();
  log_path_ = cluster.dir() + "/" + log_name + ".log";
  std::vector<std::string> args = {KHOROVOD_OPERATOR_BINARY, "--kubeconfig", cluster.kubeconfig(),
                                   "--metrics-bind", "127.0.0.1:" + std::to_string(metrics_port_)};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    FILE* log = std::fopen(log_path_.c_str(), "a");
    if (log) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
}

OperatorProcess::~OperatorProcess() {
  if (pid_ > 0) {
    Kill(SIGTERM);
    bool exited =
        WaitFor([&] { return waitpid(pid_, nullptr, WNOHANG) == pid_; }, std::chrono::seconds(10));
    if (!exited) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
}

void OperatorProcess::Kill(int signal) {
  if (pid_ > 0) kill(pid_, signal);
  if (signal == SIGKILL && pid_ > 0) {
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

bool OperatorProcess::Running() {
  if (pid_ <= 0) return false;
  if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

std::string OperatorProcess::Log() const {
  std::ifstream in(log_path_);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double OperatorProcess::Metric(const std::string& series) const {
  httplib::Client client("127.0.0.1", metrics_port_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::istringstream in(res->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

}  // namespace khorovod::optest
