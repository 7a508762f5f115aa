#include "khorovod/parameters.h"

namespace khorovod {
namespace {

Status WaitAll(const std::vector<Handle>& handles) {
  Status first;
  for (const Handle& h : handles) {
    Status s = h.wait();
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace

Status broadcast_parameters(Runtime& runtime, const std::vector<NamedTensor>& parameters,
                            int root_rank) {
  std::vector<Handle> handles;
  handles.reserve(parameters.size());
  for (const NamedTensor& p : parameters) {
    handles.push_back(runtime.broadcast_async("broadcast." + p.name, p.view, {root_rank}));
  }
  return WaitAll(handles);
}

Status allreduce_gradients(Runtime& runtime, const std::vector<NamedTensor>& gradients,
                           const AllreduceOptions& options) {
  std::vector<Handle> handles;
  handles.reserve(gradients.size());
  for (const NamedTensor& g : gradients) {
    handles.push_back(runtime.allreduce_async("allreduce." + g.name, g.view, g.view, options));
  }
  return WaitAll(handles);
}

}  // namespace khorovod
