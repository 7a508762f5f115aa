// Host address: the IPv4 addresses a multi-host khorovodrun job uses.
//
// Remote workers and the launcher's rendezvous server must meet on addresses
// every host can reach. khorovodrun names a remote host's workers by the
// address the host's name resolves to here (the address ssh reaches it on),
// and binds its rendezvous server to the address this machine routes to the
// hosts from (or to a chosen network interface's address).
//
// Contract: every function is a pure query of the resolver, the routing table
// or the interface list; none sends a packet (RouteSourceAddress connects a
// UDP socket, which only selects a route). Errors are kInvalidArgument (no such
// host or interface, no IPv4 address) or kUnavailable (a system call failed),
// with a message naming the host or interface.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <string>
#include <vector>

#include "khorovod/status.h"

namespace khorovod::launcher {

// The first IPv4 address `host` (a name or a dotted quad) resolves to.
StatusOr<std::string> ResolveIpv4(const std::string& host);

// The source address this machine uses to reach IPv4 `destination`.
StatusOr<std::string> RouteSourceAddress(const std::string& destination);

// The IPv4 address of network interface `name` on this machine.
StatusOr<std::string> InterfaceIpv4(const std::string& name);

// The IPv4 addresses of this machine's interfaces.
std::vector<std::string> LocalIpv4Addresses();

// The first interface of `names` that has an IPv4 address here, and that address.
struct ChosenInterface {
  std::string name;
  std::string address;
};
StatusOr<ChosenInterface> FirstInterfaceWithIpv4(const std::vector<std::string>& names);

}  // namespace khorovod::launcher
