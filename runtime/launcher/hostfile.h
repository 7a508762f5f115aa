// Hostfile: horovodrun's --hostfile, for khorovodrun.
//
// A hostfile lists one host per line as `<host> slots=<N>` (Horovod's
// horovod/runner/common/util/hosts.py: parse_host_files). Blank lines and
// lines starting with '#' are skipped here; Horovod fails on them.
//
// Contract: HostfileToHosts returns the same list in -H form
// ("host:N,host:M") or kInvalidArgument naming the file and line when a line
// is not of that form or a slot count is not in 1..1000000; ParseHostfile
// does the same on text already read.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <string>

#include "khorovod/status.h"

namespace khorovod::launcher {

StatusOr<std::string> ParseHostfile(const std::string& text, const std::string& name_for_errors);
StatusOr<std::string> HostfileToHosts(const std::string& path);

}  // namespace khorovod::launcher
