#include "khorovod/backend_info.h"

#include "backend/registry.h"

namespace khorovod {

StatusOr<std::map<std::string, std::string>> DescribeBackend(const std::string& backend,
                                                             const Config& config) {
  return BackendRegistry::Info(backend, config);
}

}  // namespace khorovod
