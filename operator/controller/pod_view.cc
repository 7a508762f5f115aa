#include "controller/pod_view.h"

#include "controller/builders.h"

namespace khorovod::op {

PodView View(const Json& pod) {
  PodView v;
  v.index = WorkerIndexOf(pod);
  const Json& meta = pod.at("metadata");
  v.name = meta.value("name", "");
  v.uid = meta.value("uid", "");
  v.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  const Json& st = pod.value("status", Json::object());
  v.phase = st.value("phase", "Pending");
  v.reason = st.value("reason", "");
  for (const auto& c : st.value("conditions", Json::array()))
    if (c.value("type", "") == "Ready" && c.value("status", "") == "True") v.ready = true;
  for (const auto& cs : st.value("containerStatuses", Json::array())) {
    const Json& state = cs.value("state", Json::object());
    if (!state.contains("terminated")) continue;
    int code = state["terminated"].value("exitCode", 0);
    if (v.exit_code <= 0) v.exit_code = code;
  }
  return v;
}

}  // namespace khorovod::op
