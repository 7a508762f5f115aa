// The rendezvous server's address as workers are given it: "HOST:PORT"
// (KHOROVOD_RENDEZVOUS_ADDR for elastic jobs, KHOROVOD_STORE_ADDR for
// khorovodrun's multi-host static jobs) and the job's token.
//
// Contract: ParseRendezvousEndpoint returns the endpoint, or kInvalidArgument
// naming `variable` when `addr` is not HOST:PORT with a numeric port.
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "http_json_client.h"
#include "khorovod/status.h"

namespace khorovod {

StatusOr<rendezvous::HttpEndpoint> ParseRendezvousEndpoint(const std::string& variable,
                                                           const std::string& addr,
                                                           const std::string& token);

}  // namespace khorovod
