#include "launcher/process_group.h"

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

std::string ErrnoText(int e) { return std::strerror(e); }

// Resources the launcher itself could not get (pipes, fork): nothing about
// the worker's command, so the shell's generic failure code.
Status ResourceFailure(const std::string& what, int e) {
  return Status::Unavailable(what + ": " + ErrnoText(e));
}

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

StatusOr<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ResourceFailure("cannot create pipe", errno);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// A pipe already holding `data`, large enough that the write never blocks
// (Linux pipes hold 64 KiB by default; an environment is far smaller).
StatusOr<Pipe> StdinHolding(const std::string& data) {
  StatusOr<Pipe> made = MakePipe();
  if (!made.ok()) return made.status();
  Pipe p = std::move(*made);
  if (data.size() > 60000)
    ::fcntl(p.write.get(), F_SETPIPE_SZ, static_cast<int>(data.size() + 4096));
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(p.write.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ResourceFailure("cannot write the worker's stdin", errno);
    done += static_cast<std::size_t>(n);
  }
  return p;
}

void SetNonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// The child's exec: the O_CLOEXEC pipe closes without data when exec
// worked, and carries the child's errno when it did not (the child is then
// reaped here). Not found is the caller's input (127, as a shell says);
// found but not executable is the file's state (126).
Status ExecOutcome(pid_t pid, int exec_error_read, const std::string& program) {
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_error_read, &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof child_errno)) return Status::Ok();
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  const std::string what = "cannot execute '" + program + "': " + ErrnoText(child_errno);
  return child_errno == ENOENT ? Status::InvalidArgument(what) : Status::FailedPrecondition(what);
}

std::vector<char*> CStringArray(const std::vector<std::string>& strings) {
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

ExitStatus ExitStatus::FromWaitStatus(int status) {
  if (WIFSIGNALED(status)) return ExitStatus{true, WTERMSIG(status)};
  return ExitStatus{false, WEXITSTATUS(status)};
}

std::string ExitStatus::Describe() const {
  if (!signaled) return "exited with code " + std::to_string(code);
  const char* name = ::strsignal(code);
  return "was killed by signal " + std::to_string(code) + " (" + (name ? name : "unknown") + ")";
}

int SpawnFailureExitCode(const Status& failure) {
  switch (failure.code()) {
    case StatusCode::kInvalidArgument:
      return 127;
    case StatusCode::kFailedPrecondition:
      return 126;
    default:
      return 1;
  }
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

StatusOr<WorkerPipes> ProcessGroup::Spawn(const WorkerSpec& spec) {
  if (spec.argv.empty()) return Status::InvalidArgument("empty command");
  std::vector<char*> argv = CStringArray(spec.argv);
  std::vector<char*> envp = CStringArray(spec.env);
  StatusOr<Pipe> out = MakePipe();
  StatusOr<Pipe> err = MakePipe();
  StatusOr<Pipe> exec_error = MakePipe();
  for (const StatusOr<Pipe>* p : {&out, &err, &exec_error}) {
    if (!p->ok()) return p->status();
  }
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null) return ResourceFailure("cannot open /dev/null", errno);
  Pipe in;
  if (!spec.stdin_data.empty()) {
    StatusOr<Pipe> holding = StdinHolding(spec.stdin_data);
    if (!holding.ok()) return holding.status();
    in = std::move(*holding);
  }
  const int stdin_fd = in.read ? in.read.get() : dev_null.get();

  const ChildSetup setup{
      ::getpid(),  stdin_fd,   out->write.get(), err->write.get(), exec_error->write.get(),
      argv.data(), envp.data()};
  const pid_t pid = ::fork();
  if (pid < 0) return ResourceFailure("fork failed", errno);
  if (pid == 0) exec_child(setup);

  // Also set the group from the parent: whichever runs first wins, and the
  // group exists before Spawn() returns, so an immediate SignalRunning()
  // cannot miss it. EACCES (child already exec'd) is expected and harmless.
  ::setpgid(pid, pid);
  out->write.reset();
  err->write.reset();
  exec_error->write.reset();
  in.read.reset();

  if (Status exec = ExecOutcome(pid, exec_error->read.get(), spec.argv[0]); !exec.ok()) return exec;
  SetNonblocking(out->read.get());
  SetNonblocking(err->read.get());
  workers_.push_back(Worker{spec.rank, pid, false, false, std::move(in.write)});
  return WorkerPipes{std::move(out->read), std::move(err->read)};
}

std::vector<WorkerExit> ProcessGroup::PollExits() {
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

std::size_t ProcessGroup::SignalRunning(int sig) {
  std::size_t count = 0;
  for (const auto& w : workers_) {
    if (w.exited) continue;
    // ESRCH: the worker moved itself to another group; signal it directly.
    if (::kill(-w.pid, sig) != 0 && errno == ESRCH) ::kill(w.pid, sig);
    ++count;
  }
  return count;
}

bool ProcessGroup::SignalRank(int rank, int sig) {
  for (const auto& w : workers_) {
    if (w.exited || w.rank != rank) continue;
    if (::kill(-w.pid, sig) != 0 && errno == ESRCH) ::kill(w.pid, sig);
    return true;
  }
  return false;
}

std::size_t ProcessGroup::SignalAllGroups(int sig) {
  std::size_t count = 0;
  for (const auto& w : workers_) {
    if (w.reaped) continue;
    if (::kill(-w.pid, sig) != 0 && errno == ESRCH && !w.exited) ::kill(w.pid, sig);
    ++count;
  }
  return count;
}

std::size_t ProcessGroup::RunningCount() const {
  std::size_t count = 0;
  for (const auto& w : workers_) count += w.exited ? 0 : 1;
  return count;
}

void ProcessGroup::ReapExited() {
  for (auto& w : workers_) {
    if (!w.exited || w.reaped) continue;
    while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    w.reaped = true;
    w.stdin_write.reset();
  }
}

}  // namespace khorovod::launcher
