#include "http_store.h"

#include <gloo/common/error.h>

#include <algorithm>

#include "khorovod/util/base64.h"
#include "protocol.h"

namespace khorovod::rendezvous {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Throw(const std::string& message) {
  throw ::gloo::IoException("HttpStore: " + message);
}

std::string JoinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

milliseconds Remaining(Clock::time_point deadline) {
  return std::max(milliseconds(0),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

}  // namespace

HttpStore::HttpStore(HttpEndpoint endpoint, std::string job, int64_t generation,
                     HttpStoreOptions options)
    : http_(std::move(endpoint), options.retry),
      job_(std::move(job)),
      generation_(generation),
      options_(options) {
  if (options_.timeout <= milliseconds(0)) options_.timeout = milliseconds(30000);
}

JsonReply HttpStore::Call(const char* op, const json& body, milliseconds server_wait,
                          bool idempotent) const {
  std::string path = KvPath(job_, generation_, op);
  StatusOr<JsonReply> reply = http_.Post(path, body, server_wait, idempotent);
  if (!reply.ok()) Throw(reply.status().message());
  return std::move(reply).value();
}

void HttpStore::set(const std::string& key, const std::vector<char>& data) {
  json body = {{"key", key}, {"value", Base64Encode(std::string_view(data.data(), data.size()))}};
  JsonReply reply = Call("set", body, milliseconds(0), /*idempotent=*/true);
  if (!reply.ok()) Throw(JsonHttpClient::ToStatus("set '" + key + "'", reply).message());
}

std::vector<char> HttpStore::get(const std::string& key) {
  auto deadline = Clock::now() + options_.timeout;
  for (;;) {
    milliseconds slice = std::min(kPollSlice, Remaining(deadline));
    JsonReply reply =
        Call("get", {{"key", key}, {"timeout_ms", slice.count()}}, slice, /*idempotent=*/true);
    if (reply.ok()) {
      auto it = reply.body.find("value");
      std::optional<std::string> bytes;
      if (it != reply.body.end() && it->is_string()) bytes = Base64Decode(it->get<std::string>());
      if (!bytes) Throw("get '" + key + "': the server sent a malformed value");
      return std::vector<char>(bytes->begin(), bytes->end());
    }
    if (reply.status != 404 || reply.code() != error_code::kKeyNotFound) {
      Throw(JsonHttpClient::ToStatus("get '" + key + "'", reply).message());
    }
    if (Clock::now() >= deadline) {
      Throw("Wait timeout for key(s): [" + key + "] after " +
            std::to_string(options_.timeout.count()) + " ms");
    }
  }
}

void HttpStore::wait(const std::vector<std::string>& keys) { wait(keys, options_.timeout); }

void HttpStore::wait(const std::vector<std::string>& keys, const milliseconds& timeout) {
  milliseconds bound =
      timeout > milliseconds(0) ? timeout : options_.timeout;  // 0 is Gloo's "no timeout"
  auto deadline = Clock::now() + bound;
  for (;;) {
    milliseconds slice = std::min(kPollSlice, Remaining(deadline));
    JsonReply reply =
        Call("wait", {{"keys", keys}, {"timeout_ms", slice.count()}}, slice, /*idempotent=*/true);
    if (!reply.ok()) Throw(JsonHttpClient::ToStatus("wait", reply).message());
    auto ready = reply.body.find("ready");
    if (ready == reply.body.end() || !ready->is_boolean())
      Throw("wait: the server sent a malformed answer");
    if (ready->get<bool>()) return;
    if (Clock::now() >= deadline) {
      Throw("Wait timeout for key(s): [" + JoinKeys(keys) + "] after " +
            std::to_string(bound.count()) + " ms");
    }
  }
}

int64_t HttpStore::add(const std::string& key, int64_t delta) {
  JsonReply reply =
      Call("add", {{"key", key}, {"delta", delta}}, milliseconds(0), /*idempotent=*/false);
  if (!reply.ok()) Throw(JsonHttpClient::ToStatus("add '" + key + "'", reply).message());
  auto it = reply.body.find("value");
  if (it == reply.body.end() || !it->is_number_integer())
    Throw("add: the server sent a malformed answer");
  return it->get<int64_t>();
}

}  // namespace khorovod::rendezvous
