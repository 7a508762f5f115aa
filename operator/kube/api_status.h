// ApiStatus: the error model of the Kubernetes client layer.
//
// Every call to the API server returns an ApiStatus (or an ApiResult<T>, a
// value or the status explaining its absence). The kind is derived from the
// HTTP status code and the server's Status object, so callers branch on what
// happened (NotFound, Conflict, Gone, ...) rather than on numbers:
//   - kConflict (409 on update) and kAlreadyExists (409 on create) mean the
//     caller's view is stale: re-read and retry (the reconciler requeues);
//   - kGone (410) on a watch means the resourceVersion expired: re-list;
//   - kUnavailable covers transport failures (connect, TLS, timeout) and 5xx
//     answers: retry with backoff;
//   - kInvalid (422) and kForbidden (403) are terminal for the request as sent.
// Programming errors are not reported here: they throw. Reading the value of
// an ApiResult that holds an error throws std::bad_optional_access, and a
// malformed object (one without metadata) throws from nlohmann::json's at().
// The controller's worker loop catches what a reconcile throws and retries
// that key with backoff, loudly, so one bad object cannot stop the operator.
//
// Thread-safety: a value type.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace khorovod::kube {

enum class ApiCode {
  kOk = 0,
  kBadRequest,       // 400
  kUnauthorized,     // 401
  kForbidden,        // 403
  kNotFound,         // 404
  kConflict,         // 409 with reason Conflict (stale resourceVersion)
  kAlreadyExists,    // 409 with reason AlreadyExists
  kGone,             // 410: resourceVersion too old
  kInvalid,          // 422: rejected by validation (schema, CEL, admission)
  kTooManyRequests,  // 429
  kUnavailable,      // transport failure or 5xx
  kOther,            // any other status code
};

const char* ApiCodeName(ApiCode code);

class [[nodiscard]] ApiStatus {
 public:
  ApiStatus() = default;
  ApiStatus(ApiCode code, int http_status, std::string message)
      : code_(code), http_status_(http_status), message_(std::move(message)) {}

  static ApiStatus Ok() { return {}; }
  static ApiStatus Unavailable(std::string message) {
    return {ApiCode::kUnavailable, 0, std::move(message)};
  }
  // Classifies an HTTP answer; `body` is the server's Status JSON when it sent one.
  static ApiStatus FromHttp(int http_status, const std::string& body);

  bool ok() const { return code_ == ApiCode::kOk; }
  ApiCode code() const { return code_; }
  int http_status() const { return http_status_; }
  const std::string& message() const { return message_; }
  // Worth retrying the same request later (conflicts, throttling, outages).
  bool retryable() const {
    return code_ == ApiCode::kConflict || code_ == ApiCode::kTooManyRequests ||
           code_ == ApiCode::kUnavailable || code_ == ApiCode::kGone;
  }
  std::string ToString() const;

 private:
  ApiCode code_ = ApiCode::kOk;
  int http_status_ = 200;
  std::string message_;
};

template <typename T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  ApiResult(ApiStatus status) : status_(std::move(status)) {
    if (status_.ok())
      status_ = ApiStatus(ApiCode::kOther, 0, "ApiResult built from an OK status without a value");
  }
  bool ok() const { return value_.has_value(); }
  const ApiStatus& status() const { return status_; }
  // Each accessor throws std::bad_optional_access unless ok().
  T& value() & { return value_.value(); }
  const T& value() const& { return value_.value(); }
  T&& value() && { return std::move(value_).value(); }
  T* operator->() { return &value_.value(); }
  const T* operator->() const { return &value_.value(); }

 private:
  ApiStatus status_;
  std::optional<T> value_;
};

}  // namespace khorovod::kube
