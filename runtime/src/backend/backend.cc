#include "backend/backend.h"

#include <cstring>

namespace khorovod {

Status Backend::AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) {
  const size_t esize = DataTypeSize(dtype);
  size_t total = 0;
  for (const Span& s : spans) total += s.count;
  std::vector<std::byte> packed(total * esize);
  size_t offset = 0;
  for (const Span& s : spans) {
    if (s.count) std::memcpy(packed.data() + offset, s.data, s.count * esize);
    offset += s.count * esize;
  }
  KH_RETURN_IF_ERROR(Allreduce(packed.data(), packed.data(), total, dtype, op));
  offset = 0;
  for (const Span& s : spans) {
    if (s.count) std::memcpy(s.data, packed.data() + offset, s.count * esize);
    offset += s.count * esize;
  }
  return Status::Ok();
}

}  // namespace khorovod
