// Status and StatusOr: the error model of the khorovod runtime API.
//
// Everything that can go wrong in normal operation (a peer that died, a tensor
// whose shape differs across ranks, a stall, a call before init) is reported
// as a Status, never as an exception or an abort. Invariant violations inside
// the runtime use KH_ENFORCE (see src/common/enforce.h) and are converted to
// Status::Internal at the background thread's boundary.
//
// Thread-safety: Status and StatusOr are values; distinct objects may be used
// from different threads without synchronization.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <utility>

namespace khorovod {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is malformed (bad dtype, shape, root)
  kFailedPrecondition,  // the runtime is not in a state to serve the call (not initialized)
  kAlreadyExists,       // a tensor with this name is already in flight on this rank
  kMismatch,            // ranks disagree on a tensor's shape, dtype, op or root
  kStalled,             // no longer produced: a stall warns, or shuts down with kAborted (Horovod)
  kUnavailable,         // a peer failed or a connection broke; recoverable by a reset
  kDeadlineExceeded,    // a bounded wait expired
  kAborted,             // the runtime was shut down while the operation was pending
  kInternal,            // a bug in khorovod: an invariant did not hold
  kMembershipChanged,   // elastic: workers joined or left; re-form at this commit
  kJobFinished,         // elastic: the job finished training before this worker joined; exit 0
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status Mismatch(std::string m) { return {StatusCode::kMismatch, std::move(m)}; }
  static Status Stalled(std::string m) { return {StatusCode::kStalled, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_ = Status::Internal("StatusOr constructed from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace khorovod

// Propagates a non-OK Status to the caller.
#define KH_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::khorovod::Status kh_status_ = (expr);  \
    if (!kh_status_.ok()) return kh_status_; \
  } while (0)
