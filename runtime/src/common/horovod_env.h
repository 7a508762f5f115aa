// Horovod's HOROVOD_* settings, honoured as aliases of the KHOROVOD_* ones so
// that jobs written for Horovod keep their tuning.
//
// Contract: MergeHorovodAliases(vars, horovod) adds to `vars` (KHOROVOD_*)
// the translation of every HOROVOD_* variable in `horovod` that has an
// equivalent here, unless `vars` already sets it (ours win). It returns the
// HOROVOD_* names that have no meaning here, sorted, for one warning.
// Values keep Horovod's units, which are ours (bytes, milliseconds for the
// cycle time, seconds for timeouts); operation names are lowercased
// (HOROVOD_GPU_OPERATIONS=NCCL means nccl).
//
// Thread-safety: pure function.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace khorovod {

std::vector<std::string> MergeHorovodAliases(std::map<std::string, std::string>* vars,
                                             const std::map<std::string, std::string>& horovod);

}  // namespace khorovod
