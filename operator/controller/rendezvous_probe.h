// ProbeRendezvousGeneration: reads the current generation of a job's
// rendezvous server from its metrics endpoint (unauthenticated, read-only),
// so HorovodJob status can show how often the ring has re-formed.
//
// Best-effort by design: any failure (unreachable pod, timeout, unexpected
// text) yields nullopt and the status keeps its last known value. The call
// is bounded by `timeout` for connect and read.
//
// Thread-safety: reentrant.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace khorovod::op {

std::optional<int64_t> ProbeRendezvousGeneration(const std::string& pod_ip, int metrics_port,
                                                 std::chrono::milliseconds timeout);

// Extracts khorovod_rendezvous_generation from a metrics exposition.
std::optional<int64_t> ParseRendezvousGeneration(const std::string& exposition);

}  // namespace khorovod::op
