// horovodrun's common flags on khorovodrun, so Horovod command lines run
// unchanged where they make sense here and fail with a clear reason where
// they do not.
//
// Contract: add_horovodrun_flags registers the flags on the CLI11 app;
// after parsing, apply_horovodrun_flags folds them into LaunchOptions
// (tunables become KHOROVOD_* variables in every worker, as horovodrun sets
// HOROVOD_* ones) or returns the message of a flag that cannot be honoured:
//   --gloo                          accepted (Gloo is the CPU transport)
//   --verbose                       the launcher prints each worker's command
//                                   and settings (LaunchOptions::verbose)
//   --start-timeout S               bound on the ssh checks of remote hosts
//                                   (ssh_checks.h); none on local hosts, as horovodrun
//   --disable-cache                 neither read nor write the cache of those checks
//   --network-interface(s) A,B      the NICs workers may talk over, in order of
//                                   preference; the first one every host has is used
//   -p/--ssh-port, -i/--ssh-identity-file  ssh's port and key for remote hosts
//   --fusion-threshold-mb, --cycle-time-ms, --cache-capacity,
//   --timeline-filename, --gloo-timeout-seconds  worker settings
//   --log-level TRACE..WARNING      accepted (every runtime message is a
//                                   warning or an error); ERROR, FATAL refused
//   --log-without-timestamp, --no-timeline-mark-cycles, --stall-check
//                                   Horovod's defaults, which are khorovod's
// Flags khorovodrun refuses are in refused_flags.h.
//   --no-stall-check, --stall-check-warning-time-seconds S,
//   --stall-check-shutdown-time-seconds S  the stall check (KHOROVOD_STALL_*)
//
// Thread-safety: used during argument parsing only.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "launcher/launch_options.h"

namespace khorovod::launcher {

struct HorovodrunFlags {
  bool gloo = false;
  bool verbose = false;
  bool disable_cache = false;
  bool no_stall_check = false;
  bool defaults = false;  // flags that ask for what is already the case
  std::string gloo_timeout_seconds;
  std::string stall_warning_seconds;
  std::string stall_shutdown_seconds;
  long long start_timeout_s = 0;  // 0: not given
  std::string network_interface;
  int ssh_port = 0;
  std::string ssh_identity_file;
  std::string fusion_threshold_mb;
  std::string cycle_time_ms;
  std::string cache_capacity;
  std::string timeline_filename;
  std::string log_level;
};

void AddHorovodrunFlags(CLI::App& app, HorovodrunFlags& flags);
std::optional<std::string> ApplyHorovodrunFlags(const HorovodrunFlags& flags, LaunchOptions& opts);

}  // namespace khorovod::launcher
