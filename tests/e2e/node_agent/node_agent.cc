#include "node_agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "base64.h"
#include "kube/leader_election.h"
#include "kube/resource.h"

namespace khorovod::e2e {

using kube::Json;

namespace {

std::string Now() { return kube::MicroTimeNow().substr(0, 19) + "Z"; }

}  // namespace

NodeAgent::NodeAgent(kube::RestClient& client, NodeAgentOptions options)
    : client_(client),
      options_(std::move(options)),
      pods_(client, kube::kPods, [&] {
        kube::InformerOptions o;
        o.field_selector = "spec.nodeName=" + options_.node_name;
        o.resync = std::chrono::seconds(30);
        return o;
      }()),
      next_ip_(options_.first_ip) {
  pods_.AddHandler([this](kube::EventType, const kube::ObjectPtr& pod) { queue_.Add(kube::ObjectKey(*pod)); });
}

NodeAgent::~NodeAgent() { Stop(); }

kube::ApiStatus NodeAgent::RegisterNode() {
  Json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", options_.node_name}, {"labels", {{"kubernetes.io/hostname", options_.node_name}}}}},
               {"spec", {{"taints", Json::array({{{"key", options_.taint_key}, {"value", "true"}, {"effect", "NoSchedule"}}})}}}};
  auto created = client_.Post("/api/v1/nodes", node);
  if (!created.ok() && created.status().code() != kube::ApiCode::kAlreadyExists) return created.status();
  Heartbeat();
  // The API server's TaintNodesByCondition admission adds not-ready on
  // creation; the node lifecycle controller that would lift it once Ready
  // does not run here, so the agent keeps only its own taint.
  Json taints = {{"spec", {{"taints", node["spec"]["taints"]}}}};
  auto r = client_.Patch("/api/v1/nodes/" + options_.node_name, taints.dump(), kube::PatchType::kMerge);
  return r.ok() ? kube::ApiStatus::Ok() : r.status();
}

void NodeAgent::Heartbeat() {
  const std::string now = Now();
  Json status = {{"status",
                  {{"capacity", {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "500"}}},
                   {"allocatable", {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "500"}}},
                   {"addresses", Json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}}})},
                   {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}, {"reason", "KhorovodNodeAgentReady"},
                                                {"message", "test node agent (not a kubelet)"},
                                                {"lastHeartbeatTime", now}, {"lastTransitionTime", now}}})},
                   {"nodeInfo", {{"kubeletVersion", "khorovod-node-agent"}}}}}};
  auto r = client_.Patch("/api/v1/nodes/" + options_.node_name + "/status", status.dump(), kube::PatchType::kMerge);
  if (!r.ok()) std::cerr << "node-agent: node heartbeat: " << r.status().ToString() << "\n";
}

kube::ApiStatus NodeAgent::Start() {
  std::filesystem::create_directories(options_.log_dir);
  if (auto s = RegisterNode(); !s.ok()) return s;
  pods_.Start();
  worker_ = std::thread([this] {
    std::string key;
    while (queue_.Get(key)) {
      Sync(key);
      queue_.Done(key);
    }
  });
  reaper_ = std::thread([this] { Reap(); });
  heartbeat_ = std::thread([this] {
    for (int tick = 0; !stop_; ++tick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (tick % 50 == 49) Heartbeat();
    }
  });
  return kube::ApiStatus::Ok();
}

void NodeAgent::Stop() {
  if (stop_.exchange(true)) return;
  queue_.ShutDown();
  client_.StopWatches();
  pods_.Stop();
  for (auto* t : {&worker_, &reaper_, &heartbeat_})
    if (t->joinable()) t->join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, st] : running_) {
    if (st.pid > 0) {
      kill(-st.pid, SIGKILL);
      waitpid(st.pid, nullptr, 0);
    }
  }
}

std::string NodeAgent::ResolveServiceAddress(const std::string& ns, const std::string& service) {
  auto svc = client_.Get(kube::kServices.ObjectPath(ns, service));
  if (!svc.ok()) return "";
  const Json selector = svc.value()["spec"].value("selector", Json::object());
  if (selector.empty()) return "";
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& obj : pods_.List(ns)) {
    const Json& labels = obj->at("metadata").value("labels", Json::object());
    bool match = true;
    for (auto it = selector.begin(); it != selector.end(); ++it)
      match &= labels.contains(it.key()) && labels[it.key()] == it.value();
    if (!match) continue;
    auto st = running_.find(kube::ObjectKey(*obj));
    if (st != running_.end() && st->second.pid > 0 && !st->second.deleting) return st->second.ip;
  }
  return "";
}

