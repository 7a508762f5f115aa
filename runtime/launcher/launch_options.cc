#include "launcher/launch_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>

#include "khorovod/util/random_hex.h"
#include "launcher/horovodrun_flags.h"
#include "launcher/hostfile.h"
#include "launcher/refused_flags.h"
#include "launcher/worker_env.h"

namespace khorovod::launcher {
namespace {

bool IsEnvNameChar(char c, bool first) {
  const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  return first ? alpha : alpha || (c >= '0' && c <= '9');
}

// Job ids end up in file names and store keys, so keep them to a charset
// that is safe in both without quoting.
std::string ValidateJobId(const std::string& id) {
  if (id.empty()) return "job id must not be empty";
  const bool ok = std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
  return ok ? std::string() : "job id may only contain letters, digits, '-', '_' and '.'";
}

// CLI11's numeric range validators print their bounds as huge doubles; say
// what is wrong instead. Non-numbers pass here and fail CLI11's conversion.
CLI::Validator InRange(long long minimum, long long maximum, const std::string& what) {
  return CLI::Validator(
      [=](const std::string& text) {
        long long value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end != text.data() + text.size()) return std::string();
        if (value < minimum)
          return what + " must be at least " + std::to_string(minimum) + ", got " + text;
        if (value > maximum)
          return what + " must be at most " + std::to_string(maximum) + ", got " + text;
        return std::string();
      },
      std::to_string(minimum) + ".." + std::to_string(maximum));
}

// Bounds keep deadline arithmetic far from overflow; nobody needs more than a day.
constexpr long long kMaxGracePeriodMs = 24LL * 60 * 60 * 1000;

// CLI11 only allows one-character names after a single dash, but horovodrun
// users type `-np 4`. Rewrite that spelling to `--np` before parsing.
std::string NormalizeLauncherToken(const std::string& token) {
  return NormalizeSingleDashFlag(token);
}

// Index of the program name in `args`, or args.size() when there is none.
// The split is done here rather than by CLI11 because CLI11 post-processes
// positional values (it splits "[a,b]" and treats "{}" as an empty vector),
// and the program's arguments must reach it byte for byte. Arity comes from
// the CLI11 app itself, so the option table stays the single source of truth.
std::size_t FindProgramIndex(const CLI::App& app, const std::vector<std::string>& args,
                             bool& explicit_separator) {
  explicit_separator = false;
  std::size_t i = 0;
  while (i < args.size()) {
    const std::string token = NormalizeLauncherToken(args[i]);
    if (token == "--") {
      explicit_separator = true;
      return i + 1;
    }
    if (token.size() < 2 || token[0] != '-') return i;  // first positional: the program
    // `--name=value` and `-xVALUE` carry their value inline.
    const bool inline_value =
        token.rfind("--", 0) == 0 ? token.find('=') != std::string::npos : token.size() > 2;
    const CLI::Option* opt = app.get_option_no_throw(token);
    // Values that follow: one for most options, two for --blacklist-cooldown-range.
    const int values =
        inline_value || opt == nullptr ? 0 : std::max(0, opt->get_items_expected_min());
    i += 1 + static_cast<std::size_t>(values);  // unknown options are left for CLI11 to reject
  }
  return args.size();
}

}  // namespace

Status ValidateEnvSpec(const std::string& spec) {
  const std::string name = spec.substr(0, spec.find('='));
  if (name.empty())
    return Status::InvalidArgument("-x needs NAME or NAME=VALUE, got '" + spec + "'");
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!IsEnvNameChar(name[i], i == 0)) {
      return Status::InvalidArgument("'" + name + "' is not a valid environment variable name");
    }
  }
  if (IsContractVariable(name)) {
    return Status::InvalidArgument(
        name + " is set by khorovodrun itself and cannot be overridden with -x");
  }
  return Status::Ok();
}

EnvSpec ParseEnvSpec(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos) return EnvSpec{spec, std::nullopt};
  return EnvSpec{spec.substr(0, eq), spec.substr(eq + 1)};
}

