// NodeHealth: whether a node that runs a job's pods is lost, and since when,
// read from the Node object the node lifecycle controller maintains. A node
// is lost when its Ready condition is not True (False: the kubelet says it is
// unhealthy; Unknown: the kubelet stopped reporting) or when it carries the
// node.kubernetes.io/unreachable or node.kubernetes.io/not-ready taint. It is
// lost since the earliest of the Ready condition's lastTransitionTime and the
// taints' timeAdded; without either timestamp the time is unknown and the
// planner waits for the taint eviction instead of guessing.
//
// CachedNode keeps only those fields in the operator's node cache.
//
// Thread-safety: pure functions over plain values.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "api/horovodjob.h"

namespace khorovod::op {

inline constexpr const char* kTaintUnreachable = "node.kubernetes.io/unreachable";
inline constexpr const char* kTaintNotReady = "node.kubernetes.io/not-ready";

struct NodeHealth {
  bool lost = false;
  std::optional<std::chrono::system_clock::time_point> since;  // lost only
  std::string why;  // "Ready=Unknown (NodeStatusUnknown)", "taint node.kubernetes.io/unreachable"
};

NodeHealth NodeHealthOf(const Json& node);
Json CachedNode(const Json& node);

}  // namespace khorovod::op