bool NodeAgent::MountServiceAccount(const Json& pod, const RunningPod& state, std::vector<std::string>& env) {
  const Json& spec = pod["spec"];
  if (!spec.value("automountServiceAccountToken", true)) return true;
  const std::string sa = spec.value("serviceAccountName", "default");
  auto token = client_.Post(kube::kServices.Prefix() + "/namespaces/" + state.ns + "/serviceaccounts/" + sa + "/token",
                            {{"apiVersion", "authentication.k8s.io/v1"},
                             {"kind", "TokenRequest"},
                             {"spec", {{"expirationSeconds", 3600}}}});
  if (!token.ok()) {
    std::cerr << "node-agent: token for " << state.ns << "/" << sa << ": " << token.status().ToString() << "\n";
    return false;
  }
  const std::string dir = options_.log_dir + "/sa-" + state.ns + "-" + state.name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/token") << token.value()["status"].value("token", "");
  std::ofstream(dir + "/ca.crt") << client_.config().ca_pem;
  std::ofstream(dir + "/namespace") << state.ns;
  env.push_back("KHOROVOD_SERVICE_ACCOUNT_DIR=" + dir);
  env.push_back("KUBERNETES_SERVICE_HOST=" + client_.config().host);
  env.push_back("KUBERNETES_SERVICE_PORT=" + std::to_string(client_.config().port));
  return true;
}

bool NodeAgent::ResolveEnv(const Json& pod, const RunningPod& state, std::vector<std::string>& env,
                           std::string& error) {
  static const std::regex kServiceDns(R"(([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?)");
  const Json& container = pod["spec"]["containers"][0];
  env.push_back("PATH=" + options_.bin_dir + ":/usr/local/bin:/usr/bin:/bin");
  env.push_back("HOSTNAME=" + pod["spec"].value("hostname", state.name));
  for (const auto& e : container.value("env", Json::array())) {
    const std::string name = e.value("name", "");
    std::string value;
    if (e.contains("value")) {
      value = e["value"].get<std::string>();
    } else if (e.contains("valueFrom")) {
      const Json& from = e["valueFrom"];
      if (from.contains("fieldRef")) {
        const std::string path = from["fieldRef"].value("fieldPath", "");
        if (path == "metadata.name") value = state.name;
        else if (path == "metadata.namespace") value = state.ns;
        else if (path == "metadata.uid") value = state.uid;
        else if (path == "status.podIP") value = state.ip;
        else if (path == "spec.nodeName") value = options_.node_name;
        else {
          error = "unsupported fieldRef " + path;
          return false;
        }
      } else if (from.contains("secretKeyRef")) {
        const Json& ref = from["secretKeyRef"];
        auto secret = client_.Get(kube::kSecrets.ObjectPath(state.ns, ref.value("name", "")));
        if (!secret.ok() || !secret.value()["data"].contains(ref.value("key", ""))) {
          error = "secret " + ref.value("name", "") + " not readable yet";
          return false;
        }
        auto decoded = rendezvous::Base64Decode(secret.value()["data"][ref.value("key", "")].get<std::string>());
        if (!decoded) {
          error = "secret " + ref.value("name", "") + " holds invalid base64";
          return false;
        }
        value = std::move(*decoded);
      } else {
        error = "unsupported valueFrom for " + name;
        return false;
      }
    }
    std::smatch m;
    if (std::regex_search(value, m, kServiceDns)) {
      const std::string ip = ResolveServiceAddress(m[3].str(), m[1].str());
      if (ip.empty()) {
        error = "service " + m[1].str() + "." + m[3].str() + " has no running pod yet";
        return false;
      }
      value = m.prefix().str() + ip + m.suffix().str();
    }
    env.push_back(name + "=" + value);
  }
  return MountServiceAccount(pod, state, env) || (error = "no service-account token", false);
}

