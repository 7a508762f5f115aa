// Defaults for HorovodJob fields the user left out. The CRD schema declares
// the same defaults, so the API server normally fills them in first; these
// keep the operator correct for objects stored before a default existed.
#include "api/horovodjob.h"

namespace khorovod::op {

void ApplyDefaults(HorovodJobSpec& spec) {
  if (spec.rendezvous.image.empty() && spec.worker_template.is_object()) {
    const Json& containers = spec.worker_template.value("spec", Json::object()).value("containers", Json::array());
    if (containers.is_array() && !containers.empty() && containers[0].is_object())
      spec.rendezvous.image = containers[0].value("image", "");
  }
}

}  // namespace khorovod::op
