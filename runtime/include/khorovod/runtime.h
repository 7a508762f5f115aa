// Runtime: the Horovod-style API of khorovod.
//
// One Runtime object per process, owned by main (there is no hidden global).
// init() connects to the other ranks and starts a background thread that
// negotiates which named tensors every rank has submitted and executes them
// in the same order everywhere, fusing small allreduces into one buffer.
//
// Tensors are identified by name: ranks may submit them in any order and at
// different times. Names must be unique among the operations in flight on a
// rank; a duplicate fails with kAlreadyExists. Buffers passed as TensorView
// must stay valid until the returned Handle completes.
//
// Device tensors (TensorView::device = {kCUDA, i}) run on the device
// backend (KHOROVOD_GPU_OPERATIONS, docs/gpu.md). `i` must be the GPU this
// rank is pinned to (KHOROVOD_GPU_DEVICE, else local_rank modulo the
// visible devices; kept across elastic resets), else kInvalidArgument. The
// runtime works on its own stream: the caller must have finished writing
// the inputs (synchronized its stream) before submitting. When the Handle
// completes, the device results are complete; allgather, alltoall and
// reducescatter return them as device Tensors (Tensor::device_storage).
//
// Every call made before init() (or after shutdown()) completes immediately
// with kFailedPrecondition. rank(), size() and friends return -1 then.
//
// Errors are returned, never thrown: a mismatch across ranks (kMismatch), a
// broken peer (kUnavailable). Each is delivered on every rank that submitted
// the tensor. A stall is not an error (as in Horovod): rank 0 warns, naming
// the tensors and the missing ranks, every Config::stall_warning_time; past
// Config::stall_shutdown_time (when set) the job shuts down and every
// pending and later operation fails with kAborted.
//
// Thread-safety: all methods may be called from any thread, concurrently.
// init() and shutdown() must not race with each other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "khorovod/config.h"
#include "khorovod/handle.h"
#include "khorovod/ops.h"
#include "khorovod/process_set.h"
#include "khorovod/status.h"
#include "khorovod/tensor.h"

namespace khorovod {

class Runtime;
class RuntimeImpl;
// What the elastic layer reaches inside a Runtime (runtime/src/core/
// runtime_internals.h); opaque here.
class RuntimeInternals;

// This process's place in the running generation; every field is -1
// before init().
using Topology = Placement;

class Runtime {
 public:
  Runtime();
  ~Runtime();  // calls shutdown()
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  Status init(const Config& config);
  // Reads the configuration from KHOROVOD_* environment variables.
  Status init();
  // Collective: every rank should call it. Pending operations complete with
  // kAborted. Idempotent.
  Status shutdown();
  bool is_initialized() const;

  // Elastic jobs: leaves the current generation, joins the next one through
  // the rendezvous server and reconnects, taking the new rank and size.
  // Pending operations fail with kAborted. Fails with kFailedPrecondition in
  // a job started without a rendezvous server.
  Status reset();
  // True when the rendezvous server announced that workers joined or left,
  // so the job should re-form at its next commit. Always false outside
  // elastic jobs.
  bool membership_changed() const;
  // Called by elastic commits (elastic::State::commit, Python's
  // State.commit) right after every rank agreed whether to re-form. Marks
  // that this process commits, so a SIGTERM is from then on deferred to the
  // next commit (docs/elastic.md, "Leaving at a commit"); when a deferred
  // SIGTERM was part of this commit's agreement, leaves the job and ends the
  // process as SIGTERM would (the survivors re-form without rolling back).
  void at_commit_boundary();

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  int cross_rank() const;
  int cross_size() const;
  Topology topology() const;

  // --- asynchronous collectives -------------------------------------------
  // `output` may alias `input` (in-place). Shapes and dtypes must match.
  Handle allreduce_async(const std::string& name, const TensorView& input, const TensorView& output,
                         const AllreduceOptions& options = {});
  // All tensors of a group are reduced together, in one fused step.
  Handle grouped_allreduce_async(const std::vector<std::string>& names,
                                 const std::vector<TensorView>& inputs,
                                 const std::vector<TensorView>& outputs,
                                 const AllreduceOptions& options = {});
  Handle allgather_async(const std::string& name, const TensorView& input,
                         const AllgatherOptions& options = {});
  // In place: on root the buffer is the source, elsewhere the destination.
  Handle broadcast_async(const std::string& name, const TensorView& buffer,
                         const BroadcastOptions& options = {});
  Handle alltoall_async(const std::string& name, const TensorView& input,
                        const AlltoallOptions& options = {});
  Handle reducescatter_async(const std::string& name, const TensorView& input,
                             const ReducescatterOptions& options = {});