void NodeAgent::ReportRunning(const RunningPod& state, const Json& pod) {
  const std::string now = Now();
  Json cs = Json::array();
  for (const auto& c : pod["spec"]["containers"])
    cs.push_back({{"name", c["name"]}, {"image", c.value("image", "")}, {"imageID", ""}, {"ready", true},
                  {"started", true}, {"restartCount", state.restarts}, {"state", {{"running", {{"startedAt", now}}}}}});
  Json status = {{"status",
                  {{"phase", "Running"},
                   {"podIP", state.ip},
                   {"podIPs", Json::array({{{"ip", state.ip}}})},
                   {"hostIP", "127.0.0.1"},
                   {"startTime", now},
                   {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}, {"lastTransitionTime", now}},
                                               {{"type", "ContainersReady"}, {"status", "True"}, {"lastTransitionTime", now}},
                                               {{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", now}}})},
                   {"containerStatuses", cs}}}};
  auto r = client_.Patch(kube::kPods.ObjectPath(state.ns, state.name) + "/status", status.dump(), kube::PatchType::kMerge);
  if (!r.ok()) std::cerr << "node-agent: status of " << state.name << ": " << r.status().ToString() << "\n";
}

void NodeAgent::ReportExit(const RunningPod& state, int exit_code, bool will_restart) {
  const std::string now = Now();
  Json terminated = {{"exitCode", exit_code}, {"reason", exit_code == 0 ? "Completed" : "Error"}, {"finishedAt", now}};
  Json status;
  if (will_restart) {
    status = {{"status", {{"conditions", Json::array({{{"type", "Ready"}, {"status", "False"}, {"lastTransitionTime", now}}})}}}};
  } else {
    status = {{"status",
               {{"phase", exit_code == 0 ? "Succeeded" : "Failed"},
                {"conditions", Json::array({{{"type", "Ready"}, {"status", "False"}, {"lastTransitionTime", now}}})},
                {"containerStatuses", Json::array({{{"name", "main"}, {"image", ""}, {"imageID", ""}, {"ready", false},
                                                    {"restartCount", state.restarts},
                                                    {"state", {{"terminated", terminated}}}}})}}}};
  }
  auto r = client_.Patch(kube::kPods.ObjectPath(state.ns, state.name) + "/status", status.dump(), kube::PatchType::kMerge);
  if (!r.ok()) std::cerr << "node-agent: exit status of " << state.name << ": " << r.status().ToString() << "\n";
  std::cerr << "node-agent: " << state.ns << "/" << state.name << " exited " << exit_code
            << (will_restart ? " (restarting)" : "") << "\n";
}

void NodeAgent::ReportFailure(const std::string& ns, const std::string& name, const std::string& reason,
                              const std::string& message) {
  Json status = {{"status", {{"phase", "Failed"}, {"reason", reason}, {"message", message}}}};
  (void)client_.Patch(kube::kPods.ObjectPath(ns, name) + "/status", status.dump(), kube::PatchType::kMerge);
}

void NodeAgent::Launch(RunningPod& state, const Json& pod) {
  const Json& container = pod["spec"]["containers"][0];
  std::vector<std::string> argv;
  for (const auto& a : container.value("command", Json::array())) argv.push_back(a);
  if (argv.empty()) {
    const std::string image = container.value("image", "");
    for (const auto& [prefix, binary] : options_.image_commands)
      if (image.rfind(prefix, 0) == 0) argv.push_back(binary);
    if (argv.empty()) {
      state.finished = true;
      ReportFailure(state.ns, state.name, "NoCommand", "image " + image + " has no command mapped for the node agent");
      return;
    }
  }
  for (const auto& a : container.value("args", Json::array())) argv.push_back(a);
  std::vector<std::string> env;
  std::string error;
  if (!ResolveEnv(pod, state, env, error)) {
    if (state.restarts == 0 && error != last_wait_[state.ns + "/" + state.name])
      std::cerr << "node-agent: " << state.name << " waits: " << error << "\n";
    last_wait_[state.ns + "/" + state.name] = error;
    queue_.AddAfter(state.ns + "/" + state.name, std::chrono::milliseconds(300));
    return;
  }
  const std::string log = options_.log_dir + "/" + state.ns + "_" + state.name + ".log";
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string path = options_.bin_dir + "/" + argv[0];
    if (argv[0].find('/') == std::string::npos && access(path.c_str(), X_OK) == 0) execve(path.c_str(), args.data(), envp.data());
    execvpe(argv[0].c_str(), args.data(), envp.data());
    std::fprintf(stderr, "node-agent: cannot exec %s\n", argv[0].c_str());
    _exit(127);
  }
  state.pid = pid;
  state.relaunch = false;
  std::cerr << "node-agent: started " << state.ns << "/" << state.name << " as pid " << pid << " on " << state.ip
            << "\n";
  ReportRunning(state, pod);
}

