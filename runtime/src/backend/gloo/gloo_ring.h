// A ring allreduce over a list of buffers treated as one concatenated
// vector, on Gloo's unbound-buffer transport: the fused tensors are reduced
// where they live, with no packing copy in and no unpacking copy out.
//
// The vector is split into one chunk per rank; a reduce-scatter pass and an
// allgather pass each take size-1 steps. Within a step a chunk moves as
// pieces of at most kPieceBytes that never straddle two buffers. The passes
// are pipelined across steps, as Gloo's own ring is: the chunk a step
// receives is the one the next step sends, so each piece is sent on as soon
// as it has been reduced (or, in the allgather, has landed), and receives
// are posted a step ahead into the other half of a double scratch buffer.
// No step waits for the previous one to drain, so a rank that is briefly
// descheduled (ranks outnumbering cores) leaves data queued on its links
// instead of idling them.
//
// `scratch` receives incoming pieces (two chunks' worth); the caller keeps
// it between calls so it is allocated and faulted in once, not per call.
//
// Thread-safety: one call at a time per gloo::Context (the background
// thread). Errors (a dead peer, the context's timeout) come back as
// kUnavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "common/reduce_kernels.h"

namespace gloo {
class Context;
}

namespace khorovod::gloo_ops {

inline constexpr size_t kPieceBytes = 1 << 20;

Status RingAllreduceSpans(const std::shared_ptr<gloo::Context>& ctx,
                          const std::vector<Backend::Span>& spans, size_t element_size,
                          ReduceFn reduce, uint64_t slot, std::vector<std::byte>* scratch);

}  // namespace khorovod::gloo_ops
