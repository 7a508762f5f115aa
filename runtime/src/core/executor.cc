#include "core/executor.h"

#include <cstring>
#include <numeric>

#include "common/enforce.h"
#include "common/reduce_kernels.h"
#include "core/adasum.h"
#include "core/device_adasum.h"
#include "core/eager_allreduce.h"
#include "core/fusion.h"

namespace khorovod {
namespace {

// memcpy that accepts the null pointers of empty tensors.
void CopyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

}  // namespace

Executor::Executor(const Placement& placement, size_t fusion_threshold, Backend* backend,
                   DeviceBackend* device, TensorQueue* queue, WorkerMetrics* metrics,
                   Timeline* timeline)
    : placement_(placement),
      fusion_threshold_(fusion_threshold),
      backend_(backend),
      device_(device),
      device_reducer_(placement.rank, placement.size, fusion_threshold),
      queue_(queue),
      metrics_(metrics),
      timeline_(timeline) {}

namespace {

bool OnDevice(const Response& r) { return r.device.kind != DeviceKind::kCPU; }

// A device backend's refusal of one operation (kInvalidArgument, decided
// alike on every rank before anything is sent) leaves it usable; any other
// failure does not.
bool Fatal(const Response& r, const Status& s, bool backend_ok) {
  if (s.ok()) return false;
  return !(OnDevice(r) && backend_ok && s.code() == StatusCode::kInvalidArgument);
}

// Timeline phase names; string literals, as Timeline::Record requires.
struct Phases {
  const char* negotiate;
  const char* op;
};

Phases PhasesOf(OpType op) {
  switch (op) {
    case OpType::kAllreduce:
      return {"NEGOTIATE_ALLREDUCE", "ALLREDUCE"};
    case OpType::kAllgather:
      return {"NEGOTIATE_ALLGATHER", "ALLGATHER"};
    case OpType::kBroadcast:
      return {"NEGOTIATE_BROADCAST", "BROADCAST"};
    case OpType::kAlltoall:
      return {"NEGOTIATE_ALLTOALL", "ALLTOALL"};
    case OpType::kReducescatter:
      return {"NEGOTIATE_REDUCESCATTER", "REDUCESCATTER"};
    case OpType::kBarrier:
      return {"NEGOTIATE_BARRIER", "BARRIER"};
    case OpType::kJoin:
      return {"NEGOTIATE_JOIN", "JOIN"};
    case OpType::kProcessSet:
      return {"NEGOTIATE_PROCESS_SET", "PROCESS_SET"};
  }
  return {"NEGOTIATE", "OP"};
}

}  // namespace

void Executor::TraceOp(const PendingOp& op, TimePoint start, TimePoint end) {
  const size_t bytes = op.input.num_bytes();
  const Phases phases = PhasesOf(op.request.op);
  timeline_->Record(op.request.name, phases.negotiate, op.submitted, start, bytes);
  timeline_->Record(op.request.name, phases.op, start, end, bytes);
}

std::byte* Executor::FusionBuffer(size_t bytes) {
  if (fusion_buffer_.size() < bytes) fusion_buffer_.resize(bytes);
  return fusion_buffer_.data();
}

void Executor::ApplyPostScale(const Response& r, void* data, size_t count) {
  if (r.reduce_op == ReduceOp::kAverage) Divide(data, count, r.dtype, placement_.size);
  Scale(data, count, r.dtype, r.postscale);
}

Status Executor::Execute(const std::vector<Response>& responses, Negotiator& negotiator) {
  for (const std::vector<size_t>& group : PlanFusion(responses, fusion_threshold_)) {
    const Response& head = responses[group.front()];
    if (head.op == OpType::kAllreduce) {
      std::vector<const Response*> members;
      for (size_t i : group) members.push_back(&responses[i]);
      KH_RETURN_IF_ERROR(RunAllreduce(members, negotiator));
      continue;
    }
    std::optional<PendingOp> op = negotiator.Take(head.names.front());
    KH_ENFORCE(op.has_value(), "no local op for " << OpTypeName(head.op) << " '"
                                                  << head.names.front()
                                                  << "' (only allreduce runs without one)");
    const TimePoint start = std::chrono::steady_clock::now();
    Status s;
    StatusOr<Backend*> backend = BackendFor(head);
    if (!backend.ok()) {
      s = backend.status();
    } else {
      Backend& b = **backend;
      switch (head.op) {
        case OpType::kAllgather:
          s = RunAllgather(b, head, *op);
          break;
        case OpType::kBroadcast:
          s = b.Broadcast(op->input.data, static_cast<size_t>(head.total_elements()), head.dtype,
                          head.root);
          break;
        case OpType::kAlltoall:
          s = RunAlltoall(b, head, *op);
          break;
        case OpType::kReducescatter:
          s = RunReducescatter(b, head, *op);
          break;
        case OpType::kBarrier:
          s = b.Barrier();
          break;
        default:
          KH_ENFORCE(false, "unexpected op " << OpTypeName(head.op));
      }
      if (b.device_ops()) {
        Status flushed = b.device_ops()->Flush();
        if (s.ok()) s = flushed;
      }
    }
    if (metrics_ || timeline_) {
      const TimePoint end = std::chrono::steady_clock::now();
      if (metrics_) metrics_->Collective(head.op, 1, op->input.num_bytes(), end - start);
      if (timeline_) TraceOp(*op, start, end);
    }
    queue_->Complete(*op, s);
    if (Fatal(head, s, backend.ok())) return s;
  }
  return Status::Ok();
}

void Executor::CompleteEager(const std::vector<Negotiator::EagerAllreduce>& eager,
                             Negotiator& negotiator) {
  for (const Negotiator::EagerAllreduce& e : eager) {
    std::optional<PendingOp> op = negotiator.Take(e.response.names.front());
    KH_ENFORCE(op.has_value(),
               "eager allreduce '" << e.response.names.front() << "' has no local op");
    const TimePoint start = std::chrono::steady_clock::now();
    ReduceEager(e.response, e.contributions, op->output.data);
    if (metrics_ || timeline_) {
      const TimePoint end = std::chrono::steady_clock::now();
      if (metrics_) metrics_->EagerAllreduce(op->input.num_bytes());
      if (timeline_) TraceOp(*op, start, end);
    }
    queue_->Complete(*op, Status::Ok());
  }
}

StatusOr<Backend*> Executor::BackendFor(const Response& r) {
  if (!OnDevice(r)) return backend_;
  if (!device_) return Status::InvalidArgument("this runtime has no device backend");
  return device_->Get();
}

StatusOr<Tensor> Executor::NewResult(Backend& backend, const PendingOp& op, DataType dtype,
                                     Shape shape) {
  if (!backend.device_ops()) return Tensor(dtype, std::move(shape));
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DataTypeSize(dtype);
  auto memory = backend.device_ops()->Allocate(bytes);
  if (!memory.ok()) return memory.status();
  return Tensor::OnDevice(dtype, std::move(shape), op.input.device, std::move(*memory));
}

Status Executor::RunAllreduce(const std::vector<const Response*>& group, Negotiator& negotiator) {
  const Response& head = *group.front();
  const size_t esize = DataTypeSize(head.dtype);
  std::vector<std::optional<PendingOp>> ops;
  size_t total = 0;
  for (const Response* r : group) {
    ops.push_back(negotiator.Take(r->names.front()));
    total += static_cast<size_t>(r->total_elements());
  }
  const TimePoint start = std::chrono::steady_clock::now();
  TimePoint packed_at = start, reduced_at = start;
  auto complete_all = [&](const Status& s) {
    if (metrics_ || timeline_) {
      const TimePoint end = std::chrono::steady_clock::now();
      const size_t bytes = total * esize;
      if (metrics_) {
        metrics_->Collective(OpType::kAllreduce, group.size(), bytes, end - start);
        if (group.size() > 1) metrics_->FusedAllreduce(bytes);
      }
      if (timeline_) {
        const size_t fused = group.size() > 1 ? group.size() : 0;
        for (auto& op : ops) {
          if (!op) continue;
          const size_t mine = op->input.num_bytes();
          timeline_->Record(op->request.name, "NEGOTIATE_ALLREDUCE", op->submitted, start, mine);
          if (fused)
            timeline_->Record(op->request.name, "MEMCPY_IN_FUSION_BUFFER", start, packed_at, mine,
                              fused);
          timeline_->Record(op->request.name, "ALLREDUCE", packed_at, reduced_at, mine, fused);
          if (fused)
            timeline_->Record(op->request.name, "MEMCPY_OUT_FUSION_BUFFER", reduced_at, end, mine,
                              fused);
        }
      }
    }
    for (auto& op : ops) {
      if (op) queue_->Complete(*op, s);
    }
  };

  StatusOr<Backend*> backend = BackendFor(head);
  Status s;
  if (!backend.ok())
    s = backend.status();
  else if (DeviceOps* device = (*backend)->device_ops()) {
    if (head.reduce_op == ReduceOp::kAdasum) {  // never fused (core/fusion.cc)
      packed_at = std::chrono::steady_clock::now();
      s = DeviceAdasum(*device, *backend_, placement_, head, ops.front(), adasum_scratch_);
      reduced_at = std::chrono::steady_clock::now();
    } else {
      s = device_reducer_.Allreduce(*device, group, ops, &packed_at, &reduced_at);
    }
  } else {
    s = ReduceOnHost(group, ops, &packed_at, &reduced_at);
  }
  complete_all(s);
  return Fatal(head, s, backend.ok()) ? s : Status::Ok();
}

Status Executor::ReduceOnHost(const std::vector<const Response*>& group,
                              std::vector<std::optional<PendingOp>>& ops, TimePoint* packed_at,
                              TimePoint* reduced_at) {
  const Response& head = *group.front();
  const size_t esize = DataTypeSize(head.dtype);
  const size_t total = static_cast<size_t>(
      std::accumulate(group.begin(), group.end(), int64_t{0},
                      [](int64_t n, const Response* r) { return n + r->total_elements(); }));
  // The path taken must depend only on the responses, which every rank
  // shares, never on whether this rank has the tensor (a joined rank does not).
  if (group.size() == 1) {
    // A lone tensor is reduced straight from the input into the output; a
    // joined rank contributes zeros.
    const void* in;
    void* out;
    if (ops.front()) {
      in = ops.front()->input.data;
      out = ops.front()->output.data;
    } else {
      out = FusionBuffer(total * esize);
      FillZeros(out, total, head.dtype);
      in = out;
    }
    if (head.prescale != 1.0) {
      if (in != out) CopyBytes(out, in, total * esize);
      Scale(out, total, head.dtype, head.prescale);
      in = out;
    }
    *packed_at = std::chrono::steady_clock::now();
    Status s;
    if (head.reduce_op == ReduceOp::kAdasum) {
      if (in != out) CopyBytes(out, in, total * esize);
      s = AdasumAllreduce(*backend_, out, total, head.dtype, placement_.rank, placement_.size);
    } else {
      s = backend_->Allreduce(in, out, total, head.dtype, head.reduce_op);
    }
    *reduced_at = std::chrono::steady_clock::now();
    if (s.ok()) ApplyPostScale(head, out, total);
    return s;
  }

  const FusedMembers members = MembersOf(group, ops);
  const FusionLayout layout = LayoutFusedAllreduce(members.bytes, members.present);
  std::byte* buffer = FusionBuffer(layout.buffer_bytes);
  auto copy = [](void* dst, const void* src, size_t bytes) {
    CopyBytes(dst, src, bytes);
    return Status::Ok();
  };
  auto zero = [](void* dst, size_t bytes) {
    std::memset(dst, 0, bytes);
    return Status::Ok();
  };
  KH_RETURN_IF_ERROR(PackFusion(layout, buffer, members.inputs, members.outputs, copy, zero));
  const std::vector<Backend::Span> spans = layout.Spans(buffer, members.outputs, esize);
  for (const auto& span : spans) Scale(span.data, span.count, head.dtype, head.prescale);
  *packed_at = std::chrono::steady_clock::now();
  Status s = backend_->AllreduceSpans(spans, head.dtype, head.reduce_op);
  *reduced_at = std::chrono::steady_clock::now();
  if (s.ok()) {
    for (const auto& span : spans) ApplyPostScale(head, span.data, span.count);
    s = UnpackFusion(layout, buffer, members.outputs, copy);
  }
  // Large one-off fusions should not pin their memory forever.
  if (fusion_buffer_.size() > fusion_threshold_) fusion_buffer_ = {};
  return s;
}

Status Executor::RunAllgather(Backend& backend, const Response& r, PendingOp& op) {
  int64_t rows = 0;
  std::vector<size_t> counts;
  for (int64_t n : r.sizes) {
    rows += n;
    counts.push_back(static_cast<size_t>(n * r.row_elements));
  }
  auto result = NewResult(backend, op, r.dtype, WithFirstDim(rows, op.request.shape));
  if (!result.ok()) return result.status();
  KH_RETURN_IF_ERROR(backend.Allgatherv(op.input.data, result->data(), counts, r.dtype));
  op.completion->SetOutput(std::move(*result));
  return Status::Ok();
}

Status Executor::RunAlltoall(Backend& backend, const Response& r, PendingOp& op) {
  const int rank = placement_.rank, size = placement_.size;
  std::vector<int64_t> send(size), recv(size), received_rows(size);
  int64_t rows = 0;
  for (int peer = 0; peer < size; ++peer) {
    send[peer] = r.sizes[rank * size + peer] * r.row_elements;
    received_rows[peer] = r.sizes[peer * size + rank];
    recv[peer] = received_rows[peer] * r.row_elements;
    rows += received_rows[peer];
  }
  auto result = NewResult(backend, op, r.dtype, WithFirstDim(rows, op.request.shape));
  if (!result.ok()) return result.status();
  KH_RETURN_IF_ERROR(backend.Alltoallv(op.input.data, send, result->data(), recv, r.dtype));
  op.completion->SetOutput(std::move(*result), std::move(received_rows));
  return Status::Ok();
}

Status Executor::RunReducescatter(Backend& backend, const Response& r, PendingOp& op) {
  if (DeviceOps* device = backend.device_ops())
    return device_reducer_.Reducescatter(*device, r, op);
  const int64_t total_rows = r.sizes.front();
  const size_t count = static_cast<size_t>(total_rows * r.row_elements);
  const size_t esize = DataTypeSize(r.dtype);
  std::byte* buffer = FusionBuffer(count * esize);
  CopyBytes(buffer, op.input.data, count * esize);
  Scale(buffer, count, r.dtype, r.prescale);
  KH_RETURN_IF_ERROR(backend_->Allreduce(buffer, buffer, count, r.dtype, r.reduce_op));
  const RowRange mine_rows = ReducescatterRows(total_rows, placement_.size, placement_.rank);
  Tensor result(r.dtype, WithFirstDim(mine_rows.count, op.request.shape));
  const size_t my_count = static_cast<size_t>(mine_rows.count * r.row_elements);
  std::byte* mine = buffer + static_cast<size_t>(mine_rows.first * r.row_elements) * esize;
  ApplyPostScale(r, mine, my_count);
  CopyBytes(result.data(), mine, my_count * esize);
  op.completion->SetOutput(std::move(result));
  if (fusion_buffer_.size() > fusion_threshold_) fusion_buffer_ = {};
  return Status::Ok();
}

}  // namespace khorovod
