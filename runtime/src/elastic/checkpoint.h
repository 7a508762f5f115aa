// Checkpoint files of an elastic State: the committed tensors and counters of
// one commit, so that a job that loses every worker holding the state can
// resume from disk instead of from its start.
//
// Format (host byte order; a checkpoint is read back on the same kind of
// machine): the magic line "khorovod-elastic-checkpoint 1\n", then the
// commit serial (int64), the counter count (uint32) and per counter its
// name (uint32 length + bytes) and value (int64), then the tensor count
// (uint32) and per tensor its name and its bytes (uint64 length + bytes).
// Writes go to a temporary file renamed over the target, so a reader sees
// the previous checkpoint or the new one, never half of one.
//
// Thread-safety: free functions over caller-owned data; concurrent writers
// of one path must be avoided by the caller (State writes from one rank).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "khorovod/status.h"

namespace khorovod::elastic {

struct CheckpointTensor {
  std::string name;
  std::vector<std::byte> bytes;
};

struct CheckpointData {
  int64_t serial = 0;
  std::map<std::string, int64_t> counters;
  std::vector<CheckpointTensor> tensors;
};

Status WriteCheckpoint(const std::string& path, const CheckpointData& data);

// kInvalidArgument when there is no readable file at `path`, or it is not a
// checkpoint, or it is truncated.
StatusOr<CheckpointData> ReadCheckpoint(const std::string& path);

// The serial of the checkpoint at `path`, or 0 when there is none or it
// cannot be read (reading only the header).
int64_t PeekCheckpointSerial(const std::string& path);

}  // namespace khorovod::elastic
