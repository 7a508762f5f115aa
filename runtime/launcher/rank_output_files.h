// Rank output files: horovodrun's --output-filename layout.
//
// Horovod (horovod/runner/gloo_run.py) writes each rank's stdout and stderr
// to <dir>/rank.<rank>/stdout and <dir>/rank.<rank>/stderr, the rank padded
// with zeros to the width of size-1 so the directories sort in rank order,
// and still shows the output on the terminal. khorovodrun does the same.
//
// Contract: RankDirName(rank, size) is "rank.<padded rank>";
// OpenRankOutputFiles creates <dir> and <dir>/rank.N (mode 0755, existing
// ones are fine) and opens (truncating) both files, close-on-exec, or
// returns kInvalidArgument naming the path that failed.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <string>

#include "khorovod/status.h"
#include "launcher/unique_fd.h"

namespace khorovod::launcher {

struct RankOutputFiles {
  UniqueFd stdout_file;
  UniqueFd stderr_file;
};

std::string RankDirName(int rank, int size);
StatusOr<RankOutputFiles> OpenRankOutputFiles(const std::string& dir, int rank, int size);

}  // namespace khorovod::launcher
