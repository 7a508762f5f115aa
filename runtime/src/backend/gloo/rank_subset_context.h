// ConnectRankSubset: a Gloo context over a subset of the world's ranks (one
// host's ranks, or the ranks with one local rank across hosts), connected
// through the world's own Gloo context.
//
// Every rank of `world` calls it at the same point, each naming the group it
// belongs to (groups are disjoint; a group of one is allowed). The group's
// members exchange their pair addresses in one allgather over the world
// context (a store over the world: no file store or rendezvous server is
// needed again), then connect a full mesh among themselves with
// ConnectAbandonableMesh on the world's transport device (same interface and
// address), bounded by `timeout`, which is also the new context's timeout.
//
// The new context's rank r is members[r]: members must be in the same order
// on every member, and contain the caller's world rank. Abandoning the
// world's connections (AbandonMesh on `world`, from any thread) abandons
// the subset's as well.
//
// Errors: kUnavailable when the world allgather or a pair's connect fails or
// times out (the caller treats the world as broken); kInvalidArgument for a
// group that does not contain the caller.
//
// Thread-safety: a free function; it uses `world` for its collectives, so no
// other call may use `world` concurrently.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "khorovod/status.h"

namespace gloo {
class Context;
}

namespace khorovod::gloo_ops {

StatusOr<std::shared_ptr<gloo::Context>> ConnectRankSubset(
    const std::shared_ptr<gloo::Context>& world, const std::vector<int>& members,
    std::chrono::milliseconds timeout);

}  // namespace khorovod::gloo_ops
