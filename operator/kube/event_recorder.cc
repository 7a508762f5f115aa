#include "kube/event_recorder.h"

#include <iostream>

#include "kube/leader_election.h"
#include "kube/resource.h"

namespace khorovod::kube {

EventRecorder::EventRecorder(RestClient& client, std::string component,
                             std::chrono::seconds dedupe_window)
    : client_(client), component_(std::move(component)), dedupe_window_(dedupe_window) {}

void EventRecorder::Record(const ObjectRef& object, const std::string& type,
                           const std::string& reason, const std::string& message) {
  const std::string key = object.uid + "|" + type + "|" + reason + "|" + message;
  auto now = std::chrono::steady_clock::now();
  {
    MutexLock lock(mu_);
    auto it = recent_.find(key);
    if (it != recent_.end() && now - it->second < dedupe_window_) return;
    recent_[key] = now;
    if (recent_.size() > 10000) {
      for (auto i = recent_.begin(); i != recent_.end();)
        i = now - i->second >= dedupe_window_ ? recent_.erase(i) : std::next(i);
    }
  }
  const std::string ts = MicroTimeNow().substr(0, 19) + "Z";
  Json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", object.name + "."}, {"namespace", object.namespace_}}},
      {"involvedObject",
       {{"apiVersion", object.api_version},
        {"kind", object.kind},
        {"namespace", object.namespace_},
        {"name", object.name},
        {"uid", object.uid}}},
      {"type", type},
      {"reason", reason},
      {"message", message.substr(0, 1024)},
      {"firstTimestamp", ts},
      {"lastTimestamp", ts},
      {"count", 1},
      {"source", {{"component", component_}}},
      {"reportingComponent", component_}};
  auto result = client_.Post(kEvents.CollectionPath(object.namespace_), event);
  if (!result.ok())
    std::cerr << "event " << reason << " on " << object.namespace_ << "/" << object.name
              << " not recorded: " << result.status().ToString() << "\n";
}

}  // namespace khorovod::kube