StatusOr<std::string> GenerateJobId() { return RandomHex(16); }

// -H host:slots,... as horovodrun: names (local or remote, remote_hosts.h)
// with a positive slot count each, enough for the job.
Status CheckHostSlots(const std::string& hosts, int needed) {
  long long slots = 0;
  std::size_t start = 0;
  while (start <= hosts.size()) {
    const std::size_t end = std::min(hosts.find(',', start), hosts.size());
    const std::string entry = hosts.substr(start, end - start);
    const std::size_t colon = entry.rfind(':');
    if (entry.substr(0, colon).empty()) {
      return Status::InvalidArgument("-H " + hosts + ": empty host name in '" + entry + "'");
    }
    long long n = 1;
    if (colon != std::string::npos) {
      try {
        n = std::stoll(entry.substr(colon + 1));
      } catch (const std::exception&) {
        return Status::InvalidArgument("-H " + hosts + ": bad slot count in '" + entry + "'");
      }
    }
    if (n < 1) return Status::InvalidArgument("-H " + hosts + ": slot counts must be at least 1");
    slots += n;
    start = end + 1;
  }
  if (slots < needed) {
    return Status::InvalidArgument("-H " + hosts + " offers " + std::to_string(slots) +
                                   " slots but " + std::to_string(needed) + " workers are needed");
  }
  return Status::Ok();
}

