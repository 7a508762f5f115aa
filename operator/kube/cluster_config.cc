#include "kube/cluster_config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "khorovod/util/base64.h"

namespace khorovod::kube {
namespace {

ApiStatus ConfigError(const std::string& message) {
  return ApiStatus(ApiCode::kBadRequest, 0, "kubeconfig: " + message);
}

bool ReadFile(const std::filesystem::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

// Reads `<key>-data` (base64) or `<key>` (a path) from a kubeconfig node.
ApiStatus ReadDataOrFile(const YAML::Node& node, const std::string& key,
                         const std::filesystem::path& base, std::string& out) {
  if (node[key + "-data"]) {
    auto decoded = Base64Decode(node[key + "-data"].as<std::string>());
    if (!decoded) return ConfigError(key + "-data is not valid base64");
    out = std::move(*decoded);
    return ApiStatus::Ok();
  }
  if (node[key]) {
    std::filesystem::path p = node[key].as<std::string>();
    if (p.is_relative()) p = base / p;
    if (!ReadFile(p, out)) return ConfigError("cannot read " + key + " file " + p.string());
  }
  return ApiStatus::Ok();
}

YAML::Node FindNamed(const YAML::Node& list, const std::string& name, const char* field) {
  if (!list || !list.IsSequence()) return YAML::Node();
  for (const auto& item : list) {
    if (item["name"] && item["name"].as<std::string>() == name) return item[field];
  }
  return YAML::Node();
}

}  // namespace

ApiStatus ParseServerUrl(const std::string& url, ClusterConfig& config) {
  auto sep = url.find("://");
  if (sep == std::string::npos) return ConfigError("server '" + url + "' has no scheme");
  config.scheme = url.substr(0, sep);
  if (config.scheme != "https" && config.scheme != "http")
    return ConfigError("server '" + url + "' must be https:// or http://");
  std::string rest = url.substr(sep + 3);
  if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  std::string host = rest;
  std::string port;
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos)
      return ConfigError("server '" + url + "' has an unclosed IPv6 literal");
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) return ConfigError("server '" + url + "' has no host");
  config.host = host;
  config.port = config.scheme == "https" ? 443 : 80;
  if (!port.empty()) {
    try {
      size_t used = 0;
      int p = std::stoi(port, &used);
      if (used != port.size() || p <= 0 || p > 65535) throw std::out_of_range("port");
      config.port = p;
    } catch (const std::exception&) {
      return ConfigError("server '" + url + "' has an invalid port");
    }
  }
  return ApiStatus::Ok();
}

ApiResult<ClusterConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return ConfigError("cannot load " + path + ": " + e.what());
  }
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  try {
    std::string context_name = context;
    if (context_name.empty() && root["current-context"])
      context_name = root["current-context"].as<std::string>();
    if (context_name.empty())
      return ConfigError(path + " names no current-context and none was given");
    YAML::Node ctx = FindNamed(root["contexts"], context_name, "context");
    if (!ctx.IsMap()) return ConfigError("context '" + context_name + "' not found in " + path);
    const std::string cluster_name = ctx["cluster"] ? ctx["cluster"].as<std::string>() : "";
    const std::string user_name = ctx["user"] ? ctx["user"].as<std::string>() : "";
    YAML::Node cluster = FindNamed(root["clusters"], cluster_name, "cluster");
    if (!cluster.IsMap() || !cluster["server"])
      return ConfigError("cluster '" + cluster_name + "' has no server");

    ClusterConfig config;
    ApiStatus s = ParseServerUrl(cluster["server"].as<std::string>(), config);
    if (!s.ok()) return s;
    if (cluster["insecure-skip-tls-verify"])
      config.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>();
    if (s = ReadDataOrFile(cluster, "certificate-authority", base, config.ca_pem); !s.ok())
      return s;
    if (ctx["namespace"]) config.default_namespace = ctx["namespace"].as<std::string>();

    YAML::Node user = FindNamed(root["users"], user_name, "user");
    if (user.IsMap()) {
      if (s = ReadDataOrFile(user, "client-certificate", base, config.client_cert_pem); !s.ok())
        return s;
      if (s = ReadDataOrFile(user, "client-key", base, config.client_key_pem); !s.ok()) return s;
      if (config.client_cert_pem.empty() != config.client_key_pem.empty())
        return ConfigError("user '" + user_name +
                           "' has a client certificate without a key, or a key without one");
      if (user["token"]) config.bearer_token = user["token"].as<std::string>();
      if (user["tokenFile"]) {
        std::filesystem::path p = user["tokenFile"].as<std::string>();
        config.token_file = (p.is_relative() ? base / p : p).string();
      }
      if (user["as"]) config.impersonate_user = user["as"].as<std::string>();
      if (user["as-groups"] && user["as-groups"].IsSequence())
        for (const auto& g : user["as-groups"])
          config.impersonate_groups.push_back(g.as<std::string>());
    }
    return config;
  } catch (const YAML::Exception& e) {
    return ConfigError(path + " is malformed: " + e.what());
  }
}

ApiResult<ClusterConfig> LoadInCluster(const std::map<std::string, std::string>& env,
                                       const std::string& service_account_dir) {
  auto host = env.find("KUBERNETES_SERVICE_HOST");
  auto port = env.find("KUBERNETES_SERVICE_PORT");
  if (host == env.end() || host->second.empty() || port == env.end() || port->second.empty())
    return ApiStatus(ApiCode::kBadRequest, 0,
                     "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  ClusterConfig config;
  const bool ipv6 = host->second.find(':') != std::string::npos;
  ApiStatus s = ParseServerUrl(
      "https://" + (ipv6 ? "[" + host->second + "]" : host->second) + ":" + port->second, config);
  if (!s.ok()) return s;
  const std::filesystem::path dir = service_account_dir;
  config.token_file = (dir / "token").string();
  if (!ReadFile(config.token_file, config.bearer_token))
    return ApiStatus(ApiCode::kBadRequest, 0, "in-cluster: cannot read " + config.token_file);
  if (!ReadFile(dir / "ca.crt", config.ca_pem))
    return ApiStatus(ApiCode::kBadRequest, 0,
                     "in-cluster: cannot read " + (dir / "ca.crt").string());
  std::string ns;
  if (ReadFile(dir / "namespace", ns)) {
    while (!ns.empty() && std::isspace(static_cast<unsigned char>(ns.back()))) ns.pop_back();
    if (!ns.empty()) config.default_namespace = ns;
  }
  return config;
}

}  // namespace khorovod::kube
