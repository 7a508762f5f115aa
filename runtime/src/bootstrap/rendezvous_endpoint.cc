#include "bootstrap/rendezvous_endpoint.h"

#include <exception>

namespace khorovod {

StatusOr<rendezvous::HttpEndpoint> ParseRendezvousEndpoint(const std::string& variable,
                                                           const std::string& addr,
                                                           const std::string& token) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument(variable + "='" + addr + "': expected HOST:PORT");
  }
  rendezvous::HttpEndpoint endpoint;
  endpoint.host = addr.substr(0, colon);
  try {
    endpoint.port = std::stoi(addr.substr(colon + 1));
  } catch (const std::exception&) {
    return Status::InvalidArgument(variable + "='" + addr + "': bad port");
  }
  endpoint.token = token;
  return endpoint;
}

}  // namespace khorovod
