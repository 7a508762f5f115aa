// Reading and setting HorovodJob status conditions with Kubernetes'
// conventions: an absent condition means False, and lastTransitionTime moves
// only when a condition's status flips (so a steady job writes no new
// status). Types are the condition::k* names of api/phase.h.
//
// Thread-safety: pure functions on the caller's value.
#pragma once

#include <string>

#include "api/horovodjob.h"

namespace khorovod::op {

bool IsTrue(const HorovodJobStatus& status, const std::string& type);

// Sets `type` to `value` with reason and message; `now` is RFC 3339. A False
// condition that is absent stays absent.
void SetCondition(HorovodJobStatus& status, const std::string& type, bool value,
                  const std::string& reason, const std::string& message, const std::string& now);

}  // namespace khorovod::op
