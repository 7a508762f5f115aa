#include "controller/job_conditions.h"

namespace khorovod::op {

bool IsTrue(const HorovodJobStatus& s, const std::string& type) {
  for (const auto& c : s.conditions)
    if (c.type == type) return c.status == "True";
  return false;
}

void SetCondition(HorovodJobStatus& s, const std::string& type, bool value,
                  const std::string& reason, const std::string& message, const std::string& now) {
  const std::string status = value ? "True" : "False";
  for (auto& c : s.conditions) {
    if (c.type != type) continue;
    if (c.status != status) c.last_transition_time = now;
    c.status = status;
    c.reason = reason;
    c.message = message;
    return;
  }
  if (value) s.conditions.push_back({type, status, reason, message, now});
}

}  // namespace khorovod::op
