// Defaults for HorovodJob fields the user left out. The CRD schema declares
// the same defaults, so the API server normally fills them in first; these
// keep the operator correct for objects stored before a default existed.
#include <algorithm>

#include "api/horovodjob.h"

namespace khorovod::op {

int32_t TemplateGpus(const Json& pod_template) {
  if (!pod_template.is_object()) return 0;
  const Json spec = pod_template.value("spec", Json::object());
  const Json containers =
      spec.is_object() ? spec.value("containers", Json::array()) : Json::array();
  if (!containers.is_array() || containers.empty() || !containers[0].is_object()) return 0;
  const Json resources = containers[0].value("resources", Json::object());
  if (!resources.is_object()) return 0;
  // Extended resources are whole numbers; a request alone must equal the
  // limit the API server defaults from it.
  for (const char* kind : {"limits", "requests"}) {
    const Json list = resources.value(kind, Json::object());
    if (!list.is_object() || !list.contains(kGpuResource)) continue;
    const Json& q = list[kGpuResource];
    if (q.is_number_integer() && q.get<int64_t>() >= 0 && q.get<int64_t>() <= 1024)
      return q.get<int32_t>();
    if (!q.is_string()) return -1;
    const std::string text = q.get<std::string>();
    if (text.empty() || text.size() > 4 ||
        text.find_first_not_of("0123456789") != std::string::npos)
      return -1;
    return std::stoi(text);
  }
  return 0;
}

Placement EffectivePlacement(const HorovodJobSpec& spec) {
  if (spec.scheduling.placement) return *spec.scheduling.placement;
  return spec.gpus_per_worker > 0 ? Placement::kPack : Placement::kSpread;
}

void ApplyDefaults(HorovodJobSpec& spec) {
  spec.gpus_per_worker = std::max(0, TemplateGpus(spec.worker_template));
  // One training process per GPU unless the user said otherwise.
  if (!spec.slots_per_worker_set && spec.gpus_per_worker > 0)
    spec.slots_per_worker = spec.gpus_per_worker;
  if (spec.rendezvous.image.empty() && spec.worker_template.is_object()) {
    const Json& containers =
        spec.worker_template.value("spec", Json::object()).value("containers", Json::array());
    if (containers.is_array() && !containers.empty() && containers[0].is_object())
      spec.rendezvous.image = containers[0].value("image", "");
  }
}

}  // namespace khorovod::op
