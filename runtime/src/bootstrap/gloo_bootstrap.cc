#include "bootstrap/gloo_bootstrap.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <filesystem>

#include "bootstrap/rendezvous_endpoint.h"
#include "http_store.h"

namespace khorovod {

gloo::transport::tcp::attr GlooDeviceAttr(const Config& config) {
  gloo::transport::tcp::attr attr;
  if (config.network_interface.empty()) {
    attr.hostname = config.hostname;
  } else {
    attr.iface = config.network_interface;
    attr.ai_family = AF_INET;  // the address khorovodrun checked on every host
  }
  return attr;
}

StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(const Config& config,
                                                            const std::string& generation) {
  try {
    auto device = gloo::transport::tcp::CreateDevice(GlooDeviceAttr(config));

    std::unique_ptr<gloo::rendezvous::Store> base;
    if (!config.store_addr.empty()) {
      StatusOr<rendezvous::HttpEndpoint> endpoint = ParseRendezvousEndpoint(
          "KHOROVOD_STORE_ADDR", config.store_addr, config.rendezvous_token);
      if (!endpoint.ok()) return endpoint.status();
      rendezvous::HttpStoreOptions options;
      options.timeout = config.transport_timeout;
      base = std::make_unique<rendezvous::HttpStore>(*endpoint, config.job_id, 0, options);
    } else if (config.store_path.empty()) {
      if (config.size != 1)
        return Status::InvalidArgument("a store path is required when size > 1");
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
