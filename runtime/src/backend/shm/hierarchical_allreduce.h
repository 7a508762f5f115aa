// HierarchicalAllreduce: allreduce for ranks that share hosts, through one
// shared-memory segment per host and, when there are several hosts, one
// Gloo allreduce per local rank across hosts.
//
// Per chunk (at most one segment slot per rank), on every rank of a host:
//   1. copy its chunk into its own slot;                           barrier
//   2. reduce-scatter: local rank l reduces part l of the chunk (1/local_size
//      of it) over every slot, in local-rank order, into slot 0;
//   3. cross-host allreduce of part l, in place in slot 0, among the ranks
//      with local rank l (the cross group: one per host, Gloo's direct
//      exchange or ring, backend/gloo); skipped with one host;   barrier
//   A chunk of at most kLeaderOnlyBytes across hosts has one part, local
//   rank 0's: the leaders alone reduce it and allreduce it across hosts.
//   4. allgather: every rank copies the whole of slot 0 out.
// Each link between hosts thus carries each byte of the chunk once per
// direction of the cross allreduce, split over local_size concurrent
// streams, while the flat ring sends every rank's share across it.
// Reduction order is fixed (local ranks in order, then the cross
// allreduce, whose result every member receives bit for bit), so every rank
// of the world gets bit-identical results. Chunks alternate between the
// segment's two slot sets, so step 1 of the next chunk never overwrites
// what a slower rank is still copying out.
//
// Connect is collective over the world: it derives the host and cross
// groups from every rank's placement (backend/shm/host_layout.h), connects
// their Gloo contexts (backend/gloo/rank_subset_context.h) and joins the
// host's segment. It returns null (not an error) when the layout does not
// allow it (uneven hosts, one rank per host, contradictory placements) or
// some host could not create its segment: then every rank falls back to
// Gloo, all of them alike.
//
// Failures: a barrier that times out or finds a host-mate gone, and a Gloo
// error across hosts, return kUnavailable; the object stays broken (every
// later call returns the same error) until the runtime re-forms and
// destroys it. On the first failure this rank marks itself departed in the
// segment and fails its cross-group connections, so its host-mates and
// cross peers stop waiting for it at once instead of at their timeout.
//
// Which allreduces take it: on one host, every one. Across hosts, every
// tensor up to kBandwidthBoundBytes (where hops, not bytes, set the time:
// 1.2x to 2.3x the flat ring at 3 hosts x 2 on 1 Gbit/s). Per direction a
// host-major flat ring of n ranks sends 2(n-1)/n of a tensor across a
// host's link and this path 2(h-1)/h for h hosts, but its chunks are not
// pipelined (copy in, reduce, cross step, copy out, one after another), so
// on a larger one the winner depends on the links' speed against the
// copies' CPU: the shm backend times both (backend/shm/path_trial.h), and
// a fused group counts as one tensor of its total size.
//
// Thread-safety: one thread (the runtime's background thread) uses it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/shm/host_layout.h"
#include "backend/shm/shm_segment.h"
#include "khorovod/config.h"

namespace gloo {
class Context;
}

namespace khorovod::shm {

class HierarchicalAllreduce {
 public:
  // Bytes of one rank's slot: the largest chunk.
  static constexpr size_t kSlotBytes = 2 << 20;

  // Largest chunk that only the hosts' leaders (local rank 0) reduce and
  // send across hosts, whole.
  static constexpr size_t kLeaderOnlyBytes = 64 << 10;

  // Largest tensor that takes this path whatever the layout.
  static constexpr size_t kBandwidthBoundBytes = 2 * kSlotBytes;
  // Whether a tensor of `bytes` takes this path on `hosts` hosts without a
  // trial against the flat ring (the same answer on every rank).
  static bool TakesWithoutTrial(int hosts, size_t bytes);
  bool TakesWithoutTrial(size_t bytes) const { return TakesWithoutTrial(hosts(), bytes); }

  // Collective over `world` (every rank calls it with its own config).
  static StatusOr<std::unique_ptr<HierarchicalAllreduce>> Connect(
      const Config& config, const std::shared_ptr<gloo::Context>& world);

  HierarchicalAllreduce(std::unique_ptr<ShmSegment> segment, HostLayout layout, int local_rank,
                        int local_size, std::shared_ptr<gloo::Context> host,
                        std::shared_ptr<gloo::Context> cross,
                        std::unique_ptr<Backend> cross_backend, std::chrono::milliseconds timeout);
  ~HierarchicalAllreduce();

  // out = reduce(in over all ranks); `in` and `out` may alias.
  Status Allreduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op);
  // Reduces every span in place as one concatenated vector: its chunks are
  // filled from consecutive spans, so a fused allreduce of many tensors
  // costs the chunks (barriers, cross-host steps) of its total size, not
  // one pass per tensor.
  Status AllreduceSpans(const std::vector<Backend::Span>& spans, DataType dtype, ReduceOp op);

  int hosts() const;
  // Which ranks share a host, and this rank's host group (connected): what
  // the shm backend's control channel across hosts is built from.
  const HostLayout& layout() const { return layout_; }
  const std::shared_ptr<gloo::Context>& host_context() const { return host_; }
  // Chunks reduced so far (each: two barriers and, across hosts, one
  // cross-host allreduce).
  uint64_t chunks() const { return chunks_; }

 private:
  // Part of a buffer to reduce: `count` elements from `in` into `out`.
  struct Piece {
    const std::byte* in;
    std::byte* out;
    size_t count;
  };
  // Reduces the pieces as one vector, chunk by chunk; a failure breaks
  // this object (Fail).
  Status Run(const std::vector<Piece>& pieces, DataType dtype, ReduceOp op);
  Status RunChunks(const std::vector<Piece>& pieces, DataType dtype, ReduceOp op);
  // One chunk made of `parts` (together at most a slot).
  Status Chunk(const std::vector<Piece>& parts, DataType dtype, ReduceOp op);
  // This rank's part of a chunk of `count` elements: {first, count}.
  std::pair<size_t, size_t> PartOf(size_t count, size_t esize) const;
  // Marks this rank gone for its peers (see the header comment).
  void Fail(const Status& why);

  std::unique_ptr<ShmSegment> segment_;
  HostLayout layout_;
  int local_rank_, local_size_;
  std::shared_ptr<gloo::Context> host_;   // kept for the segment's lifetime
  std::shared_ptr<gloo::Context> cross_;  // null with one host
  std::unique_ptr<Backend> cross_backend_;
  std::chrono::milliseconds timeout_;
  uint64_t generation_ = 0;
  uint64_t chunks_ = 0;
  Status broken_;
};

}  // namespace khorovod::shm
