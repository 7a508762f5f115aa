#include "backend/shm/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include "common/waiter_signal.h"

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

// The futex word of an arrival counter: its low 32 bits. Generations only
// grow, so a waiter that saw value v sleeps only while the low half still
// equals v's (a change of exactly 2^32 generations in between is moot).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the futex word is the counter's low half");
static_assert(std::atomic<uint64_t>::is_always_lock_free && sizeof(std::atomic<uint64_t>) == 8);

uint32_t* FutexWord(std::atomic<uint64_t>& counter) {
  return reinterpret_cast<uint32_t*>(&counter);
}

// Sleeps while *word == expected, at most `timeout` (a wake-up, a changed
// word, a signal or the timeout all return; callers re-check). Not
// FUTEX_PRIVATE_FLAG: the word is shared between processes.
void FutexWait(uint32_t* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWake(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// A sleeping waiter wakes this often to check that its peer still lives: a
// crashed peer wakes nobody.
constexpr auto kLivenessPoll = std::chrono::milliseconds(10);

// How long a waiter spins before it sleeps, where spinning is allowed: a
// peer is usually a few microseconds behind.
constexpr auto kBarrierSpin = std::chrono::microseconds(50);

Status Errno(const std::string& what) {
  return Status::Unavailable("shared memory: " + what + ": " + std::strerror(errno));
}

Status AbandonedError() {
  return Status::Unavailable("shared memory: this rank's generation was abandoned");
}

}  // namespace

ShmSegment::ShmSegment(std::string name, int ranks, size_t slot_bytes, void* base, size_t bytes)
    : name_(std::move(name)),
      ranks_(ranks),
      slot_bytes_(slot_bytes),
      base_(base),
      bytes_(bytes),
      spin_(AllowedCores() >= ranks) {}

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

StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(const std::string& name, int ranks,
                                                       size_t slot_bytes) {
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
  if (attached_rank_ < 0) return;
  line(attached_rank_).pid.store(kDeparted, std::memory_order_seq_cst);
  WakeSleepers(attached_rank_, /*always=*/true);  // they see the departure at once
}

void ShmSegment::Abandon() {
  abandoned_.store(true, std::memory_order_seq_cst);
  Depart();
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

void ShmSegment::WakeSleepers(int rank, bool always) const {
  // seq_cst pairs with the sleeper's increment then re-read: either it sees
  // the new value, or this load sees it counted (and the kernel's compare
  // of the futex word covers the rest).
  if (always || line(rank).sleepers.load(std::memory_order_seq_cst) > 0)
    FutexWake(FutexWord(line(rank).arrived));
}

Status ShmSegment::Barrier(int rank, uint64_t generation, std::chrono::milliseconds timeout,
                           std::chrono::microseconds yield_for) {
  if (abandoned_.load(std::memory_order_acquire)) return AbandonedError();
  line(rank).arrived.store(generation, std::memory_order_seq_cst);
  WakeSleepers(rank, /*always=*/false);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 0; r < ranks_; ++r) {
    if (r == rank) continue;
    KH_RETURN_IF_ERROR(AwaitArrival(r, generation, deadline, yield_for));
  }
  return Status::Ok();
}

Status ShmSegment::AwaitArrival(int r, uint64_t generation,
                                std::chrono::steady_clock::time_point deadline,
                                std::chrono::microseconds spin_at_most) const {
  Line& peer = line(r);
  const auto arrived = [&] { return peer.arrived.load(std::memory_order_acquire) >= generation; };
  const auto spin = std::min(spin_ ? kBarrierSpin : std::chrono::microseconds(0), spin_at_most);
  if (SpinUntil(arrived, spin)) return Status::Ok();
  for (;;) {
    peer.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint64_t seen = peer.arrived.load(std::memory_order_seq_cst);
    if (seen < generation) {
      const auto left = deadline - std::chrono::steady_clock::now();
      FutexWait(
          FutexWord(peer.arrived), static_cast<uint32_t>(seen),
          std::clamp<std::chrono::nanoseconds>(left, std::chrono::nanoseconds(0), kLivenessPoll));
    }
    peer.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    // An arrival before leaving still counts, so this comes first.
    if (arrived()) return Status::Ok();
    if (abandoned_.load(std::memory_order_acquire)) return AbandonedError();
    if (PeerGone(r)) {
      return Status::Unavailable("shared memory: peer rank " + std::to_string(r) +
                                 " died or left the generation");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable("shared memory: timed out waiting for rank " + std::to_string(r));
    }
  }
}

}  // namespace khorovod::shm
