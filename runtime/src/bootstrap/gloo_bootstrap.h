// Connects this process to its peers: a full mesh of Gloo TCP pairs, found
// through a key-value store (Gloo's FileStore in the job's store directory,
// namespaced by job id; generation 0 of khorovodrun's rendezvous server when
// config.store_addr is set (multi-host static jobs); an in-process store for
// a single rank). Gloo binds config.network_interface's address when set,
// else config.hostname's.
//
// The elastic rendezvous uses the HTTP server's per-generation store; the
// rest of the runtime only sees the connected gloo::Context.
//
// Thread-safety: a free function with no shared state.
#pragma once

#include <gloo/transport/tcp/attr.h>

#include <memory>
#include <string>

#include "khorovod/config.h"
#include "khorovod/status.h"

namespace gloo {
class Context;
}

namespace khorovod {

// `generation` namespaces the keys so that re-connecting the same job does
// not read stale addresses.
// The TCP device attributes for `config`: its network interface, else its hostname.
gloo::transport::tcp::attr GlooDeviceAttr(const Config& config);

StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(const Config& config,
                                                            const std::string& generation = "0");

}  // namespace khorovod
