#include "backend/shm/segment_join.h"

#include <gloo/context.h>

#include <cstdio>

#include "backend/gloo/gloo_ops.h"
#include "common/reduce_kernels.h"

namespace khorovod::shm {
namespace {

constexpr size_t kNameBytes = 64;

}  // namespace

StatusOr<std::unique_ptr<ShmSegment>> JoinSegment(const std::shared_ptr<gloo::Context>& ctx,
                                                  size_t slot_bytes) {
  const int rank = ctx->rank, size = ctx->size;
  std::unique_ptr<ShmSegment> segment;
  Status local;
  char name[kNameBytes] = {};
  if (rank == 0) {
    auto created = ShmSegment::Create(size, slot_bytes);
    if (created.ok()) {
      segment = std::move(*created);
      std::snprintf(name, sizeof name, "%s", segment->name().c_str());
    } else {
      local = created.status();
    }
  }
  KH_RETURN_IF_ERROR(gloo_ops::BroadcastBytes(ctx, name, sizeof name, 0));
  if (rank != 0 && name[0] != '\0') {
    auto opened = ShmSegment::Open(name, size, slot_bytes);
    if (opened.ok())
      segment = std::move(*opened);
    else
      local = opened.status();
  }
  if (rank != 0 && name[0] == '\0')
    local = Status::Unavailable("rank 0 could not create the segment");
  int32_t ok = local.ok() ? 1 : 0;
  KH_RETURN_IF_ERROR(gloo_ops::Allreduce(ctx, &ok, &ok, 1, sizeof ok,
                                         GetReduceFn(DataType::kInt32, ReduceOp::kMin)));
  if (segment) segment->Attach(rank);
  // Every rank has mapped it (or given up): the name can go.
  KH_RETURN_IF_ERROR(gloo_ops::Barrier(ctx));
  if (segment) segment->Unlink();
  if (!ok) {
    if (!local.ok())
      std::fprintf(stderr, "khorovod: shm backend falls back to gloo: %s\n",
                   local.ToString().c_str());
    return std::unique_ptr<ShmSegment>();
  }
  return segment;
}

StatusOr<bool> EveryHostJoined(const std::shared_ptr<gloo::Context>& world, bool joined) {
  int32_t ok = joined ? 1 : 0;
  KH_RETURN_IF_ERROR(gloo_ops::Allreduce(world, &ok, &ok, 1, sizeof ok,
                                         GetReduceFn(DataType::kInt32, ReduceOp::kMin)));
  return ok == 1;
}

}  // namespace khorovod::shm
