// Informer: a local, watch-driven cache of one resource type.
//
// It lists the objects (paginated), then watches from the list's
// resourceVersion with bookmarks on. A watch that ends is resumed from the
// last seen resourceVersion; an expired one (410 Gone, as an HTTP status or an
// ERROR event) triggers a full re-list whose differences are delivered as
// events. Failures back off exponentially (capped). Every `resync` period each
// cached object is delivered again as an update, so a missed edge-trigger
// cannot leave an object unreconciled forever.
//
// The cache is indexed by namespace/name and by controller owner UID. It holds
// what InformerOptions::transform keeps of each object, so a cache of
// thousands of pods costs only the fields the controller reads.
// Handlers run on the informer's thread, in event order, and must be quick
// (they normally only enqueue a key).
//
// Thread-safety: Get/List/ByOwner/Synced may be called from any thread;
// AddHandler must be called before Start.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "khorovod/util/mutex.h"
#include "kube/resource.h"
#include "kube/rest_client.h"

namespace khorovod::kube {

using ObjectPtr = std::shared_ptr<const Json>;

enum class EventType { kAdded, kUpdated, kDeleted };

struct InformerOptions {
  std::string namespace_;      // "" watches every namespace
  std::string label_selector;  // only objects matching it are cached
  std::string field_selector;  // e.g. "spec.nodeName=n1"
  std::chrono::seconds resync{300};
  std::chrono::seconds watch_timeout{240};  // server-side timeoutSeconds of each watch
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{10000};
  int page_size = 500;
  // Applied to every object before it is cached (and before the list's
  // objects are kept): returns the part of the object the consumers read.
  // Must keep metadata name, namespace and ownerReferences. Unset: the
  // object minus metadata.managedFields.
  std::function<Json(const Json&)> transform;
};

class Informer {
 public:
  using Handler = std::function<void(EventType, const ObjectPtr& object)>;

  Informer(RestClient& client, ResourceType type, InformerOptions options = {});
  ~Informer();

  void AddHandler(Handler handler);
  void Start();
  void Stop();
  // True once the first list has been delivered.
  bool Synced() const { return synced_.load(); }
  bool WaitForSync(std::chrono::milliseconds timeout);

  ObjectPtr Get(const std::string& ns, const std::string& name) const;
  std::vector<ObjectPtr> List(const std::string& ns = "") const;
  std::vector<ObjectPtr> ByOwner(const std::string& owner_uid) const;

  // How many times the informer has (re-)listed: 1 after the first sync.
  uint64_t list_count() const { return lists_.load(); }
  const ResourceType& type() const { return type_; }

 private:
  void Run();
  ApiStatus ListAll(std::string& resource_version);
  // Returns kGone when a re-list is needed.
  ApiStatus WatchFrom(std::string& resource_version);
  // `object` has been through Trim already.
  void Apply(EventType type, Json object);
  Json Trim(const Json& object) const;
  void Resync();
  void Deliver(EventType type, const ObjectPtr& object);
  bool SleepFor(std::chrono::milliseconds d);

  RestClient& client_;
  const ResourceType type_;
  const InformerOptions options_;
  std::vector<Handler> handlers_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, ObjectPtr> objects_ GUARDED_BY(mu_);               // "ns/name" -> object
  std::map<std::string, std::set<std::string>> by_owner_ GUARDED_BY(mu_);  // owner uid -> keys

  std::atomic<bool> synced_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> lists_{0};
  std::chrono::steady_clock::time_point last_resync_;
  std::thread thread_;
};

// "ns/name" of an object (name alone for cluster-scoped ones).
std::string ObjectKey(const Json& object);
// The UID of the object's controller owner, or "".
std::string ControllerOwnerUid(const Json& object);

}  // namespace khorovod::kube
