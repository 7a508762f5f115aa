// EventRecorder: writes core/v1 Events about an object, as `kubectl describe`
// shows them.
//
// Recording is best-effort: a failure to write an Event is logged and never
// fails the caller's work. Identical events (same object, type, reason and
// message) repeated within `dedupe_window` are written once, so a
// reconcile loop cannot flood the API server.
//
// Thread-safety: Record may be called from any thread.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "khorovod/util/mutex.h"
#include "kube/rest_client.h"

namespace khorovod::kube {

struct ObjectRef {
  std::string api_version, kind, namespace_, name, uid;
};

class EventRecorder {
 public:
  EventRecorder(RestClient& client, std::string component,
                std::chrono::seconds dedupe_window = std::chrono::seconds(60));
  void Record(const ObjectRef& object, const std::string& type, const std::string& reason,
              const std::string& message);

 private:
  RestClient& client_;
  const std::string component_;
  const std::chrono::seconds dedupe_window_;
  Mutex mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> recent_ GUARDED_BY(mu_);
};

}  // namespace khorovod::kube