namespace {

// Values CLI11 binds to that LaunchOptions holds in another form.
struct RawFlags {
  std::vector<std::string> env_specs;
  long long grace_ms = 0;
  long long elastic_timeout_s = 0;
  long long discovery_ms = 0;
  std::string program;
  std::string hostfile;
  std::vector<int> cooldown_range;
  HorovodrunFlags horovodrun;
  RefusedFlags refused;
};

void AddJobOptions(CLI::App& app, LaunchOptions& opts, RawFlags& raw) {
  app.add_option("--np,--num-proc", opts.num_proc, "Number of worker processes (-np N)")
      ->required()
      ->check(InRange(1, std::numeric_limits<int>::max(), "number of workers"));
  app.add_option("--job-id", opts.job_id, "Job id shared by all ranks (default: random hex)")
      ->check(CLI::Validator(ValidateJobId, "ID"));
  app.add_option("--hostname", opts.hostname, "Address the workers advertise to each other")
      ->capture_default_str()
      ->check([](const std::string& h) {
        return h.empty() ? std::string("hostname must not be empty") : std::string();
      });
  app.add_option("--grace-period-ms", raw.grace_ms,
                 "Time between SIGTERM and SIGKILL when tearing the job down")
      ->capture_default_str()
      ->check(InRange(0, kMaxGracePeriodMs, "grace period"));
  // Repeatable, but each -x takes exactly one value (allow_extra_args off),
  // so `-x FOO ./prog` never swallows the program name.
  app.add_option("-x,--env", raw.env_specs, "Set NAME=VALUE, or pass NAME through, in workers")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->type_name("NAME[=VALUE]")
      ->check([](const std::string& s) { return ValidateEnvSpec(s).message(); });
  app.add_option("program", raw.program, "Program to run, followed by its arguments")->required();
}

void AddElasticOptions(CLI::App& app, LaunchOptions& opts, RawFlags& raw) {
  app.add_option("--min-np,--min-num-proc", opts.min_np,
                 "Elastic: fewest workers the job runs with")
      ->check(InRange(1, std::numeric_limits<int>::max(), "--min-np"));
  app.add_option("--max-np,--max-num-proc", opts.max_np, "Elastic: most workers the job runs with")
      ->check(InRange(1, std::numeric_limits<int>::max(), "--max-np"));
  app.add_option("--reset-limit", opts.reset_limit,
                 "Elastic: worker replacements and re-formations before the job fails")
      ->capture_default_str()
      ->check(InRange(0, 1000000, "--reset-limit"));
  app.add_option("--elastic-timeout", raw.elastic_timeout_s,
                 "Elastic: seconds to wait for min-np workers before failing")
      ->capture_default_str()
      ->check(InRange(1, 86400 * 7, "--elastic-timeout"));
  auto* hosts_option = app.add_option("-H,--hosts", opts.hosts,
                                      "host:slots,... (hosts other than this one run over ssh)");
  app.add_option("--host-discovery-script", opts.host_discovery_script,
                 "Elastic: executable printing the available host:slots lines")
      ->excludes(hosts_option)
      ->check([](const std::string& p) {
        return p.empty() ? std::string("empty path") : std::string();
      });
  app.add_option("--hostfile", raw.hostfile, "File of '<host> slots=<N>' lines (as -H)")
      ->excludes(hosts_option);
  app.add_option("--slots-per-host,--slots", opts.slots_per_host,
                 "Slots of a discovered host whose line gives none")
      ->check(InRange(1, 1000000, "--slots-per-host"));
  app.add_option(
         "--blacklist-cooldown-range", raw.cooldown_range,
         "Elastic: MIN MAX seconds a host whose worker failed stays out (doubling per failure)")
      ->expected(2);
  app.add_flag("--run-hosts-locally", opts.hosts_run_locally,
               "Run every host's slots (-H, --hostfile, discovery) on this machine");
  app.add_option("--output-filename", opts.output_filename,
                 "Also write each rank's output to DIR/rank.<rank>/stdout and stderr");
  app.add_option("--discovery-interval-ms", raw.discovery_ms,
                 "Elastic: how often the discovery script runs")
      ->capture_default_str()
      ->check(InRange(10, 3600000, "--discovery-interval-ms"));
}

// What CLI11 sees: the launcher's own tokens plus the program name (behind
// "--" if it starts with '-', so it is still taken literally), reversed as
// CLI11 expects; the program's arguments never go through CLI11.
std::vector<std::string> TokensForCli(const std::vector<std::string>& args,
                                      std::size_t program_index, bool explicit_separator) {
  std::vector<std::string> for_cli;
  const std::size_t launcher_end = explicit_separator ? program_index - 1 : program_index;
  for (std::size_t i = 0; i < launcher_end; ++i) for_cli.push_back(NormalizeLauncherToken(args[i]));
  if (program_index < args.size()) {
    if (args[program_index].rfind('-', 0) == 0) for_cli.push_back("--");
    for_cli.push_back(args[program_index]);
  }
  std::reverse(for_cli.begin(), for_cli.end());
  return for_cli;
}

// Horovod's bounds (horovod/runner/elastic/discovery.py): 1 s .. 1 h.
// The slots -H/--hostfile offer (an entry without ':' is one slot); 0 without
// hosts or for a malformed list (check_host_slots reports it).
int FixedHostSlots(const LaunchOptions& opts) {
  if (opts.hosts.empty() || !opts.host_discovery_script.empty()) return 0;
  long long slots = 0;
  std::size_t start = 0;
  while (start <= opts.hosts.size()) {
    const std::size_t end = std::min(opts.hosts.find(',', start), opts.hosts.size());
    const std::string entry = opts.hosts.substr(start, end - start);
    const std::size_t colon = entry.rfind(':');
    long long n = 1;
    if (colon != std::string::npos) {
      const char* first = entry.data() + colon + 1;
      const char* last = entry.data() + entry.size();
      if (std::from_chars(first, last, n).ptr != last || n < 1) return 0;
    }
    slots += n;
    if (slots > std::numeric_limits<int>::max()) return 0;
    start = end + 1;
  }
  return static_cast<int>(slots);
}

Status ApplyCooldownRange(const std::vector<int>& range, LaunchOptions& opts) {
  if (range.empty()) return Status::Ok();
  if (range[0] < 1 || range[1] > 3600 || range[0] > range[1]) {
    return Status::InvalidArgument(
        "--blacklist-cooldown-range MIN MAX needs 1 <= MIN <= MAX <= 3600, got " +
        std::to_string(range[0]) + " " + std::to_string(range[1]));
  }
  opts.cooldown_min_s = range[0];
  opts.cooldown_max_s = range[1];
  return Status::Ok();
}

// The checks that span several options, then the conversions.
Status FinishOptions(LaunchOptions& opts, const RawFlags& raw) {
  opts.elastic_timeout = std::chrono::seconds(raw.elastic_timeout_s);
  KH_RETURN_IF_ERROR(RefusalOf(raw.refused));
  if (auto problem = ApplyHorovodrunFlags(raw.horovodrun, opts))
    return Status::InvalidArgument(*problem);
  KH_RETURN_IF_ERROR(ApplyCooldownRange(raw.cooldown_range, opts));
  if (!raw.hostfile.empty()) {
    StatusOr<std::string> hosts = HostfileToHosts(raw.hostfile);
    if (!hosts.ok()) return hosts.status();
    opts.hosts = *hosts;
  }
  if (!opts.output_filename.empty() && opts.elastic()) {
    return Status::InvalidArgument(
        "--output-filename: not in elastic mode yet (a worker's rank is known only after the "
        "rendezvous, "
        "and Horovod names the directories by rank)");
  }
  opts.discovery_interval = std::chrono::milliseconds(raw.discovery_ms);
  if (opts.elastic()) {
    if (opts.min_np == 0) opts.min_np = opts.num_proc;  // Horovod: --min-np defaults to -np
    // Horovod: no --max-np means every slot; with -H/--hostfile that is the
    // hosts' slots (a discovery script's future slots are unknown: -np).
    if (opts.max_np == 0) opts.max_np = std::max(opts.num_proc, FixedHostSlots(opts));
    if (!(opts.min_np <= opts.num_proc && opts.num_proc <= opts.max_np)) {
      return Status::InvalidArgument(
          "need --min-np <= -np <= --max-np, got " + std::to_string(opts.min_np) +
          " <= " + std::to_string(opts.num_proc) + " <= " + std::to_string(opts.max_np));
    }
  }
  if (!opts.hosts.empty()) {
    KH_RETURN_IF_ERROR(CheckHostSlots(opts.hosts, opts.elastic() ? opts.max_np : opts.num_proc));
  }
  opts.grace_period = std::chrono::milliseconds(raw.grace_ms);
  for (const auto& spec : raw.env_specs) opts.extra_env.push_back(ParseEnvSpec(spec));
  return Status::Ok();
}

}  // namespace

