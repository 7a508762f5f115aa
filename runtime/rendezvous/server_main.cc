// khorovod-rendezvous: the per-job elastic rendezvous server.
//
//   KHOROVOD_RENDEZVOUS_TOKEN=... khorovod-rendezvous --job myjob --min-workers 2
//
// Prints "khorovod-rendezvous listening on HOST:PORT" once the socket
// listens (preceded by "khorovod-rendezvous metrics on HOST:PORT" with
// --metrics-port), serves until SIGINT or SIGTERM, then exits 0. Exits 2 on bad
// flags or a missing token, 1 when it cannot listen. See README.md.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "http_server.h"
#include "khorovod/util/stop_signals.h"

namespace {

using khorovod::Status;
using khorovod::StatusOr;
using khorovod::rendezvous::Millis;
using khorovod::rendezvous::RendezvousServer;
using khorovod::rendezvous::ServerOptions;

// The token file's content without surrounding whitespace.
StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read the token file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  const char* ws = " \t\r\n";
  auto begin = token.find_first_not_of(ws);
  if (begin == std::string::npos) return std::string();
  return token.substr(begin, token.find_last_not_of(ws) - begin + 1);
}

// The bearer token: from --token-file, else KHOROVOD_RENDEZVOUS_TOKEN.
StatusOr<std::string> ResolveToken(const std::string& token_file) {
  std::string token;
  if (!token_file.empty()) {
    StatusOr<std::string> from_file = ReadTokenFile(token_file);
    if (!from_file.ok()) return from_file.status();
    token = std::move(*from_file);
  } else if (const char* env = std::getenv("KHOROVOD_RENDEZVOUS_TOKEN")) {
    token = env;
  }
  if (token.empty())
    return Status::InvalidArgument("no token: pass --token-file or set KHOROVOD_RENDEZVOUS_TOKEN");
  return token;
}

// The command line: the flags bind to these, then Apply() converts the
// millisecond counts into the policy's durations.
struct Flags {
  ServerOptions options;
  std::string token_file;
  int64_t settle, heartbeat, elastic, reform, bl_base, bl_max, max_wait;
  bool quiet = false;

  Flags() {
    const auto& policy = options.service.policy;
    settle = policy.settle.count();
    heartbeat = policy.heartbeat_timeout.count();
    elastic = policy.elastic_timeout.count();
    reform = policy.reform_timeout.count();
    bl_base = policy.blacklist_base.count();
    bl_max = policy.blacklist_max.count();
    max_wait = options.service.max_wait.count();
  }

  void Apply() {
    auto& policy = options.service.policy;
    policy.settle = Millis(settle);
    policy.heartbeat_timeout = Millis(heartbeat);
    policy.elastic_timeout = Millis(elastic);
    policy.reform_timeout = Millis(reform);
    policy.blacklist_base = Millis(bl_base);
    policy.blacklist_max = Millis(bl_max);
    options.service.max_wait = Millis(max_wait);
    options.service.log = !quiet;
  }
};

void AddServerFlags(CLI::App& app, Flags& f) {
  ServerOptions& options = f.options;
  app.add_option("--job", options.service.job, "Job name served (other names get 404)")->required();
  app.add_option("--host", options.host, "Bind address")->capture_default_str();
  app.add_option("--port", options.port, "Bind port, 0 for an ephemeral one")
      ->capture_default_str();
  app.add_option("--metrics-port", options.metrics_port,
                 "Also serve GET /metrics without a token on this port (0: ephemeral, -1: off)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--token-file", f.token_file,
                 "File holding the bearer token (else env KHOROVOD_RENDEZVOUS_TOKEN)");
  app.add_option("--max-wait-ms", f.max_wait, "Cap on any long-poll")->capture_default_str();
  app.add_option("--max-body-bytes", options.max_body_bytes, "Largest request body")
      ->capture_default_str();
  app.add_option("--http-threads", options.http_threads,
                 "HTTP worker threads (0: from max-workers)")
      ->capture_default_str();
  app.add_flag("--quiet", f.quiet, "Do not log events to stderr");
}

void AddPolicyFlags(CLI::App& app, Flags& f) {
  auto& policy = f.options.service.policy;
  app.add_option("--min-workers", policy.min_workers, "Workers needed to form a generation")
      ->capture_default_str();
  app.add_option("--max-workers", policy.max_workers, "Most workers admitted to a generation")
      ->capture_default_str();
  app.add_option("--settle-ms", f.settle, "Wait after min-workers is reached before freezing")
      ->capture_default_str();
  app.add_option("--heartbeat-timeout-ms", f.heartbeat, "Silence after which a worker is removed")
      ->capture_default_str();
  app.add_option("--elastic-timeout-ms", f.elastic,
                 "How long to wait for min-workers before failing the job")
      ->capture_default_str();
  app.add_option("--reform-timeout-ms", f.reform,
                 "After a loss, how long members have to ask for the next generation")
      ->capture_default_str();
  app.add_option("--blacklist-threshold", policy.blacklist_threshold,
                 "Failures before a name is put in cooldown")
      ->capture_default_str();
  app.add_option("--blacklist-base-ms", f.bl_base,
                 "First cooldown; doubles with each further failure")
      ->capture_default_str();
  app.add_option("--blacklist-max-ms", f.bl_max, "Longest cooldown")->capture_default_str();
  app.add_option("--reset-limit", policy.reset_limit,
                 "Re-formations allowed before the job fails (-1: unlimited)")
      ->capture_default_str();
}

// Serves until SIGINT or SIGTERM; the process's exit status.
int Serve(const ServerOptions& options) {
  // Before any thread starts: one thread waits for the stop signals.
  const khorovod::StopSignals stop_signals;
  RendezvousServer server(options);
  Status s = server.Start();
  if (!s.ok()) {
    std::cerr << "khorovod-rendezvous: " << s.message() << "\n";
    return s.code() == khorovod::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (server.metrics_port() >= 0) {
    std::cout << "khorovod-rendezvous metrics on " << server.host() << ":" << server.metrics_port()
              << std::endl;
  }
  std::cout << "khorovod-rendezvous listening on " << server.host() << ":" << server.port()
            << std::endl;

  std::thread signal_thread([&] {
    const int sig = stop_signals.Wait();
    std::cerr << "khorovod-rendezvous: signal " << sig << ", stopping\n";
    server.Stop();
  });
  server.Wait();
  // Wait() returns only after a signal made the thread call Stop().
  signal_thread.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"khorovod-rendezvous: elastic rendezvous server for one khorovod job"};
  AddServerFlags(app, flags);
  AddPolicyFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  flags.Apply();
  StatusOr<std::string> token = ResolveToken(flags.token_file);
  if (!token.ok()) {
    std::cerr << "khorovod-rendezvous: " << token.status().message() << "\n";
    return 2;
  }
  flags.options.token = std::move(*token);
  return Serve(flags.options);
}
