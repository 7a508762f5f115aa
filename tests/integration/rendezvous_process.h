// Runs a real khorovod-rendezvous server as a child process for a test:
// spawns the binary with a fresh token file, waits (bounded) for its
// "listening on HOST:PORT" line, and kills it on destruction.
//
// Spawn it before forking workers (the test process stays single-threaded).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace khorovod::testing {

class RendezvousProcess {
 public:
  // `args` are extra server flags (--min-workers, --settle-ms, ...).
  RendezvousProcess(const std::string& job, const std::vector<std::string>& args);
  ~RendezvousProcess();
  RendezvousProcess(const RendezvousProcess&) = delete;
  RendezvousProcess& operator=(const RendezvousProcess&) = delete;

  bool ok() const { return port_ > 0; }
  const std::string& error() const { return error_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& token() const { return token_; }
  // The environment an elastic worker of `job_id` with `slots` slots needs
  // to use this server, with the short collective timeout (5 s) and the
  // elastic timeout (60 s) the tests run under.
  std::map<std::string, std::string> WorkerEnv(const std::string& job_id, int slots) const;
  // SIGKILLs the server and starts a new one on the same port (state lost).
  bool Restart();

 private:
  bool Start(int port);
  void Stop();

  std::string job_;
  std::vector<std::string> args_;
  std::string token_, token_file_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int port_ = 0;
  std::string error_;
};

}  // namespace khorovod::testing
