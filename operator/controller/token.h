// NewToken: a job's rendezvous token, 32 random bytes from OpenSSL,
// hex-encoded. nullopt when the random generator fails (the caller retries
// or falls back; nothing throws).
//
// Thread-safety: reentrant (OpenSSL's RAND_bytes is thread-safe).
#pragma once

#include <optional>
#include <string>

namespace khorovod::op {

std::optional<std::string> NewToken();

}  // namespace khorovod::op
