#include "controller/write_expectations.h"

namespace khorovod::op {
namespace {

std::string MetadataField(const kube::ObjectPtr& object, const char* field) {
  if (!object) return "";
  return object->value("metadata", nlohmann::json::object()).value(field, "");
}

}  // namespace

void WriteExpectations::DropIfEmpty(std::map<std::string, Job>::iterator it) {
  if (it->second.created.empty() && !it->second.written) jobs_.erase(it);
}

void WriteExpectations::ExpectCreated(const std::string& job_uid, const std::string& job_key,
                                      const std::string& pod_name, Clock::time_point now) {
  MutexLock lock(mu_);
  Job& job = jobs_[job_uid];
  job.key = job_key;
  job.created[pod_name] = now;
}

std::set<std::string> WriteExpectations::Pending(const std::string& job_uid,
                                                 const std::set<std::string>& observed,
                                                 Clock::time_point now) {
  MutexLock lock(mu_);
  std::set<std::string> pending;
  auto job = jobs_.find(job_uid);
  if (job == jobs_.end()) return pending;
  auto& created = job->second.created;
  for (auto it = created.begin(); it != created.end();) {
    if (observed.count(it->first) || now - it->second >= ttl_) {
      it = created.erase(it);
    } else {
      pending.insert(it->first);
      ++it;
    }
  }
  DropIfEmpty(job);
  return pending;
}

void WriteExpectations::WroteJob(const std::string& job_uid, const std::string& job_key,
                                 const std::string& replaced_version, kube::ObjectPtr written) {
  MutexLock lock(mu_);
  Job& job = jobs_[job_uid];
  job.key = job_key;
  job.replaced_version = replaced_version;
  job.written = std::move(written);
}

kube::ObjectPtr WriteExpectations::Freshest(kube::ObjectPtr cached) {
  MutexLock lock(mu_);
  auto job = jobs_.find(MetadataField(cached, "uid"));
  if (job == jobs_.end() || !job->second.written) return cached;
  if (MetadataField(cached, "resourceVersion") == job->second.replaced_version)
    return job->second.written;
  job->second.written.reset();  // the cache has moved on: it is the truth now
  DropIfEmpty(job);
  return cached;
}

void WriteExpectations::Forget(const std::string& job_uid) {
  MutexLock lock(mu_);
  jobs_.erase(job_uid);
}

void WriteExpectations::ForgetKey(const std::string& job_key) {
  MutexLock lock(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end();)
    it = it->second.key == job_key ? jobs_.erase(it) : std::next(it);
}

}  // namespace khorovod::op