ParseOutcome ParseLaunchOptions(const std::vector<std::string>& args, std::ostream& out,
                                std::ostream& err) {
  LaunchOptions opts;
  RawFlags raw;
  raw.grace_ms = opts.grace_period.count();
  raw.elastic_timeout_s = opts.elastic_timeout.count();
  raw.discovery_ms = opts.discovery_interval.count();

  CLI::App app{"Run N copies of a khorovod training program, here or on remote hosts over ssh.",
               "khorovodrun"};
  app.footer(
      "Use '-np N' (horovodrun spelling) or '--np N'. Everything from the program name on\n"
      "is passed to the program unchanged; '--' may separate it explicitly.");
  AddJobOptions(app, opts, raw);
  AddElasticOptions(app, opts, raw);
  AddHorovodrunFlags(app, raw.horovodrun);
  AddRefusedFlags(app, raw.refused);
  app.set_version_flag("-v,--version", "khorovodrun (khorovod)");

  bool explicit_separator = false;
  const std::size_t program_index = FindProgramIndex(app, args, explicit_separator);
  try {
    app.parse(TokensForCli(args, program_index, explicit_separator));
  } catch (const CLI::ParseError& e) {
    return ParseOutcome{std::nullopt, app.exit(e, out, err)};
  }
  if (Status s = FinishOptions(opts, raw); !s.ok()) {
    err << "khorovodrun: " << s.message() << "\n";
    return ParseOutcome{std::nullopt, 2};
  }
  opts.command.assign(args.begin() + static_cast<std::ptrdiff_t>(program_index), args.end());
  return ParseOutcome{std::move(opts), 0};
}

}  // namespace khorovod::launcher
