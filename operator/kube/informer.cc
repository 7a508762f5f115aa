#include "kube/informer.h"

#include <algorithm>
#include <iostream>

namespace khorovod::kube {

std::string ObjectKey(const Json& object) {
  const Json& meta = object.at("metadata");
  std::string ns = meta.value("namespace", "");
  std::string name = meta.value("name", "");
  return ns.empty() ? name : ns + "/" + name;
}

std::string ControllerOwnerUid(const Json& object) {
  const Json& meta = object.at("metadata");
  auto refs = meta.find("ownerReferences");
  if (refs == meta.end() || !refs->is_array()) return "";
  for (const auto& ref : *refs) {
    if (ref.value("controller", false)) return ref.value("uid", "");
  }
  return "";
}

Informer::Informer(RestClient& client, ResourceType type, InformerOptions options)
    : client_(client), type_(std::move(type)), options_(std::move(options)) {}

Informer::~Informer() { Stop(); }

void Informer::AddHandler(Handler handler) { handlers_.push_back(std::move(handler)); }

void Informer::Start() {
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  return lock.WaitFor(cv_, timeout, [this] { return synced_.load() || stop_.load(); }) &&
         synced_.load();
}

bool Informer::SleepFor(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  lock.WaitFor(cv_, d, [this] { return stop_.load(); });
  return !stop_.load();
}

ObjectPtr Informer::Get(const std::string& ns, const std::string& name) const {
  MutexLock lock(mu_);
  auto it = objects_.find(ns.empty() ? name : ns + "/" + name);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::List(const std::string& ns) const {
  MutexLock lock(mu_);
  std::vector<ObjectPtr> out;
  if (ns.empty()) {
    for (const auto& [k, v] : objects_) out.push_back(v);
  } else {
    const std::string prefix = ns + "/";
    for (auto it = objects_.lower_bound(prefix);
         it != objects_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      out.push_back(it->second);
  }
  return out;
}

std::vector<ObjectPtr> Informer::ByOwner(const std::string& owner_uid) const {
  MutexLock lock(mu_);
  std::vector<ObjectPtr> out;
  auto it = by_owner_.find(owner_uid);
  if (it == by_owner_.end()) return out;
  for (const auto& key : it->second) {
    auto obj = objects_.find(key);
    if (obj != objects_.end()) out.push_back(obj->second);
  }
  return out;
}

void Informer::Deliver(EventType type, const ObjectPtr& object) {
  for (const auto& h : handlers_) h(type, object);
}

Json Informer::Trim(const Json& object) const {
  if (options_.transform) return options_.transform(object);
  // managedFields is often the largest part of an object and no consumer of
  // the cache reads it: drop it, as controller-runtime's caches can.
  Json trimmed = object;
  if (trimmed.contains("metadata") && trimmed["metadata"].is_object())
    trimmed["metadata"].erase("managedFields");
  return trimmed;
}

void Informer::Apply(EventType type, Json object) {
  auto ptr = std::make_shared<const Json>(std::move(object));
  const Json& obj = *ptr;
  const std::string key = ObjectKey(obj);
  const std::string owner = ControllerOwnerUid(obj);
  {
    MutexLock lock(mu_);
    auto old = objects_.find(key);
    if (old != objects_.end()) {
      std::string old_owner = ControllerOwnerUid(*old->second);
      if (!old_owner.empty()) {
        by_owner_[old_owner].erase(key);
        if (by_owner_[old_owner].empty()) by_owner_.erase(old_owner);
      }
    }
    if (type == EventType::kDeleted) {
      objects_.erase(key);
    } else {
      objects_[key] = ptr;
      if (!owner.empty()) by_owner_[owner].insert(key);
    }
  }
  Deliver(type, ptr);
}

ApiStatus Informer::ListAll(std::string& resource_version) {
  std::map<std::string, Json> listed;
  std::string cont;
  for (int page = 0; page < 100000; ++page) {
    std::string path =
        type_.CollectionPath(options_.namespace_) + "?limit=" + std::to_string(options_.page_size);
    if (!options_.label_selector.empty())
      path += "&labelSelector=" + UrlEncode(options_.label_selector);
    if (!options_.field_selector.empty())
      path += "&fieldSelector=" + UrlEncode(options_.field_selector);
    if (!cont.empty()) path += "&continue=" + UrlEncode(cont);
    auto result = client_.Get(path);
    if (!result.ok()) return result.status();
    Json& list = result.value();
    if (!list.is_object())
      return ApiStatus(ApiCode::kOther, 200,
                       "list " + type_.plural + ": the answer is not an object");
    if (list.contains("items") && list["items"].is_array())
      for (auto& item : list["items"]) {
        Json kept = Trim(item);
        item = Json();  // free each page's full objects as they are trimmed
        // The key first: in `listed[ObjectKey(kept)] = std::move(kept)` the
        // right side (moving `kept` out) is sequenced before the left.
        std::string key = ObjectKey(kept);
        listed[key] = std::move(kept);
      }
    const Json meta = list.value("metadata", Json::object());
    resource_version = meta.value("resourceVersion", "");
    cont = meta.value("continue", "");
    if (cont.empty()) break;
  }
  // Deliver the difference against the cache: deletions first, then the rest.
  std::vector<ObjectPtr> vanished;
  {
    MutexLock lock(mu_);
    for (const auto& [key, obj] : objects_)
      if (!listed.count(key)) vanished.push_back(obj);
  }
  for (const auto& obj : vanished) Apply(EventType::kDeleted, *obj);  // already trimmed
  for (auto& [key, obj] : listed) {
    bool known;
    {
      MutexLock lock(mu_);
      known = objects_.count(key) > 0;
    }
    Apply(known ? EventType::kUpdated : EventType::kAdded, std::move(obj));
  }
  lists_++;
  {
    MutexLock lock(mu_);
    synced_ = true;
  }
  cv_.notify_all();
  return ApiStatus::Ok();
}

ApiStatus Informer::WatchFrom(std::string& resource_version) {
  std::string path = type_.CollectionPath(options_.namespace_) +
                     "?watch=1&allowWatchBookmarks=true" +
                     "&timeoutSeconds=" + std::to_string(options_.watch_timeout.count()) +
                     "&resourceVersion=" + UrlEncode(resource_version);
  if (!options_.label_selector.empty())
    path += "&labelSelector=" + UrlEncode(options_.label_selector);
  if (!options_.field_selector.empty())
    path += "&fieldSelector=" + UrlEncode(options_.field_selector);
  bool gone = false;
  ApiStatus status = client_.Watch(path, [&](const Json& event) {
    const std::string type = event.value("type", "");
    const Json& object = event.contains("object") ? event["object"] : Json();
    if (type == "ERROR") {
      if (object.is_object() && object.value("code", 0) == 410) gone = true;
      return false;
    }
    if (!object.is_object() || !object.contains("metadata")) return true;
    std::string rv = object["metadata"].value("resourceVersion", "");
    if (type == "BOOKMARK") {
      if (!rv.empty()) resource_version = rv;
      return true;
    }
    if (type == "ADDED")
      Apply(EventType::kAdded, Trim(object));
    else if (type == "MODIFIED")
      Apply(EventType::kUpdated, Trim(object));
    else if (type == "DELETED")
      Apply(EventType::kDeleted, Trim(object));
    if (!rv.empty()) resource_version = rv;
    if (std::chrono::steady_clock::now() - last_resync_ >= options_.resync) return false;
    return !stop_.load();
  });
  if (gone) return ApiStatus(ApiCode::kGone, 410, "watch expired");
  return status;
}

void Informer::Resync() {
  last_resync_ = std::chrono::steady_clock::now();
  for (const auto& obj : List()) Deliver(EventType::kUpdated, obj);
}

void Informer::Run() {
  std::string rv;
  bool need_list = true;
  auto backoff = options_.backoff_initial;
  last_resync_ = std::chrono::steady_clock::now();
  while (!stop_) {
    ApiStatus status;
    try {
      status = need_list ? ListAll(rv) : WatchFrom(rv);
    } catch (const Json::exception& e) {
      // An object without the shape every object has: never end the
      // operator for it; start again from a fresh list.
      status = ApiStatus(ApiCode::kOther, 0, std::string("malformed object: ") + e.what());
      need_list = true;
    }
    if (stop_) break;
    if (status.ok()) {
      if (need_list) need_list = false;
      backoff = options_.backoff_initial;
      if (std::chrono::steady_clock::now() - last_resync_ >= options_.resync) Resync();
      continue;
    }
    if (status.code() == ApiCode::kGone) {
      std::cerr << "informer " << type_.plural << ": " << status.ToString() << "; re-listing\n";
      need_list = true;
      continue;
    }
    std::cerr << "informer " << type_.plural << ": " << status.ToString() << "; retrying in "
              << backoff.count() << " ms\n";
    if (!SleepFor(backoff)) break;
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

}  // namespace khorovod::kube
