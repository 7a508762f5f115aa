// Launch options: the khorovodrun command line, parsed in one place.
//
//   khorovodrun -np N [--job-id ID] [--hostname HOST] [--grace-period-ms MS]
//               [--min-np N] [--max-np N] [--reset-limit N] [--elastic-timeout S]
//               [-H host:slots,... | --host-discovery-script PATH [--discovery-interval-ms MS]]
//               [--hostfile FILE] [--slots-per-host N] [--blacklist-cooldown-range MIN MAX]
//               [--output-filename DIR] [--run-hosts-locally] [-p PORT] [-i FILE]
//               [horovodrun's flags: horovodrun_flags.h]
//               [-x NAME[=VALUE]]... [--] program [args...]
//
// Everything from the program name onwards belongs to the program, including
// arguments that look like launcher options (`khorovodrun -np 2 ./t -np 3`
// passes `-np 3` to ./t). `-np` is accepted in the single-dash horovodrun
// spelling as well as `--np` / `--num-proc`.
//
// Parsing is pure (no environment access, no process state) so it can be unit
// tested; errors and --help text go to the streams the caller provides.
//
// Thread-safety: pure functions over their arguments; safe from any thread.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "khorovod/status.h"

namespace khorovod::launcher {

// One `-x` argument. `-x NAME=VALUE` sets NAME to VALUE in every worker;
// `-x NAME` (no value) forwards the launcher's own value of NAME (horovodrun /
// mpirun semantics).
struct EnvSpec {
  std::string name;
  std::optional<std::string> value;

  bool operator==(const EnvSpec&) const = default;
};

struct LaunchOptions {
  int num_proc = 0;
  // Empty means "generate a random one" (see GenerateJobId()); the
  // launcher resolves it before starting workers so all ranks agree.
  std::string job_id;
  std::string hostname = "127.0.0.1";
  // How long workers get between SIGTERM and SIGKILL when the job is torn
  // down (a worker failed, or the launcher itself was interrupted).
  std::chrono::milliseconds grace_period{3000};
  std::vector<EnvSpec> extra_env;
  // Elastic mode, on when --min-np or --max-np is given: workers meet
  // through a rendezvous server khorovodrun runs in-process, failed workers
  // are replaced, and the job survives while at least min-np remain.
  int min_np = 0;  // 0: not set
  int max_np = 0;  // 0: not set
  int reset_limit = 100;
  std::chrono::seconds elastic_timeout{600};
  // -H host:slots,...; empty: this host with -np slots. Hosts other than
  // this machine run their workers over ssh (remote_hosts.h).
  std::string hosts;
  // Elastic: an executable printing `host:slots` lines (host_discovery.h),
  // run at start and every discovery_interval; implies elastic mode.
  std::string host_discovery_script;
  std::chrono::milliseconds discovery_interval{1000};
  // --slots-per-host / --slots: slots of a discovered host whose line gives
  // none (Horovod's meaning); 0: one slot.
  int slots_per_host = 0;
  // --blacklist-cooldown-range MIN MAX (seconds): a host whose worker failed
  // leaves the job for a cooldown that doubles with each failure, between
  // MIN and MAX (host_blacklist.h); both 0: blacklisted for good, as Horovod.
  int cooldown_min_s = 0;
  int cooldown_max_s = 0;
  // --run-hosts-locally (khorovod's own): host names from -H, --hostfile or
  // the discovery script name groups of slots on this machine, so Horovod's
  // multi-host scenarios run here. Workers get HOROVOD_HOSTNAME=<that name>.
  bool hosts_run_locally = false;
  // --output-filename DIR: each rank's stdout and stderr are also written to
  // DIR/rank.<rank, zero-padded>/stdout and .../stderr (Horovod's layout).
  std::string output_filename;
  // --verbose: the launcher prints each worker's command and settings.
  bool verbose = false;
  // Remote hosts (remote_hosts.h): -p/--ssh-port (0: ssh's default),
  // -i/--ssh-identity-file, --start-timeout (0: HOROVOD_START_TIMEOUT or
  // 30 s, as horovodrun) bounding the ssh checks, --disable-cache of them,
  // --network-interface(s) (comma-separated, in order of preference).
  int ssh_port = 0;
  std::string ssh_identity_file;
  std::chrono::seconds start_timeout{0};
  bool disable_cache = false;
  std::vector<std::string> network_interfaces;
  bool elastic() const { return min_np > 0 || max_np > 0 || !host_discovery_script.empty(); }
  // argv of the worker program; never empty after a successful parse.
  std::vector<std::string> command;
};

struct ParseOutcome {
  // Set when the launcher should go on to run the job.
  std::optional<LaunchOptions> options;
  // When `options` is empty: the process exit code (0 after --help, CLI11's
  // non-zero code after a usage error, whose message is already printed).
  int exit_code = 0;
};

// `args` excludes argv[0].
ParseOutcome ParseLaunchOptions(const std::vector<std::string>& args, std::ostream& out,
                                std::ostream& err);

// Checks a -H list's syntax and that it offers `needed` slots (kInvalidArgument).
Status CheckHostSlots(const std::string& hosts, int needed);

// Checks one `-x` value (kInvalidArgument for an invalid spec).
Status ValidateEnvSpec(const std::string& spec);
EnvSpec ParseEnvSpec(const std::string& spec);  // precondition: validate_env_spec passed

// 16 lowercase hex digits from std::random_device.
StatusOr<std::string> GenerateJobId();

}  // namespace khorovod::launcher
