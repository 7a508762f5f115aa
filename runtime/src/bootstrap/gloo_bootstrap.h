// Connects this process to its peers: a full mesh of Gloo TCP pairs, found
// through a key-value store (Gloo's FileStore in the job's store directory,
// namespaced by job id; an in-process store for a single rank).
//
// The elastic work replaces the store with the HTTP rendezvous server; the
// rest of the runtime only sees the connected gloo::Context.
//
// Thread-safety: a free function with no shared state.
#pragma once

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
StatusOr<std::shared_ptr<gloo::Context>> ConnectGlooContext(const Config& config,
                                                            const std::string& generation = "0");

}  // namespace khorovod
