#include "process_group.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

extern char** environ;  // POSIX: the application declares it

namespace khorovod::launcher {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    const int e = errno;
    throw SpawnError("cannot create pipe: " + errno_text(e), e, false);
  }
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// A pipe already holding `data`, large enough that the write never blocks
// (Linux pipes hold 64 KiB by default; an environment is far smaller).
Pipe StdinHolding(const std::string& data) {
  Pipe p = make_pipe();
  if (data.size() > 60000) ::fcntl(p.write.get(), F_SETPIPE_SZ, static_cast<int>(data.size() + 4096));
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(p.write.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      throw SpawnError("cannot write the worker's stdin: " + errno_text(e), e, false);
    }
    done += static_cast<std::size_t>(n);
  }
  return p;
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

std::vector<char*> c_string_array(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Everything the child needs, prepared before fork so that the child only
// makes async-signal-safe calls (it may be a copy of a multi-threaded
// process whose malloc locks are held by threads that no longer exist).
struct ChildSetup {
  pid_t parent_pid;
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int exec_error_fd;
  char** argv;
  char** envp;
};

[[noreturn]] void report_and_exit(int exec_error_fd, int error_number) {
  // Best effort: if this write fails the parent sees EOF and assumes exec
  // worked, then observes exit status 127 - still not a hang.
  [[maybe_unused]] const ssize_t n = ::write(exec_error_fd, &error_number, sizeof error_number);
  ::_exit(127);
}

[[noreturn]] void exec_child(const ChildSetup& s) {
  // Own process group: see the header for why.
  ::setpgid(0, 0);
  // Die with the launcher. If the launcher already died before prctl took
  // effect we would never get the signal, hence the re-check.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != s.parent_pid) ::_exit(1);

  // The launcher ignores SIGPIPE and catches INT/TERM/CHLD; ignored
  // dispositions and the signal mask survive exec, so restore defaults.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  // Move sources above 2 first so each dup2 below has distinct source and
  // target (dup2(fd, fd) would not clear O_CLOEXEC).
  int sources[3] = {s.stdin_fd, s.stdout_fd, s.stderr_fd};
  for (int& fd : sources) {
    if (fd < 3) fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) report_and_exit(s.exec_error_fd, errno);
  }
  for (int target = 0; target < 3; ++target) {
    if (::dup2(sources[target], target) < 0) report_and_exit(s.exec_error_fd, errno);
  }

  // execvp searches the worker's PATH, so `-x PATH=...` affects which
  // program runs, as with env(1).
  environ = s.envp;
  ::execvp(s.argv[0], s.argv);
  report_and_exit(s.exec_error_fd, errno);
}

}  // namespace

ExitStatus ExitStatus::from_wait_status(int status) {
  if (WIFSIGNALED(status)) return ExitStatus{true, WTERMSIG(status)};
  return ExitStatus{false, WEXITSTATUS(status)};
}

std::string ExitStatus::describe() const {
  if (!signaled) return "exited with code " + std::to_string(code);
  const char* name = ::strsignal(code);
  return "was killed by signal " + std::to_string(code) + " (" + (name ? name : "unknown") + ")";
}

int SpawnError::exit_code() const {
  if (!exec_failed_) return 1;
  return errno_ == ENOENT ? 127 : 126;
}

ProcessGroup::~ProcessGroup() {
  for (auto& w : workers_) {
    if (w.reaped) continue;
    ::kill(-w.pid, SIGKILL);
    ::kill(w.pid, SIGKILL);  // in case the worker left its group
  }
  for (auto& w : workers_) {
    if (w.reaped) continue;
    while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    w.reaped = true;
  }
}

WorkerPipes ProcessGroup::spawn(const WorkerSpec& spec) {
  if (spec.argv.empty()) throw SpawnError("empty command", EINVAL, false);
  std::vector<char*> argv = c_string_array(spec.argv);
  std::vector<char*> envp = c_string_array(spec.env);
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  Pipe exec_error = make_pipe();
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null) {
    const int e = errno;
    throw SpawnError("cannot open /dev/null: " + errno_text(e), e, false);
  }
  Pipe in;
  if (!spec.stdin_data.empty()) in = StdinHolding(spec.stdin_data);
  const int stdin_fd = in.read ? in.read.get() : dev_null.get();

  const ChildSetup setup{::getpid(),      stdin_fd,               out.write.get(),
                         err.write.get(), exec_error.write.get(), argv.data(),
                         envp.data()};
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    throw SpawnError("fork failed: " + errno_text(e), e, false);
  }
  if (pid == 0) exec_child(setup);

  // Also set the group from the parent: whichever runs first wins, and the
  // group exists before spawn() returns, so an immediate signal_running()
  // cannot miss it. EACCES (child already exec'd) is expected and harmless.
  ::setpgid(pid, pid);
  out.write.reset();
  err.write.reset();
  exec_error.write.reset();
  in.read.reset();

  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_error.read.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw SpawnError("cannot execute '" + spec.argv[0] + "': " + errno_text(child_errno),
                     child_errno, true);
  }

  set_nonblocking(out.read.get());
  set_nonblocking(err.read.get());
  workers_.push_back(Worker{spec.rank, pid, false, false, std::move(in.write)});
  return WorkerPipes{std::move(out.read), std::move(err.read)};
}

std::vector<WorkerExit> ProcessGroup::poll_exits() {
  std::vector<WorkerExit> exits;
  for (auto& w : workers_) {
    if (w.exited) continue;
    siginfo_t info{};
    int rc;
    do {
      rc = ::waitid(P_PID, static_cast<id_t>(w.pid), &info, WEXITED | WNOHANG | WNOWAIT);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
      // ECHILD: somebody else reaped our child (a stray waitpid(-1) in the
      // process). Its status is lost; report a generic failure rather than
      // waiting forever for an exit we can no longer observe.
      w.exited = w.reaped = true;
      exits.push_back(WorkerExit{w.rank, w.pid, ExitStatus{false, 255}});
      continue;
    }
    if (info.si_pid != w.pid) continue;  // still running
    w.exited = true;
    const bool signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    exits.push_back(WorkerExit{w.rank, w.pid, ExitStatus{signaled, info.si_status}});
  }
  return exits;
}

std::size_t ProcessGroup::signal_running(int sig) {
  std::size_t count = 0;
  for (const auto& w : workers_) {
    if (w.exited) continue;
    // ESRCH: the worker moved itself to another group; signal it directly.
    if (::kill(-w.pid, sig) != 0 && errno == ESRCH) ::kill(w.pid, sig);
    ++count;
  }
  return count;
}

bool ProcessGroup::signal_rank(int rank, int sig) {
  for (const auto& w : workers_) {
    if (w.exited || w.rank != rank) continue;
    if (::kill(-w.pid, sig) != 0 && errno == ESRCH) ::kill(w.pid, sig);
    return true;
  }
  return false;
}

std::size_t ProcessGroup::signal_all_groups(int sig) {
  std::size_t count = 0;
  for (const auto& w : workers_) {
    if (w.reaped) continue;
    if (::kill(-w.pid, sig) != 0 && errno == ESRCH && !w.exited) ::kill(w.pid, sig);
    ++count;
  }
  return count;
}

std::size_t ProcessGroup::running_count() const {
  std::size_t count = 0;
  for (const auto& w : workers_) count += w.exited ? 0 : 1;
  return count;
}

void ProcessGroup::reap_exited() {
  for (auto& w : workers_) {
    if (!w.exited || w.reaped) continue;
    while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    w.reaped = true;
    w.stdin_write.reset();
  }
}

}  // namespace khorovod::launcher
