#include "controller/object_writer.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "khorovod/util/mutex.h"

namespace khorovod::op {

kube::ApiStatus ObjectWriter::EnsureCreated(const kube::ResourceType& type, const std::string& ns,
                                            const kube::Json& object, bool* created) {
  auto result = client_.Post(type.CollectionPath(ns), object);
  if (created) *created = result.ok();
  if (result.ok() || result.status().code() == kube::ApiCode::kAlreadyExists)
    return kube::ApiStatus::Ok();
  return result.status();
}

kube::ApiStatus ObjectWriter::DeletePod(const std::string& ns, const std::string& name,
                                        const std::string& uid, bool force) {
  kube::Json options = {
      {"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"}};
  if (force) options["gracePeriodSeconds"] = 0;
  if (!uid.empty()) options["preconditions"] = {{"uid", uid}};
  auto result = client_.Delete(kube::kPods.ObjectPath(ns, name), options);
  if (result.ok() || result.status().code() == kube::ApiCode::kNotFound ||
      result.status().code() == kube::ApiCode::kConflict /* another incarnation: nothing to do */)
    return kube::ApiStatus::Ok();
  return result.status();
}

kube::ApiStatus ObjectWriter::ForEachParallel(size_t n,
                                              const std::function<kube::ApiStatus(size_t)>& op) {
  if (n == 0) return kube::ApiStatus::Ok();
  std::atomic<size_t> next{0};
  Mutex mu;
  kube::ApiStatus first_error;
  auto worker = [&] {
    for (size_t i; (i = next++) < n;) {
      kube::ApiStatus s = op(i);
      if (!s.ok()) {
        MutexLock lock(mu);
        if (first_error.ok()) first_error = s;
      }
    }
  };
  size_t threads = std::min<size_t>(n, static_cast<size_t>(std::max(1, parallelism_)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return first_error;
}

}  // namespace khorovod::op
