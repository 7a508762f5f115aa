// Runs the real `promtool check metrics` (Debian package prometheus) on an
// exposition. The path comes from CMake (KHOROVOD_PROMTOOL); a missing tool
// is a test failure, not a skip, so the check can never pass vacuously.
#pragma once

#include <string>

namespace khorovod::metrics::testing {

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // promtool's stdout and stderr: the lint findings
  bool ok() const { return exit_code == 0 && output.empty(); }
};

PromtoolResult PromtoolCheckMetrics(const std::string& exposition);

}  // namespace khorovod::metrics::testing
