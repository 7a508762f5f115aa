// ObjectWriter: the idempotent writes the reconciler makes, with Kubernetes
// answers that mean "already so" counted as success:
//   - EnsureCreated: POST; AlreadyExists is success (names are deterministic).
//   - DeletePod: DELETE preconditioned on the pod's UID (only the incarnation
//     the plan saw); NotFound and Conflict (another incarnation) are success.
//     `force` deletes with grace period 0: the API object goes at once,
//     without the kubelet's confirmation (for pods of a lost node).
//   - ForEachParallel: fans a job's pod writes out over up to `parallelism`
//     threads (large jobs create thousands of pods) and returns the first
//     error after every write has been tried.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <string>

#include "kube/resource.h"
#include "kube/rest_client.h"

namespace khorovod::op {

class ObjectWriter {
 public:
  ObjectWriter(kube::RestClient& client, int parallelism)
      : client_(client), parallelism_(parallelism) {}

  // `created` (optional) tells whether this call made the object.
  kube::ApiStatus EnsureCreated(const kube::ResourceType& type, const std::string& ns,
                                const kube::Json& object, bool* created = nullptr);
  kube::ApiStatus DeletePod(const std::string& ns, const std::string& name, const std::string& uid,
                            bool force = false);
  kube::ApiStatus ForEachParallel(size_t n, const std::function<kube::ApiStatus(size_t)>& op);

 private:
  kube::RestClient& client_;
  const int parallelism_;
};

}  // namespace khorovod::op
