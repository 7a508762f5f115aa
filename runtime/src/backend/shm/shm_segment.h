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
// Thread-safety: one thread per rank uses its segment (the background
// thread); processes synchronize through the counters (release/acquire).
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
  static StatusOr<std::unique_ptr<ShmSegment>> Open(const std::string& name, int ranks, size_t slot_bytes);
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
  // Data slot `rank` of set `set` (0 or 1).
  std::byte* Slot(int set, int rank) const;
  size_t slot_bytes() const { return slot_bytes_; }

  // Publishes this rank's arrival at barrier `generation` and waits until
  // every rank has arrived there. A wait spins, then yields the core; one
  // that lasts longer than `yield_for` sleeps in short steps instead, for
  // waits known to be long (a peer on the network), where yielding in a
  // loop would take the core from the very processes being waited for.
  Status Barrier(int rank, uint64_t generation, std::chrono::milliseconds timeout,
                 std::chrono::microseconds yield_for = std::chrono::microseconds::max());

 private:
  struct alignas(64) Line {
    std::atomic<uint64_t> arrived;
    std::atomic<int64_t> pid;
  };
  ShmSegment(std::string name, int ranks, size_t slot_bytes, void* base, size_t bytes);
  Line& line(int rank) const { return static_cast<Line*>(base_)[rank]; }
  bool PeerGone(int rank) const;

  std::string name_;
  int ranks_;
  size_t slot_bytes_;
  void* base_;
  size_t bytes_;
  bool linked_ = true;
  int attached_rank_ = -1;
};

}  // namespace khorovod::shm
