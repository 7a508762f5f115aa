// NewToken: a job's rendezvous token, 64 random hex digits (256 bits) from
// the project's one generator (khorovod/util/random_hex.h, the system's
// random device). nullopt when it fails (the caller retries or falls back;
// nothing throws).
//
// Thread-safety: reentrant.
#pragma once

#include <optional>
#include <string>

namespace khorovod::op {

std::optional<std::string> NewToken();

}  // namespace khorovod::op
