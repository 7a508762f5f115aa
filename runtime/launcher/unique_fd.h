// Unique fd: move-only owner of a POSIX file descriptor.
//
// The launcher juggles many pipe ends (two per worker plus the signal
// self-pipe and per-spawn exec-error pipes); an owning wrapper makes every
// early-return and exception path close them, which matters because a leaked
// write end keeps a pipe from ever reaching EOF and would hang the output loop.
//
// Thread-safety: a value type; one owner at a time, as for any movable object.
#pragma once

#include <unistd.h>

#include <utility>

namespace khorovod::launcher {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  // Gives up ownership without closing.
  int release() noexcept { return std::exchange(fd_, -1); }

  // Closes the current descriptor (if any) and takes ownership of `fd`.
  // close(2) errors are ignored on purpose: on Linux the descriptor is gone
  // even when close reports EINTR/EIO, and there is nothing useful to retry.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace khorovod::launcher
