// RandomHex: identifiers and secrets made of random lowercase hex digits
// (job ids, rendezvous tokens, server ids), from std::random_device.
//
// Errors: kUnavailable when the system has no random source
// (std::random_device throws); never throws itself.
//
// Thread-safety: safe to call from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "khorovod/status.h"

namespace khorovod {

StatusOr<std::string> RandomHex(size_t digits);

}  // namespace khorovod
