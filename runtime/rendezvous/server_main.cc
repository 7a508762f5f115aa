// khorovod-rendezvous: the per-job elastic rendezvous server.
//
//   KHOROVOD_RENDEZVOUS_TOKEN=... khorovod-rendezvous --job myjob --min-workers 2
//
// Prints "khorovod-rendezvous listening on HOST:PORT" once the socket
// listens (preceded by "khorovod-rendezvous metrics on HOST:PORT" with
// --metrics-port), serves until SIGINT or SIGTERM, then exits 0. Exits 2 on bad
// flags or a missing token, 1 when it cannot listen. See README.md.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "http_server.h"

namespace {

using khorovod::rendezvous::Millis;
using khorovod::rendezvous::RendezvousServer;
using khorovod::rendezvous::ServerOptions;

// The token file's content without surrounding whitespace; empty on error.
std::string ReadToken(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read the token file '" + path + "'";
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  const char* ws = " \t\r\n";
  auto begin = token.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  return token.substr(begin, token.find_last_not_of(ws) - begin + 1);
}

}  // namespace

int main(int argc, char** argv) {
  ServerOptions options;
  auto& policy = options.service.policy;
  std::string token_file;
  int64_t settle = policy.settle.count(), heartbeat = policy.heartbeat_timeout.count(),
          elastic = policy.elastic_timeout.count(), reform = policy.reform_timeout.count(),
          bl_base = policy.blacklist_base.count(), bl_max = policy.blacklist_max.count(),
          max_wait = options.service.max_wait.count();
  bool quiet = false;

  CLI::App app{"khorovod-rendezvous: elastic rendezvous server for one khorovod job"};
  app.add_option("--job", options.service.job, "Job name served (other names get 404)")->required();
  app.add_option("--host", options.host, "Bind address")->capture_default_str();
  app.add_option("--port", options.port, "Bind port, 0 for an ephemeral one")->capture_default_str();
  app.add_option("--metrics-port", options.metrics_port,
                 "Also serve GET /metrics without a token on this port (0: ephemeral, -1: off)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--token-file", token_file,
                 "File holding the bearer token (else env KHOROVOD_RENDEZVOUS_TOKEN)");
  app.add_option("--min-workers", policy.min_workers, "Workers needed to form a generation")->capture_default_str();
  app.add_option("--max-workers", policy.max_workers, "Most workers admitted to a generation")
      ->capture_default_str();
  app.add_option("--settle-ms", settle, "Wait after min-workers is reached before freezing")->capture_default_str();
  app.add_option("--heartbeat-timeout-ms", heartbeat, "Silence after which a worker is removed")
      ->capture_default_str();
  app.add_option("--elastic-timeout-ms", elastic, "How long to wait for min-workers before failing the job")
      ->capture_default_str();
  app.add_option("--reform-timeout-ms", reform,
                 "After a loss, how long members have to ask for the next generation")
      ->capture_default_str();
  app.add_option("--blacklist-threshold", policy.blacklist_threshold, "Failures before a name is put in cooldown")
      ->capture_default_str();
  app.add_option("--blacklist-base-ms", bl_base, "First cooldown; doubles with each further failure")
      ->capture_default_str();
  app.add_option("--blacklist-max-ms", bl_max, "Longest cooldown")->capture_default_str();
  app.add_option("--reset-limit", policy.reset_limit, "Re-formations allowed before the job fails (-1: unlimited)")
      ->capture_default_str();
  app.add_option("--max-wait-ms", max_wait, "Cap on any long-poll")->capture_default_str();
  app.add_option("--max-body-bytes", options.max_body_bytes, "Largest request body")->capture_default_str();
  app.add_option("--http-threads", options.http_threads, "HTTP worker threads (0: from max-workers)")
      ->capture_default_str();
  app.add_flag("--quiet", quiet, "Do not log events to stderr");
  CLI11_PARSE(app, argc, argv);

  policy.settle = Millis(settle);
  policy.heartbeat_timeout = Millis(heartbeat);
  policy.elastic_timeout = Millis(elastic);
  policy.reform_timeout = Millis(reform);
  policy.blacklist_base = Millis(bl_base);
  policy.blacklist_max = Millis(bl_max);
  options.service.max_wait = Millis(max_wait);
  options.service.log = !quiet;

  std::string error;
  if (!token_file.empty()) {
    options.token = ReadToken(token_file, &error);
  } else if (const char* env = std::getenv("KHOROVOD_RENDEZVOUS_TOKEN")) {
    options.token = env;
  }
  if (options.token.empty()) {
    std::cerr << "khorovod-rendezvous: "
              << (error.empty() ? "no token: pass --token-file or set KHOROVOD_RENDEZVOUS_TOKEN" : error) << "\n";
    return 2;
  }

  // Block the stop signals in every thread; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  RendezvousServer server(options);
  khorovod::Status s = server.Start();
  if (!s.ok()) {
    std::cerr << "khorovod-rendezvous: " << s.message() << "\n";
    return s.code() == khorovod::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (server.metrics_port() >= 0) {
    std::cout << "khorovod-rendezvous metrics on " << server.host() << ":" << server.metrics_port() << std::endl;
  }
  std::cout << "khorovod-rendezvous listening on " << server.host() << ":" << server.port() << std::endl;

  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::cerr << "khorovod-rendezvous: signal " << sig << ", stopping\n";
    server.Stop();
  });
  server.Wait();
  // Wait() returns only after a signal made the thread call Stop().
  signal_thread.join();
  return 0;
}
