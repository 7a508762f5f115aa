#include "rendezvous_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#ifndef KHOROVOD_RENDEZVOUS_BINARY
#error "KHOROVOD_RENDEZVOUS_BINARY must name the server executable"
#endif

namespace khorovod::testing {

RendezvousProcess::RendezvousProcess(const std::string& job, const std::vector<std::string>& args)
    : job_(job), args_(args) {
  std::random_device rd;
  token_ = "test-token-" + std::to_string(rd()) + std::to_string(rd());
  token_file_ = (std::filesystem::temp_directory_path() /
                 ("khorovod-token-" + std::to_string(getpid()) + "-" + std::to_string(rd())))
                    .string();
  std::ofstream(token_file_) << token_ << "\n";
  Start(0);
}

RendezvousProcess::~RendezvousProcess() {
  Stop();
  std::error_code ec;
  std::filesystem::remove(token_file_, ec);
}

bool RendezvousProcess::Start(int port) {
  // KHOROVOD_TEST_RENDEZVOUS_BINARY: the server where the test binary was
  // moved to another machine (scripts/gpu-check.sh carries both).
  const char* moved = std::getenv("KHOROVOD_TEST_RENDEZVOUS_BINARY");
  std::vector<std::string> argv_s = {moved && *moved ? moved : KHOROVOD_RENDEZVOUS_BINARY,
                                     "--job",
                                     job_,
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port),
                                     "--token-file",
                                     token_file_,
                                     "--quiet"};
  argv_s.insert(argv_s.end(), args_.begin(), args_.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    error_ = "pipe failed";
    return false;
  }
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
  const std::regex listening(R"(listening on 127\.0\.0\.1:(\d+))");
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  char buf[512];
  std::smatch m;
  while (!std::regex_search(text, m, listening)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{out_fd_, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
    ssize_t n = read(out_fd_, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  if (!std::regex_search(text, m, listening)) {
    error_ = "server did not start: " + text;
    Stop();
    return false;
  }
  port_ = std::stoi(m[1]);
  return true;
}

void RendezvousProcess::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  if (out_fd_ >= 0) close(out_fd_);
  out_fd_ = -1;
}

bool RendezvousProcess::Restart() {
  const int port = port_;
  Stop();
  port_ = 0;
  return Start(port);
}

std::map<std::string, std::string> RendezvousProcess::WorkerEnv(const std::string& job_id,
                                                                int slots) const {
  return {{"KHOROVOD_RENDEZVOUS_ADDR", address()},
          {"KHOROVOD_RENDEZVOUS_TOKEN", token()},
          {"KHOROVOD_JOB_ID", job_id},
          {"KHOROVOD_SLOTS", std::to_string(slots)},
          {"KHOROVOD_TIMEOUT_SECONDS", "5"},
          {"KHOROVOD_ELASTIC_TIMEOUT_SECONDS", "60"}};
}

}  // namespace khorovod::testing
