#include "launcher/host_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launcher/unique_fd.h"

namespace khorovod::launcher {
namespace {

std::string Dotted(const in_addr& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address, text, sizeof text);
  return text;
}

}  // namespace

StatusOr<std::string> ResolveIpv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Status::InvalidArgument("host '" + host +
                                   "' has no IPv4 address: " + ::gai_strerror(rc));
  }
  const std::string address =
      Dotted(reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr);
  ::freeaddrinfo(found);
  return address;
}

StatusOr<std::string> RouteSourceAddress(const std::string& destination) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);  // any port: a UDP connect sends nothing
  if (::inet_pton(AF_INET, destination.c_str(), &to.sin_addr) != 1) {
    return Status::InvalidArgument("'" + destination + "' is not an IPv4 address");
  }
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) return Status::Unavailable(std::string("socket: ") + std::strerror(errno));
  if (::connect(sock.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    return Status::InvalidArgument("no route to " + destination + ": " + std::strerror(errno));
  }
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    return Status::Unavailable(std::string("getsockname: ") + std::strerror(errno));
  }
  return Dotted(local.sin_addr);
}

StatusOr<std::string> InterfaceIpv4(const std::string& name) {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0)
    return Status::Unavailable(std::string("getifaddrs: ") + std::strerror(errno));
  std::string address;
  for (const ifaddrs* i = all; i != nullptr && address.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || name != i->ifa_name)
      continue;
    address = Dotted(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr);
  }
  ::freeifaddrs(all);
  if (address.empty())
    return Status::InvalidArgument("network interface '" + name + "' has no IPv4 address here");
  return address;
}

std::vector<std::string> LocalIpv4Addresses() {
  std::vector<std::string> addresses;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return addresses;
  for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET) {
      addresses.push_back(Dotted(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr));
    }
  }
  ::freeifaddrs(all);
  return addresses;
}

StatusOr<ChosenInterface> FirstInterfaceWithIpv4(const std::vector<std::string>& names) {
  std::string tried;
  for (const std::string& name : names) {
    StatusOr<std::string> address = InterfaceIpv4(name);
    if (address.ok()) return ChosenInterface{name, *address};
    tried += (tried.empty() ? "" : ", ") + name;
  }
  return Status::InvalidArgument("none of the network interfaces " + tried +
                                 " has an IPv4 address here");
}

}  // namespace khorovod::launcher
