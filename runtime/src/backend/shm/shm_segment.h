// ShmSegment: one POSIX shared-memory segment shared by the ranks of one
// host, with per-rank arrival counters for bounded, death-aware barriers.
//
// Lifetime: the lowest rank creates the segment under a fresh random name
// (O_EXCL), every other rank opens it, and once all have mapped it the
// creator unlinks the name. From then on the memory lives only as long as
// some rank maps it: a crash, a re-formation or an exit leaves nothing
// behind in /dev/shm. Only a crash inside that short window (create ..
// unlink) can leave a name, and the next formation's O_EXCL name differs.
//
// Layout: a header of `ranks` cache lines (each holds one rank's arrival
// counter and pid), then `ranks` data slots of `slot_bytes` each, twice
// (two sets, so one chunk's results can be read while the next is written).
//
// Waits are bounded: Barrier fails with kUnavailable once `timeout` passes,
// or as soon as a peer's process is gone or has let go of the segment (it
// left the generation, e.g. back to the rendezvous after a failure of its
// own), so a dead or departed peer never hangs or kills the survivors.
//
// Waits sleep on a process-shared futex: the low 32 bits of the awaited
// rank's arrival counter. Every arriver (and a rank letting go of the
// segment) wakes the sleepers on its own counter; a sleeper also wakes
// every kLivenessPoll to check that the peer still lives, since a crashed
// peer wakes nobody. Before sleeping a waiter spins briefly, but only when
// this process may run on at least `ranks` cores (common/waiter_signal.h):
// on an oversubscribed host the spin would steal the peer's core.
//
// Thread-safety: one thread per rank uses its segment (the background
// thread), except Depart() and Abandon(), which any thread may call (a
// generation abandoned from the heartbeat thread); processes synchronize
// through the counters (release/acquire).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "khorovod/status.h"

namespace khorovod::shm {

class ShmSegment {
 public:
  // The creator's half: a new segment under a fresh name.
  static StatusOr<std::unique_ptr<ShmSegment>> Create(int ranks, size_t slot_bytes);
  // Every other rank's half: opens and maps the creator's segment.
  static StatusOr<std::unique_ptr<ShmSegment>> Open(const std::string& name, int ranks,
                                                    size_t slot_bytes);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  const std::string& name() const { return name_; }
  // Removes the name (the creator, once every rank has mapped it).
  void Unlink();

  // Records this process as `rank` (its pid, for peers' liveness checks);
  // the destructor marks the rank departed.
  void Attach(int rank);
  // Marks the attached rank departed now: a rank whose collective failed
  // will not arrive again, and its peers' barriers should end at once
  // instead of at their timeout.
  void Depart();
  // Depart(), and end this rank's own waits too: a barrier in progress or
  // to come returns kUnavailable (within one liveness poll), even while the
  // peer it waits for lives on without arriving (stopped, or blocked
  // elsewhere), which neither its death nor its departure would signal.
  void Abandon();
  // Data slot `rank` of set `set` (0 or 1).
  std::byte* Slot(int set, int rank) const;
  size_t slot_bytes() const { return slot_bytes_; }

  // Publishes this rank's arrival at barrier `generation` and waits until
  // every rank has arrived there. A wait spins briefly (when spinning is
  // allowed, SetSpin) and then sleeps on the peer's futex word; `yield_for`
  // caps the spin, for waits known to be long (a peer on the network), where
  // spinning would take the core from the very processes being waited for.
  Status Barrier(int rank, uint64_t generation, std::chrono::milliseconds timeout,
                 std::chrono::microseconds yield_for = std::chrono::microseconds::max());

  // Whether waits spin before they sleep: the backend passes
  // KHOROVOD_SPIN_WAITS's answer (common/waiter_signal.h); until then, the
  // auto rule (allowed cores >= ranks). Call before the first Barrier.
  void SetSpin(bool spin) { spin_ = spin; }

 private:
  struct alignas(64) Line {
    std::atomic<uint64_t> arrived;
    std::atomic<int64_t> pid;
    // Ranks asleep on this line's futex word (so an arriver only makes the
    // wake-up system call when someone sleeps).
    std::atomic<uint32_t> sleepers;
  };
  ShmSegment(std::string name, int ranks, size_t slot_bytes, void* base, size_t bytes);
  Line& line(int rank) const { return static_cast<Line*>(base_)[rank]; }
  bool PeerGone(int rank) const;
  // Waits until rank `r` arrived at `generation`, it is gone, or `deadline`.
  // Spins at most `spin_at_most` (and only when spin_ allows), then sleeps.
  Status AwaitArrival(int r, uint64_t generation, std::chrono::steady_clock::time_point deadline,
                      std::chrono::microseconds spin_at_most) const;
  // Wakes every rank asleep on `rank`'s arrival counter.
  void WakeSleepers(int rank, bool always) const;

  std::string name_;
  int ranks_;
  size_t slot_bytes_;
  void* base_;
  size_t bytes_;
  bool linked_ = true;
  int attached_rank_ = -1;
  bool spin_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace khorovod::shm
