// Handle: the future returned by every asynchronous collective.
//
// Completion happens on the runtime's background thread; waiting happens on
// the caller's. A Handle is cheap to copy and all copies refer to the same
// operation.
//
// Thread-safety: all methods may be called concurrently from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "khorovod/status.h"
#include "khorovod/tensor.h"

namespace khorovod {

// The operation's shared state (runtime/src/core/completion.h); opaque here.
class Completion;

class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<Completion> c) : completion_(std::move(c)) {}

  bool valid() const { return completion_ != nullptr; }
  // True once the operation finished, successfully or not. Never blocks.
  bool ready() const;
  // Blocks until the operation finished and returns its status.
  Status wait() const;
  // As wait(), but gives up after `timeout` with kDeadlineExceeded (the
  // operation itself keeps running).
  Status wait_for(std::chrono::milliseconds timeout) const;
  // The result tensor of allgather, alltoall and reducescatter. Call after a
  // successful wait(); moves the tensor out, so a second call returns an
  // empty tensor.
  Tensor take_output() const;
  // For alltoall: rows received from each rank.
  std::vector<int64_t> received_splits() const;
  // Runs `callback(status)` once the operation finished: at once on this
  // thread when it already has, else on the runtime's background thread.
  // The callback must be short and must not block or submit-and-wait (it
  // holds up every later completion); results (take_output) are ready when
  // it runs. For frameworks whose kernels complete asynchronously
  // (TensorFlow's AsyncOpKernel).
  void on_done(std::function<void(const Status&)> callback) const;
  // For join: the last rank that joined.
  int join_last_rank() const;

  const std::shared_ptr<Completion>& completion() const { return completion_; }

 private:
  std::shared_ptr<Completion> completion_;
};

}  // namespace khorovod
