// ClusterConfig: how to reach and authenticate to one Kubernetes API server,
// loaded once from a kubeconfig file or from the in-cluster service account.
//
// TLS is verified by default: the server certificate must chain to the CA
// given by the kubeconfig (certificate-authority or -data) or, in cluster, to
// the service account's ca.crt, and must name the host. Verification is off
// only when the kubeconfig itself says insecure-skip-tls-verify: true.
// A bearer token may come from a file (tokenFile, or the service account's
// token); RestClient re-reads such a file so rotated tokens are picked up.
//
// Thread-safety: a plain value; loading functions are reentrant.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kube/api_status.h"

namespace khorovod::kube {

struct ClusterConfig {
  std::string scheme = "https";  // "https" or "http" (http only for tests that ask for it)
  std::string host;              // DNS name or IP of the API server
  int port = 443;
  std::string ca_pem;  // PEM bundle to verify the server; empty = system roots
  bool insecure_skip_tls_verify = false;
  std::string client_cert_pem;  // client certificate authentication (PEM), with its key
  std::string client_key_pem;
  std::string bearer_token;  // static token
  std::string token_file;    // token re-read from this file when it changes
  std::string default_namespace = "default";
  // Impersonation headers (kubectl --as / --as-group); tests use them to act
  // as the operator's service account.
  std::string impersonate_user;
  std::vector<std::string> impersonate_groups;
};

// Loads `context` (the current context when empty) from a kubeconfig file.
// Relative file references are resolved against the file's directory.
ApiResult<ClusterConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// The in-cluster configuration: KUBERNETES_SERVICE_HOST/PORT from `env`, and
// token, ca.crt and namespace from `service_account_dir`
// (normally /var/run/secrets/kubernetes.io/serviceaccount).
ApiResult<ClusterConfig> LoadInCluster(const std::map<std::string, std::string>& env,
                                       const std::string& service_account_dir);

// Splits "https://host:port" (IPv6 literals in brackets) into the config's
// scheme, host and port. Returns an error for anything else.
ApiStatus ParseServerUrl(const std::string& url, ClusterConfig& config);

}  // namespace khorovod::kube
