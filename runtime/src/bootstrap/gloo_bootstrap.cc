#include "bootstrap/gloo_bootstrap.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <filesystem>

namespace khorovod {

StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(const Config& config,
                                                            const std::string& generation) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = config.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);

    std::unique_ptr<gloo::rendezvous::Store> base;
    if (config.store_path.empty()) {
      if (config.size != 1) return Status::InvalidArgument("a store path is required when size > 1");
      base = std::make_unique<gloo::rendezvous::HashStore>();
    } else {
      std::error_code ec;
      if (!std::filesystem::is_directory(config.store_path, ec)) {
        return Status::InvalidArgument("KHOROVOD_STORE_PATH '" + config.store_path +
                                       "' is not a directory");
      }
      base = std::make_unique<gloo::rendezvous::FileStore>(config.store_path);
    }
    gloo::rendezvous::PrefixStore store(config.job_id + "/" + generation, *base);

    auto context = std::make_shared<gloo::rendezvous::Context>(config.rank, config.size);
    context->setTimeout(config.transport_timeout);
    context->connectFullMesh(store, device);
    return std::shared_ptr<gloo::Context>(context);
  } catch (const std::exception& e) {
    return Status::Unavailable("could not connect rank " + std::to_string(config.rank) + " of " +
                               std::to_string(config.size) + " to its peers: " + e.what());
  }
}

}  // namespace khorovod
