// Thin, exception-free wrappers over Gloo's collectives, shared by the Gloo
// data-plane backend and the Gloo control channel.
//
// Gloo reports transport problems by throwing gloo::Exception (and, for some
// internal checks, gloo::EnforceNotMet). Every wrapper catches them and
// returns kUnavailable, so no exception crosses into the runtime.
//
// Thread-safety: calls on one gloo::Context must not overlap; the runtime's
// single background thread guarantees that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/reduce_kernels.h"
#include "khorovod/status.h"

namespace gloo {
class Context;
}

namespace khorovod::gloo_ops {

// Runs fn; whatever it throws (gloo::Exception, gloo::EnforceNotMet, any
// std::exception) comes back as kUnavailable naming `what`.
template <typename Fn>
Status Guarded(const char* what, Fn&& fn) {
  try {
    fn();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("gloo ") + what + " failed: " + e.what());
  }
}

Status Allreduce(const std::shared_ptr<gloo::Context>& ctx, const void* in, void* out, size_t count,
                 size_t element_size, ReduceFn reduce);
// Every rank sends its `bytes` bytes to every peer at once (one hop); `out`
// receives bytes * size bytes, rank r's contribution at offset r * bytes.
// `in` may point into `out` at this rank's offset. `slot` must be the same on
// every rank for this call and unused by any other call in flight.
Status DirectAllgather(const std::shared_ptr<gloo::Context>& ctx, const void* in, size_t bytes,
                       void* out, uint64_t slot);

// Byte-granular allgatherv: out receives bytes[r] bytes from each rank r.
Status AllgathervBytes(const std::shared_ptr<gloo::Context>& ctx, const void* in, void* out,
                       const std::vector<size_t>& bytes);
Status BroadcastBytes(const std::shared_ptr<gloo::Context>& ctx, void* buffer, size_t bytes,
                      int root);
Status AlltoallvBytes(const std::shared_ptr<gloo::Context>& ctx, const void* in,
                      const std::vector<int64_t>& send_bytes, void* out,
                      const std::vector<int64_t>& recv_bytes);
Status Barrier(const std::shared_ptr<gloo::Context>& ctx);

}  // namespace khorovod::gloo_ops