void NodeAgent::Sync(const std::string& key) {
  kube::ObjectPtr pod = pods_.Get(key.substr(0, key.find('/')), key.substr(key.find('/') + 1));
  std::unique_lock<std::mutex> lock(mu_);
  auto it = running_.find(key);
  if (!pod) {  // the object is gone: nothing may keep running for it
    if (it != running_.end() && it->second.pid > 0) {
      it->second.deleting = true;
      kill(-it->second.pid, SIGKILL);
    } else if (it != running_.end()) {
      running_.erase(it);
    }
    return;
  }
  const Json& meta = pod->at("metadata");
  const std::string uid = meta.value("uid", "");
  if (it != running_.end() && it->second.uid != uid) {  // a new pod took the old name
    if (it->second.pid > 0) {
      kill(-it->second.pid, SIGKILL);
      lock.unlock();
      queue_.AddAfter(key, std::chrono::milliseconds(200));
      return;
    }
    running_.erase(it);
    it = running_.end();
  }
  if (meta.contains("deletionTimestamp")) {
    if (it == running_.end() || it->second.pid <= 0) {
      if (it != running_.end()) running_.erase(it);
      lock.unlock();
      kube::Json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", 0},
                            {"preconditions", {{"uid", uid}}}};
      (void)client_.Delete(kube::kPods.ObjectPath(meta.value("namespace", ""), meta.value("name", "")), options);
      return;
    }
    if (!it->second.deleting) {
      it->second.deleting = true;
      it->second.kill_deadline = std::chrono::steady_clock::now() + options_.grace;
      kill(-it->second.pid, SIGTERM);
      std::cerr << "node-agent: stopping " << key << " (pod deleted)\n";
    }
    return;
  }
  const std::string phase = pod->value("status", Json::object()).value("phase", "");
  if (it == running_.end()) {
    if (phase == "Succeeded" || phase == "Failed") return;
    RunningPod st;
    st.ns = meta.value("namespace", "");
    st.name = meta.value("name", "");
    st.uid = uid;
    st.ip = "127.0.0." + std::to_string(next_ip_++);
    if (next_ip_ > 254) next_ip_ = options_.first_ip;
    st.restart_always = (*pod)["spec"].value("restartPolicy", "Always") == "Always";
    it = running_.emplace(key, st).first;
  }
  if (it->second.pid <= 0 && !it->second.finished) {
    Json copy = *pod;
    RunningPod& st = it->second;
    lock.unlock();  // env resolution talks to the API server and reads running_
    RunningPod launched = st;
    Launch(launched, copy);
    std::lock_guard<std::mutex> relock(mu_);
    auto again = running_.find(key);
    if (again != running_.end() && again->second.uid == launched.uid) again->second = launched;
  }
}

void NodeAgent::Reap() {
  while (!stop_) {
    std::vector<std::string> to_sync;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, st] : running_) {
        if (st.pid <= 0) continue;
        if (st.deleting && st.kill_deadline != std::chrono::steady_clock::time_point{} &&
            std::chrono::steady_clock::now() > st.kill_deadline)
          kill(-st.pid, SIGKILL);
        int status = 0;
        if (waitpid(st.pid, &status, WNOHANG) != st.pid) continue;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        st.pid = -1;
        if (st.deleting) {
          to_sync.push_back(key);
          continue;
        }
        bool restart = st.restart_always;
        if (restart) st.restarts++;
        ReportExit(st, code, restart);
        if (!restart) st.finished = true;
        else to_sync.push_back(key);
      }
    }
    for (const auto& key : to_sync) queue_.AddAfter(key, std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace khorovod::e2e