  // barrier() and join() as operations: the Handle completes when they
  // would return (join's last rank: Handle::join_last_rank()).
  Handle barrier_async(int process_set = kGlobalProcessSet);
  Handle join_async();

  Status synchronize(const Handle& handle) const { return handle.wait(); }
  bool poll(const Handle& handle) const { return handle.ready(); }

  // --- blocking conveniences ------------------------------------------------
  Status allreduce(const std::string& name, const TensorView& input, const TensorView& output,
                   const AllreduceOptions& options = {});
  Status grouped_allreduce(const std::vector<std::string>& names,
                           const std::vector<TensorView>& inputs,
                           const std::vector<TensorView>& outputs,
                           const AllreduceOptions& options = {});
  Status allgather(const std::string& name, const TensorView& input, Tensor* output,
                   const AllgatherOptions& options = {});
  Status broadcast(const std::string& name, const TensorView& buffer,
                   const BroadcastOptions& options = {});
  Status alltoall(const std::string& name, const TensorView& input, Tensor* output,
                  std::vector<int64_t>* received_splits = nullptr,
                  const AlltoallOptions& options = {});
  Status reducescatter(const std::string& name, const TensorView& input, Tensor* output,
                       const ReducescatterOptions& options = {});
  // Blocks until every rank (of the process set) reached the barrier.
  Status barrier(int process_set = kGlobalProcessSet);
  // Declares that this rank has no more data. Until every rank has joined,
  // the other ranks' allreduces proceed with this rank contributing zeros;
  // other collectives fail with kFailedPrecondition while a rank is joined.
  // Returns the last rank to join in *last_rank.
  Status join(int* last_rank = nullptr);

  // --- timeline (docs/observability.md) -------------------------------------
  // Writes a Chrome-trace timeline to `path` from now until stop_timeline()
  // (or shutdown), as KHOROVOD_TIMELINE does from init(): "{rank}" in the
  // path becomes the rank, else only rank 0 writes. A running timeline is
  // completed first. `mark_cycles` adds a CYCLE_START mark per negotiation
  // round that did work. kFailedPrecondition before init(),
  // kInvalidArgument when the file cannot be created.
  Status start_timeline(const std::string& path, bool mark_cycles = false);
  // Completes the file (a valid JSON array). Idempotent.
  Status stop_timeline();

  // --- process sets (khorovod/process_set.h) -------------------------------
  // Collective over the whole job: every rank passes the same ranks
  // (ascending, distinct, within [0, size)). Returns the new set's id;
  // kInvalidArgument for a bad list or one already registered, kMismatch
  // when ranks pass different lists.
  StatusOr<int> add_process_set(const std::vector<int>& ranks);
  // Collective over the whole job. Operations pending on the set fail with
  // kFailedPrecondition. The global set cannot be removed.
  Status remove_process_set(int process_set);
  // The registered set ids, ascending (0 first); empty before init().
  std::vector<int> process_set_ids() const;
  // The set's global ranks; empty when `process_set` is not registered.
  std::vector<int> process_set_ranks(int process_set) const;
  // This rank's place in the set; -1 when it is not a member (or the set
  // is not registered).
  int process_set_rank(int process_set) const;
  int process_set_size(int process_set) const;  // -1 when not registered

  // --- training-step marks (docs/observability.md) -------------------------
  // Mark the training loop's steps so the worker can export step time split
  // into compute and exposed communication (time blocked waiting for
  // collectives), samples, throughput and scaling efficiency. begin_step()
  // is optional: without it a step starts where the previous one ended (or
  // at the end of the last elastic recovery). end_step() takes the samples
  // this rank processed in the step. Cheap (a few atomics); valid before
  // init() too (the marks are simply recorded).
  void begin_step();
  void end_step(int64_t samples);

 private:
  friend class RuntimeInternals;
  std::unique_ptr<RuntimeImpl> impl_;
};

}  // namespace khorovod
