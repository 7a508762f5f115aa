// What the operator's caches keep of the pods and services it owns.
//
// A pod as the API server returns it (spec with the full container template,
// status with every condition and container state, managedFields) is several
// kilobytes; the reconciler reads a dozen fields of it (pod_view.h and the
// rendezvous monitor's pod IP). The informers store only those, which is what
// keeps the operator's memory flat at thousands of pods. A field that a phase
// starts reading must be added here, or it will read as absent;
// cached_objects_test.cc checks that PodView sees the same through the trim.
//
// Thread-safety: pure functions.
#pragma once

#include "api/horovodjob.h"

namespace khorovod::op {

// metadata: name, namespace, uid, resourceVersion, labels, ownerReferences,
// deletionTimestamp and the avoided-nodes annotation. spec: nodeName only.
// status: phase, reason, podIP, the Ready condition, a False PodScheduled
// condition's message, each container's terminated exit code and the devices
// its allocatedResourcesStatus reports Unhealthy.
Json CachedPod(const Json& pod);

// metadata only (the reconciler checks that its services exist).
Json CachedService(const Json& service);

}  // namespace khorovod::op
