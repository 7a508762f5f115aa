#include "launcher/horovodrun_flags.h"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <functional>

namespace khorovod::launcher {
namespace {

bool IsNumber(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return *end == '\0';
}

// horovodrun's stall-check flags (horovod/runner/launch.py) as the runtime's
// KHOROVOD_STALL_* variables.
std::optional<std::string> ApplyStallFlags(
    const HorovodrunFlags& f, const std::function<void(const char*, const std::string&)>& set) {
  if (f.no_stall_check) set("KHOROVOD_STALL_CHECK_DISABLE", "1");
  if (!f.stall_warning_seconds.empty()) {
    if (!IsNumber(f.stall_warning_seconds) ||
        std::strtod(f.stall_warning_seconds.c_str(), nullptr) <= 0) {
      return "--stall-check-warning-time-seconds expects a number > 0";
    }
    set("KHOROVOD_STALL_CHECK_TIME_SECONDS", f.stall_warning_seconds);
  }
  if (!f.stall_shutdown_seconds.empty()) {
    if (!IsNumber(f.stall_shutdown_seconds) ||
        std::strtod(f.stall_shutdown_seconds.c_str(), nullptr) < 0) {
      return "--stall-check-shutdown-time-seconds expects a number >= 0";
    }
    set("KHOROVOD_STALL_SHUTDOWN_TIME_SECONDS", f.stall_shutdown_seconds);
  }
  return std::nullopt;
}

}  // namespace

void AddHorovodrunFlags(CLI::App& app, HorovodrunFlags& f) {
  app.add_flag("--gloo", f.gloo, "horovodrun: accepted; Gloo is khorovod's CPU transport");
  app.add_flag("--verbose", f.verbose, "Print each worker's command and settings");
  app.add_option(
         "--start-timeout", f.start_timeout_s,
         "Seconds the ssh checks of remote hosts may take (default: HOROVOD_START_TIMEOUT or 30)")
      ->check(CLI::Range(1LL, 86400LL * 7));
  app.add_option("--network-interface,--network-interfaces", f.network_interface,
                 "Comma-separated NICs workers talk over; the first one every host has is used");
  app.add_option("-p,--ssh-port", f.ssh_port, "ssh port of remote hosts")
      ->check(CLI::Range(1, 65535));
  app.add_option("-i,--ssh-identity-file", f.ssh_identity_file, "ssh private key for remote hosts")
      ->check([](const std::string& p) {
        return p.empty() ? std::string("empty path") : std::string();
      });
  app.add_option("--fusion-threshold-mb", f.fusion_threshold_mb, "Sets KHOROVOD_FUSION_THRESHOLD");
  app.add_option("--cycle-time-ms", f.cycle_time_ms, "Sets KHOROVOD_CYCLE_TIME");
  app.add_option("--cache-capacity", f.cache_capacity, "Sets KHOROVOD_CACHE_CAPACITY");
  app.add_flag("--disable-cache", f.disable_cache,
               "Do not use or update the cache of ssh checks (~/.khorovod/ssh-checks, 60 minutes)");
  app.add_option("--timeline-filename", f.timeline_filename, "Sets KHOROVOD_TIMELINE");
  app.add_option("--gloo-timeout-seconds", f.gloo_timeout_seconds, "Sets KHOROVOD_TIMEOUT_SECONDS");
  app.add_option("--log-level", f.log_level,
                 "horovodrun: TRACE..WARNING show every runtime message (all are warnings or "
                 "errors); ERROR/FATAL refused")
      ->check(
          CLI::IsMember({"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL"}, CLI::ignore_case));
  app.add_flag(
      "--log-without-timestamp,--log-hide-timestamp,--no-timeline-mark-cycles,--stall-check",
      f.defaults, "horovodrun: accepted; what khorovod does anyway");
  app.add_flag("--no-stall-check", f.no_stall_check, "Sets KHOROVOD_STALL_CHECK_DISABLE=1");
  app.add_option("--stall-check-warning-time-seconds", f.stall_warning_seconds,
                 "Sets KHOROVOD_STALL_CHECK_TIME_SECONDS (default 60)");
  app.add_option("--stall-check-shutdown-time-seconds", f.stall_shutdown_seconds,
                 "Sets KHOROVOD_STALL_SHUTDOWN_TIME_SECONDS (default 0: never)");
}

std::optional<std::string> ApplyHorovodrunFlags(const HorovodrunFlags& f, LaunchOptions& opts) {
  std::string names = f.network_interface;
  for (std::size_t comma = names.find(','); !names.empty(); comma = names.find(',')) {
    const std::string name = names.substr(0, comma);
    if (name.empty())
      return "--network-interface " + f.network_interface + ": empty interface name";
    opts.network_interfaces.push_back(name);
    names = comma == std::string::npos ? std::string() : names.substr(comma + 1);
  }
  opts.ssh_port = f.ssh_port;
  opts.ssh_identity_file = f.ssh_identity_file;
  opts.start_timeout = std::chrono::seconds(f.start_timeout_s);
  opts.disable_cache = f.disable_cache;
  opts.verbose = f.verbose;
  auto set = [&](const char* name, const std::string& value) {
    opts.extra_env.push_back(EnvSpec{name, value});
  };
  if (!f.fusion_threshold_mb.empty()) {
    if (!IsNumber(f.fusion_threshold_mb)) return "--fusion-threshold-mb expects a number";
    const double mb = std::strtod(f.fusion_threshold_mb.c_str(), nullptr);
    if (mb < 0) return "--fusion-threshold-mb must be >= 0";
    set("KHOROVOD_FUSION_THRESHOLD", std::to_string(static_cast<long long>(mb * 1024 * 1024)));
  }
  if (!f.cycle_time_ms.empty()) {
    if (!IsNumber(f.cycle_time_ms)) return "--cycle-time-ms expects a number";
    set("KHOROVOD_CYCLE_TIME", f.cycle_time_ms);
  }
  if (!f.cache_capacity.empty()) set("KHOROVOD_CACHE_CAPACITY", f.cache_capacity);
  if (!f.timeline_filename.empty()) set("KHOROVOD_TIMELINE", f.timeline_filename);
  if (!f.gloo_timeout_seconds.empty()) {
    if (!IsNumber(f.gloo_timeout_seconds) ||
        std::strtod(f.gloo_timeout_seconds.c_str(), nullptr) <= 0) {
      return "--gloo-timeout-seconds expects a number > 0";
    }
    set("KHOROVOD_TIMEOUT_SECONDS", f.gloo_timeout_seconds);
  }
  if (!f.log_level.empty()) {
    // The runtime's messages are all warnings or errors and always shown,
    // which is what TRACE..WARNING (Horovod's default) ask for.
    std::string level = f.log_level;
    for (char& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (level == "ERROR" || level == "FATAL") {
      return "--log-level " + level +
             ": khorovod cannot silence its warnings yet (it has no log levels; "
             "TRACE, DEBUG, INFO and WARNING show every message, as they would here)";
    }
  }
  return ApplyStallFlags(f, set);
}

}  // namespace khorovod::launcher
