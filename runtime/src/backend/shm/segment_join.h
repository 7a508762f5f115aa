// JoinSegment: the ranks of one Gloo context (one host's ranks) come to
// share one ShmSegment (backend/shm/shm_segment.h).
//
// Rank 0 of `ctx` creates the segment and broadcasts its name; the others
// open it. Every rank learns whether all succeeded, so all use it or none
// does: a null segment (not an error) means some rank could not create or
// map it (e.g. /dev/shm too small), and the callers fall back to Gloo. Once
// every rank has mapped it, the name is unlinked.
//
// Errors: kUnavailable when a collective on `ctx` fails.
//
// Thread-safety: a free function; collective over `ctx`.
#pragma once

#include <cstddef>
#include <memory>

#include "backend/shm/shm_segment.h"
#include "khorovod/status.h"

namespace gloo {
class Context;
}

namespace khorovod::shm {

StatusOr<std::unique_ptr<ShmSegment>> JoinSegment(const std::shared_ptr<gloo::Context>& ctx,
                                                  size_t slot_bytes);

// Whether every rank of `world` joined its host's segment (`joined`: this
// rank's), so that every host uses shared memory or none does. Collective
// over `world`; kUnavailable when the allreduce fails.
StatusOr<bool> EveryHostJoined(const std::shared_ptr<gloo::Context>& world, bool joined);

}  // namespace khorovod::shm
