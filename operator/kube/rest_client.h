// RestClient: JSON requests and watch streams against one API server.
//
// Contract:
//   - Every call returns within the configured timeouts; transport failures
//     become ApiCode::kUnavailable, HTTP errors are classified by ApiStatus.
//   - TLS is verified unless the ClusterConfig says otherwise (see there).
//   - Connections are pooled and kept alive; each concurrent request takes
//     its own connection from the pool.
//   - A bearer token read from a file is re-read at most every
//     `token_reload_interval`, so rotated service-account tokens are used.
//   - Every request (watches included) first takes a token from a token
//     bucket (RestClientOptions::rate_limit, see rate_limiter.h), so the
//     operator never sends more than `qps` requests a second in the long run.
//     throttled_seconds() is the total time requests have waited for it.
//   - An observer, if set, sees every finished request (verb, resource kind
//     from the path, HTTP status or 0, seconds): the operator's metrics.
//
// Thread-safety: all methods may be called from any thread concurrently.
// StopWatches() makes every running Watch return promptly.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "khorovod/util/mutex.h"
#include "kube/api_status.h"
#include "kube/cluster_config.h"
#include "kube/rate_limiter.h"

namespace khorovod::kube {

using Json = nlohmann::json;

enum class PatchType { kMerge, kStrategicMerge, kApply };

struct RestClientOptions {
  // Connect timeout for a new connection.
  std::chrono::milliseconds connect_timeout{5000};
  // Read/write timeout for ordinary requests.
  std::chrono::milliseconds request_timeout{30000};
  // Extra read slack beyond a watch's server-side timeoutSeconds.
  std::chrono::milliseconds watch_slack{30000};
  // How often a token file is re-read.
  std::chrono::seconds token_reload_interval{60};
  // Idle connections kept for reuse.
  size_t max_idle_connections = 16;
  std::string user_agent = "khorovod-operator";
  // Client-side request rate limit; qps <= 0 disables it.
  RateLimit rate_limit{};
  // The bucket's clock (tests); nullptr = the steady clock.
  Clock* clock = nullptr;
};

using RequestObserver = std::function<void(const std::string& verb, const std::string& resource,
                                           int http_status, double seconds)>;

class RestClient {
 public:
  RestClient(ClusterConfig config, RestClientOptions options = {});
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  // `path` is an absolute API path with its query string already encoded.
  ApiResult<Json> Get(const std::string& path);
  ApiResult<Json> Post(const std::string& path, const Json& body);
  ApiResult<Json> Put(const std::string& path, const Json& body);
  ApiResult<Json> Patch(const std::string& path, const std::string& body, PatchType type);
  ApiResult<Json> Delete(const std::string& path, const Json& body = Json());

  // Streams a watch: calls `on_event` with each decoded event object until the
  // server ends the stream (returns OK), `on_event` returns false (OK), an
  // error happens, or StopWatches() is called (kUnavailable "stopped").
  ApiStatus Watch(const std::string& path, const std::function<bool(const Json&)>& on_event);
  void StopWatches();

  void set_observer(RequestObserver observer);
  const ClusterConfig& config() const { return config_; }
  // Total time requests have waited for the rate limiter.
  double throttled_seconds() const { return throttled_ns_.load() / 1e9; }

 private:
  class Connection;
  std::unique_ptr<Connection> Acquire();
  void Release(std::unique_ptr<Connection> connection);
  std::vector<std::pair<std::string, std::string>> Headers();
  ApiResult<Json> Send(const std::string& verb, const std::string& path, const std::string& body,
                       const std::string& content_type);
  void Throttle();
  void Observe(const std::string& verb, const std::string& path, int status,
               std::chrono::steady_clock::time_point start);

  const ClusterConfig config_;
  const RestClientOptions options_;
  struct TlsMaterial;
  std::unique_ptr<TlsMaterial> tls_;
  TokenBucket limiter_;
  std::atomic<int64_t> throttled_ns_{0};

  Mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> idle_ GUARDED_BY(pool_mu_);

  Mutex token_mu_;
  std::string token_ GUARDED_BY(token_mu_);
  std::chrono::steady_clock::time_point token_read_at_ GUARDED_BY(token_mu_){};

  Mutex watch_mu_;
  std::vector<Connection*> watching_ GUARDED_BY(watch_mu_);
  std::atomic<bool> stopping_{false};

  Mutex observer_mu_;
  RequestObserver observer_ GUARDED_BY(observer_mu_);
};

// The resource name in an API path, for metrics labels
// ("/api/v1/namespaces/x/pods/y/status" -> "pods").
std::string ResourceOfPath(const std::string& path);

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& value);

}  // namespace khorovod::kube
