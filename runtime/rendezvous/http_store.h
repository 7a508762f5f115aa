// HttpStore: a gloo::rendezvous::Store over the rendezvous server's
// key-value endpoints, namespaced by job and generation, so that the ranks of
// one generation can run gloo::rendezvous::Context::connectFullMesh:
//
//   HttpStore store(endpoint, "myjob", assignment.generation);
//   auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
//   ctx->connectFullMesh(store, device);
//
// Semantics follow Gloo's own stores: set() overwrites; get() blocks until
// the key exists; wait() blocks until every key exists. Blocking is always
// bounded: by the `timeout` argument of wait(), and by
// HttpStoreOptions::timeout for get() and for wait() without (or with a zero,
// Gloo's "no timeout") timeout. Long waits are split into server long-polls.
//
// Errors: every failure throws gloo::IoException (a std::runtime_error, as
// Gloo's FileStore does): a timeout ("Wait timeout for key(s): ..."), an
// unreachable server after the transport's retries, or an error answer
// (bad token, unknown or dropped generation, failed job). add() is an
// extension (not part of gloo's Store here) and is not retried after a
// request that may have reached the server.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "http_json_client.h"

namespace khorovod::rendezvous {

struct HttpStoreOptions {
  std::chrono::milliseconds timeout{30000};
  RetryPolicy retry;
};

class HttpStore : public gloo::rendezvous::Store {
 public:
  HttpStore(HttpEndpoint endpoint, std::string job, int64_t generation,
            HttpStoreOptions options = {});

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Atomically adds `delta` to the int64 counter at `key` (absent = 0) and
  // returns the new value.
  int64_t add(const std::string& key, int64_t delta);

  int64_t generation() const { return generation_; }

 private:
  JsonReply Call(const char* op, const nlohmann::json& body, std::chrono::milliseconds server_wait,
                 bool idempotent) const;

  JsonHttpClient http_;
  std::string job_;
  int64_t generation_;
  HttpStoreOptions options_;
};

}  // namespace khorovod::rendezvous
