// KH_ENFORCE: checks for invariants that only a bug in khorovod can break.
//
// A failed check throws InvariantViolation carrying the file, line and
// message. The runtime's background thread catches it and fails every pending
// operation with StatusCode::kInternal, so a bug never aborts the user's
// process or hangs its peers. Expected failures (bad input, dead peers) use
// Status instead; never KH_ENFORCE.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace khorovod {

class InvariantViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void ThrowInvariantViolation(const char* file, int line, const char* condition,
                                          const std::string& message);
}  // namespace detail

}  // namespace khorovod

#define KH_ENFORCE(condition, ...)                                                \
  do {                                                                            \
    if (!(condition)) {                                                           \
      std::ostringstream kh_enforce_msg_;                                         \
      kh_enforce_msg_ << "" __VA_ARGS__;                                          \
      ::khorovod::detail::ThrowInvariantViolation(__FILE__, __LINE__, #condition, \
                                                  kh_enforce_msg_.str());         \
    }                                                                             \
  } while (0)
