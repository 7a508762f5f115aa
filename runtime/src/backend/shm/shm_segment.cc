#include "backend/shm/shm_segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

namespace khorovod::shm {
namespace {

size_t SegmentBytes(int ranks, size_t slot_bytes) {
  return 64 * static_cast<size_t>(ranks) + 2 * static_cast<size_t>(ranks) * slot_bytes;
}

std::string FreshName() {
  std::random_device rd;
  const uint64_t nonce = (uint64_t{rd()} << 32) | rd();
  char buf[64];
  std::snprintf(buf, sizeof buf, "/khorovod-%d-%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(nonce));
  return buf;
}

// A rank's pid line after it let go of the segment.
constexpr int64_t kDeparted = -1;

// Whether `pid` has exited, zombies included: a launcher may leave a dead
// worker unreaped for a while (khorovodrun keeps it until the job ends so its
// process group stays reserved), and signal 0 still reaches a zombie.
bool ProcessEnded(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
  const char* paren = std::strrchr(buf, ')');
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

Status Errno(const std::string& what) {
  return Status::Unavailable("shared memory: " + what + ": " + std::strerror(errno));
}

}  // namespace

ShmSegment::ShmSegment(std::string name, int ranks, size_t slot_bytes, void* base, size_t bytes)
    : name_(std::move(name)), ranks_(ranks), slot_bytes_(slot_bytes), base_(base), bytes_(bytes) {}

StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(int ranks, size_t slot_bytes) {
  const std::string name = FreshName();
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Errno("create " + name);
  const size_t bytes = SegmentBytes(ranks, slot_bytes);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status s = Errno("size " + name + " (is /dev/shm large enough?)");
    close(fd);
    shm_unlink(name.c_str());
    return s;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    Status s = Errno("map " + name);
    shm_unlink(name.c_str());
    return s;
  }
  // ftruncate zero-fills: every counter starts at generation 0.
  return std::unique_ptr<ShmSegment>(new ShmSegment(name, ranks, slot_bytes, base, bytes));
}

StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(const std::string& name, int ranks, size_t slot_bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Errno("open " + name);
  const size_t bytes = SegmentBytes(ranks, slot_bytes);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Errno("map " + name);
  auto seg = std::unique_ptr<ShmSegment>(new ShmSegment(name, ranks, slot_bytes, base, bytes));
  seg->linked_ = false;  // the creator owns the name
  return seg;
}

ShmSegment::~ShmSegment() {
  Depart();
  Unlink();
  munmap(base_, bytes_);
}

void ShmSegment::Unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

void ShmSegment::Attach(int rank) {
  attached_rank_ = rank;
  line(rank).pid.store(getpid(), std::memory_order_release);
}

void ShmSegment::Depart() {
  if (attached_rank_ >= 0) line(attached_rank_).pid.store(kDeparted, std::memory_order_release);
}

std::byte* ShmSegment::Slot(int set, int rank) const {
  return static_cast<std::byte*>(base_) + 64 * static_cast<size_t>(ranks_) +
         (static_cast<size_t>(set) * ranks_ + rank) * slot_bytes_;
}

bool ShmSegment::PeerGone(int rank) const {
  const int64_t pid = line(rank).pid.load(std::memory_order_acquire);
  if (pid == kDeparted) return true;
  return pid > 0 && ProcessEnded(static_cast<pid_t>(pid));
}

Status ShmSegment::Barrier(int rank, uint64_t generation, std::chrono::milliseconds timeout,
                           std::chrono::microseconds yield_for) {
  line(rank).arrived.store(generation, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  const bool may_sleep = yield_for != std::chrono::microseconds::max();
  bool sleeping = false;
  for (int r = 0; r < ranks_; ++r) {
    // Spin briefly (the peer is usually a few microseconds behind), then
    // yield the core: ranks often outnumber cores.
    for (uint64_t spins = 0; line(r).arrived.load(std::memory_order_acquire) < generation; ++spins) {
      if (spins < 64) continue;
      if (sleeping) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      } else {
        std::this_thread::yield();
      }
      if (may_sleep && !sleeping && spins % 64 == 0) {
        sleeping = std::chrono::steady_clock::now() - start > yield_for;
      }
      if (!sleeping && spins % 1024 != 0) continue;
      if (PeerGone(r)) {
        return Status::Unavailable("shared memory: peer rank " + std::to_string(r) + " died or left the generation");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::Unavailable("shared memory: timed out waiting for rank " + std::to_string(r));
      }
    }
  }
  return Status::Ok();
}

}  // namespace khorovod::shm
