// DescribeBackend: what a registered backend reports about the library it
// runs on, without creating it. For "nccl": version ("2.28.9"),
// version_code ("22809"), path (the libnccl.so.2 loaded, see
// docs/gpu.md "Which NCCL"), and shrink/grow/revoke/multi_rank_gpu ("1" or
// "0": the fault-tolerance calls the backend will use). An error when the
// backend cannot run here (no NCCL >= 2.27 found: the message lists what
// was tried), kInvalidArgument for an unknown backend; an empty map for a
// backend that reports nothing.
//
// Thread-safety: may be called from any thread.
#pragma once

#include <map>
#include <string>

#include "khorovod/config.h"
#include "khorovod/status.h"

namespace khorovod {

StatusOr<std::map<std::string, std::string>> DescribeBackend(const std::string& backend,
                                                             const Config& config);

}  // namespace khorovod
