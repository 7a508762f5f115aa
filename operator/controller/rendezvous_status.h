// RendezvousStatus: what the operator learns from a job's rendezvous server,
// read from its unauthenticated status endpoint GET /v1/status on the
// rendezvous port (runtime/rendezvous/README.md). The endpoint carries only
// counts (no names, addresses or keys), so the operator needs no token and no
// access to the job's Secret.
//
// FetchRendezvousStatus is bounded by `timeout` for connect and read, and
// best-effort: any failure (unreachable pod, timeout, an unexpected body)
// yields nullopt.
//
// Thread-safety: reentrant.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace khorovod::op {

struct RendezvousStatus {
  int64_t generation = 0;  // 1 after the first ring forms, +1 per re-formation
  std::string state;       // forming | running | reforming | failed
  int64_t world_size = 0;  // processes in the current generation
  int64_t pending = 0;     // registered workers waiting to join
};

// Parses the endpoint's JSON body; nullopt unless it has a non-negative
// integer "generation".
std::optional<RendezvousStatus> ParseRendezvousStatus(const std::string& body);

std::optional<RendezvousStatus> FetchRendezvousStatus(const std::string& pod_ip, int port,
                                                      std::chrono::milliseconds timeout);

}  // namespace khorovod::op
