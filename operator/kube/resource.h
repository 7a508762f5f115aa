// ResourceType and object paths: where a kind of object lives in the API.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <string>

namespace khorovod::kube {

struct ResourceType {
  std::string group_version;  // "v1" for the core group, else "group/version"
  std::string plural;         // "pods", "horovodjobs", ...
  bool namespaced = true;

  // "/api/v1" or "/apis/<group>/<version>"
  std::string Prefix() const {
    return group_version.find('/') == std::string::npos ? "/api/" + group_version
                                                        : "/apis/" + group_version;
  }
  // Collection path, in a namespace or across all of them ("" = all).
  std::string CollectionPath(const std::string& ns) const {
    if (!namespaced || ns.empty()) return Prefix() + "/" + plural;
    return Prefix() + "/namespaces/" + ns + "/" + plural;
  }
  std::string ObjectPath(const std::string& ns, const std::string& name) const {
    return CollectionPath(ns) + "/" + name;
  }
};

inline const ResourceType kPods{"v1", "pods", true};
inline const ResourceType kServices{"v1", "services", true};
inline const ResourceType kSecrets{"v1", "secrets", true};
inline const ResourceType kEvents{"v1", "events", true};
inline const ResourceType kNodes{"v1", "nodes", false};
inline const ResourceType kLeases{"coordination.k8s.io/v1", "leases", true};
inline const ResourceType kPodGroups{"scheduling.x-k8s.io/v1alpha1", "podgroups", true};
inline const ResourceType kPodDisruptionBudgets{"policy/v1", "poddisruptionbudgets", true};

}  // namespace khorovod::kube
