// WriteExpectations: what this operator has written that its informer caches
// may not show yet (after client-go's ControllerExpectations).
//
// A reconcile reads pods and the job from watch caches, which lag the
// operator's own writes by a watch round trip. When many jobs change at
// once, the next reconcile of a job often runs inside that window and acts
// on the stale view: it creates a worker pod it has just created (answered
// 409 AlreadyExists) or PUTs the status with the resourceVersion its last
// write replaced (answered 409 Conflict and retried with backoff). Both are
// harmless but are wasted requests exactly when the API server is busiest.
//
// Contract:
//   * Pods: ExpectCreated(job, name) after a successful create. Until the
//     pods cache shows that name for the job, or `ttl` passes (a create
//     whose watch event was lost must not block the pod forever), Pending()
//     lists it, and the reconciler does not create it again.
//   * Job status: WroteJob(uid, replaced, written) after a successful PUT.
//     Freshest(uid, cached) returns `written` while the cache still holds the
//     version that write replaced (`replaced`), else `cached` (the cache has
//     caught up, or someone else changed the job: then the cache is the
//     truth and the written copy is dropped). resourceVersions are only
//     compared for equality, as the API asks.
//   * Forget(uid) when a job is finished, ForgetKey("ns/name") when it is
//     gone from the cache (its uid is no longer known then).
//
// Thread-safety: all methods may be called concurrently (reconciles of
// different jobs run in parallel).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "khorovod/util/mutex.h"
#include "kube/informer.h"

namespace khorovod::op {

class WriteExpectations {
 public:
  using Clock = std::chrono::steady_clock;
  explicit WriteExpectations(std::chrono::milliseconds ttl = std::chrono::seconds(30))
      : ttl_(ttl) {}

  void ExpectCreated(const std::string& job_uid, const std::string& job_key,
                     const std::string& pod_name, Clock::time_point now = Clock::now());
  // Pod names created for the job that `observed` (the names the cache shows)
  // lacks and that are younger than the ttl; forgets the others.
  std::set<std::string> Pending(const std::string& job_uid, const std::set<std::string>& observed,
                                Clock::time_point now = Clock::now());

  void WroteJob(const std::string& job_uid, const std::string& job_key,
                const std::string& replaced_version, kube::ObjectPtr written);
  // `cached` is the job as the cache holds it (its uid is read from it).
  kube::ObjectPtr Freshest(kube::ObjectPtr cached);

  void Forget(const std::string& job_uid);
  void ForgetKey(const std::string& job_key);

 private:
  struct Job {
    std::string key;                                   // namespace/name
    std::map<std::string, Clock::time_point> created;  // pod name -> when
    std::string replaced_version;                      // of the last status write, with
    kube::ObjectPtr written;                           // the object it returned (or null)
  };
  void DropIfEmpty(std::map<std::string, Job>::iterator it) REQUIRES(mu_);

  const std::chrono::milliseconds ttl_;
  Mutex mu_;
  std::map<std::string, Job> jobs_ GUARDED_BY(mu_);  // by job uid
};

}  // namespace khorovod::op
