#include "kube/rest_client.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace khorovod::kube {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

X509_STORE* StoreFromPem(const std::string& pem) {
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
  }
  BIO_free(bio);
  return store;
}

}  // namespace

// Client certificate and key parsed once; SSL contexts take references.
struct RestClient::TlsMaterial {
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  ~TlsMaterial() {
    if (cert) X509_free(cert);
    if (key) EVP_PKEY_free(key);
  }
};

class RestClient::Connection {
 public:
  explicit Connection(std::unique_ptr<httplib::ClientImpl> client) : client_(std::move(client)) {}
  httplib::ClientImpl& http() { return *client_; }

 private:
  std::unique_ptr<httplib::ClientImpl> client_;
};

RestClient::RestClient(ClusterConfig config, RestClientOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      tls_(std::make_unique<TlsMaterial>()),
      limiter_(options_.rate_limit, options_.clock) {
  if (!config_.client_cert_pem.empty()) {
    BIO* bio = BIO_new_mem_buf(config_.client_cert_pem.data(),
                               static_cast<int>(config_.client_cert_pem.size()));
    tls_->cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    bio = BIO_new_mem_buf(config_.client_key_pem.data(),
                          static_cast<int>(config_.client_key_pem.size()));
    tls_->key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
  }
  token_ = Trim(config_.bearer_token);
  token_read_at_ = std::chrono::steady_clock::now();
}

RestClient::~RestClient() { StopWatches(); }

std::unique_ptr<RestClient::Connection> RestClient::Acquire() {
  {
    MutexLock lock(pool_mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  std::unique_ptr<httplib::ClientImpl> client;
  if (config_.scheme == "https") {
    auto ssl =
        std::make_unique<httplib::SSLClient>(config_.host, config_.port, tls_->cert, tls_->key);
    if (!config_.ca_pem.empty()) ssl->set_ca_cert_store(StoreFromPem(config_.ca_pem));
    ssl->enable_server_certificate_verification(!config_.insecure_skip_tls_verify);
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(config_.host, config_.port);
  }
  auto ms = [](std::chrono::milliseconds d) {
    return std::make_pair(static_cast<time_t>(d.count() / 1000),
                          static_cast<time_t>((d.count() % 1000) * 1000));
  };
  auto [cs, cus] = ms(options_.connect_timeout);
  auto [rs, rus] = ms(options_.request_timeout);
  client->set_connection_timeout(cs, cus);
  client->set_read_timeout(rs, rus);
  client->set_write_timeout(rs, rus);
  client->set_keep_alive(true);
  return std::make_unique<Connection>(std::move(client));
}

void RestClient::Release(std::unique_ptr<Connection> connection) {
  MutexLock lock(pool_mu_);
  if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(connection));
}

std::vector<std::pair<std::string, std::string>> RestClient::Headers() {
  std::vector<std::pair<std::string, std::string>> h;
  h.emplace_back("Accept", "application/json");
  h.emplace_back("User-Agent", options_.user_agent);
  std::string token;
  {
    MutexLock lock(token_mu_);
    auto now = std::chrono::steady_clock::now();
    if (!config_.token_file.empty() &&
        (token_.empty() || now - token_read_at_ >= options_.token_reload_interval)) {
      std::ifstream in(config_.token_file);
      std::ostringstream ss;
      if (in) {
        ss << in.rdbuf();
        if (!Trim(ss.str()).empty()) token_ = Trim(ss.str());
      }
      token_read_at_ = now;
    }
    token = token_;
  }
  if (!token.empty()) h.emplace_back("Authorization", "Bearer " + token);
  if (!config_.impersonate_user.empty())
    h.emplace_back("Impersonate-User", config_.impersonate_user);
  for (const auto& g : config_.impersonate_groups) h.emplace_back("Impersonate-Group", g);
  return h;
}

void RestClient::Throttle() { throttled_ns_ += limiter_.Wait().count(); }

void RestClient::Observe(const std::string& verb, const std::string& path, int status,
                         std::chrono::steady_clock::time_point start) {
  RequestObserver observer;
  {
    MutexLock lock(observer_mu_);
    observer = observer_;
  }
  if (!observer) return;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  observer(verb, ResourceOfPath(path), status, seconds);
}

void RestClient::set_observer(RequestObserver observer) {
  MutexLock lock(observer_mu_);
  observer_ = std::move(observer);
}

ApiResult<Json> RestClient::Send(const std::string& verb, const std::string& path,
                                 const std::string& body, const std::string& content_type) {
  Throttle();
  auto start = std::chrono::steady_clock::now();
  httplib::Headers headers;
  for (auto& [k, v] : Headers()) headers.emplace(k, v);
  auto conn = Acquire();
  httplib::Result result = [&]() {
    auto& http = conn->http();
    if (verb == "GET") return http.Get(path.c_str(), headers);
    if (verb == "POST") return http.Post(path.c_str(), headers, body, content_type.c_str());
    if (verb == "PUT") return http.Put(path.c_str(), headers, body, content_type.c_str());
    if (verb == "PATCH") return http.Patch(path.c_str(), headers, body, content_type.c_str());
    return http.Delete(path.c_str(), headers, body, content_type.c_str());
  }();
  if (!result) {
    Observe(verb, path, 0, start);
    // The pooled connection may be half-closed; drop it.
    return ApiStatus::Unavailable(verb + " " + path + ": " + httplib::to_string(result.error()));
  }
  Release(std::move(conn));
  Observe(verb, path, result->status, start);
  ApiStatus status = ApiStatus::FromHttp(result->status, result->body);
  if (!status.ok()) return status;
  if (result->body.empty()) return Json::object();
  Json parsed = Json::parse(result->body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded())
    return ApiStatus(ApiCode::kOther, result->status,
                     verb + " " + path + ": the server's answer is not JSON");
  return parsed;
}

ApiResult<Json> RestClient::Get(const std::string& path) { return Send("GET", path, "", ""); }
ApiResult<Json> RestClient::Post(const std::string& path, const Json& body) {
  return Send("POST", path, body.dump(), "application/json");
}
ApiResult<Json> RestClient::Put(const std::string& path, const Json& body) {
  return Send("PUT", path, body.dump(), "application/json");
}
ApiResult<Json> RestClient::Patch(const std::string& path, const std::string& body,
                                  PatchType type) {
  const char* ct = type == PatchType::kMerge            ? "application/merge-patch+json"
                   : type == PatchType::kStrategicMerge ? "application/strategic-merge-patch+json"
                                                        : "application/apply-patch+yaml";
  return Send("PATCH", path, body, ct);
}
ApiResult<Json> RestClient::Delete(const std::string& path, const Json& body) {
  return Send("DELETE", path, body.is_null() ? "" : body.dump(),
              body.is_null() ? "" : "application/json");
}

ApiStatus RestClient::Watch(const std::string& path,
                            const std::function<bool(const Json&)>& on_event) {
  Throttle();
  auto start = std::chrono::steady_clock::now();
  httplib::Headers headers;
  for (auto& [k, v] : Headers()) headers.emplace(k, v);
  auto conn = Acquire();
  // A watch holds its connection for minutes; give it its own read timeout.
  auto slack = options_.watch_slack + options_.request_timeout;
  conn->http().set_read_timeout(static_cast<time_t>(slack.count() / 1000), 0);
  conn->http().set_keep_alive(false);
  {
    MutexLock lock(watch_mu_);
    if (stopping_) return ApiStatus::Unavailable("watch stopped");
    watching_.push_back(conn.get());
  }
  int status = 0;
  std::string buffer;
  std::string error_body;
  bool consumer_stopped = false;
  httplib::Result result = conn->http().Get(
      path.c_str(), headers,
      [&](const httplib::Response& response) {
        status = response.status;
        return true;
      },
      [&](const char* data, size_t length) {
        if (status != 200) {
          if (error_body.size() < 65536) error_body.append(data, length);
          return true;
        }
        buffer.append(data, length);
        size_t newline;
        while ((newline = buffer.find('\n')) != std::string::npos) {
          std::string line = buffer.substr(0, newline);
          buffer.erase(0, newline + 1);
          if (Trim(line).empty()) continue;
          Json event = Json::parse(line, nullptr, false);
          if (event.is_discarded() || !event.is_object()) continue;
          if (!on_event(event)) {
            consumer_stopped = true;
            return false;
          }
        }
        return !stopping_.load();
      });
  {
    MutexLock lock(watch_mu_);
    watching_.erase(std::remove(watching_.begin(), watching_.end(), conn.get()), watching_.end());
  }
  Observe("WATCH", path, status, start);
  if (consumer_stopped) return ApiStatus::Ok();
  if (stopping_) return ApiStatus::Unavailable("watch stopped");
  if (status != 0 && status != 200) return ApiStatus::FromHttp(status, error_body);
  if (!result && result.error() != httplib::Error::Canceled &&
      result.error() != httplib::Error::Read)
    return ApiStatus::Unavailable("watch " + path + ": " + httplib::to_string(result.error()));
  return ApiStatus::Ok();
}

void RestClient::StopWatches() {
  MutexLock lock(watch_mu_);
  stopping_ = true;
  for (Connection* c : watching_) c->http().stop();
}

std::string ResourceOfPath(const std::string& path) {
  std::string p = path.substr(0, path.find('?'));
  std::vector<std::string> parts;
  std::stringstream ss(p);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (!part.empty()) parts.push_back(part);
  // /api/v1/... or /apis/group/version/...
  size_t i = (!parts.empty() && parts[0] == "api") ? 2 : 3;
  if (i < parts.size() && parts[i] == "namespaces" && i + 2 < parts.size()) i += 2;
  if (i < parts.size() && parts[i] == "watch") ++i;
  return i < parts.size() ? parts[i] : "unknown";
}

std::string UrlEncode(const std::string& value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace khorovod::kube
